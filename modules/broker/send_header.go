package broker

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// sendHeader is SEND_MESSAGE's custom header, read from the long (10) or
// short (310, 320, 325) key names.
type sendHeader struct {
	producerGroup         string
	topic                 string
	defaultTopic          string
	defaultTopicQueueNums int32
	queueID               int32
	sysFlag               int32
	bornTimestamp         int64
	flag                  int32
	properties            string
	reconsumeTimes        int32
	maxReconsumeTimes     int32
	batch                 bool
}

// The header's fields by index: the long names of SEND_MESSAGE and the
// one-letter names of SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
// (SendMessageRequestHeaderV2). unitMode (k) is not read.
const (
	shProducerGroup = iota
	shTopic
	shDefaultTopic
	shDefaultTopicQueueNums
	shQueueID
	shSysFlag
	shBornTimestamp
	shFlag
	shProperties
	shReconsumeTimes
	shUnitMode
	shMaxReconsumeTimes
	shBatch
	shFields
)

var longKeys = [shFields]string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch"}
var shortKeys = [shFields]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"}

// parseSendHeader reads h from req's extFields. h is the caller's (on its
// stack: no allocation per send). A request decoded without its header map
// (remoting.Mode.NoExtMap) is read from its raw entries, without
// building the map; the result and the error are those of
// parseSendHeaderMap on the map (FuzzSendHeaderTyped checks it).
func parseSendHeader(req *remoting.Command, h *sendHeader) error {
	fields, ok := req.RawExtFields()
	if !ok {
		return parseSendHeaderMap(req, h)
	}
	short := shortSendKeys(req.Code)
	// The values live in r itself: r stays on the stack (a pointer to a
	// separate array made the array escape, 312 bytes per send).
	var r rawHeaderReader
	for _, f := range fields {
		if i := sendKeyIndex(f.Key, short); i >= 0 {
			r.vals[i] = f.Value // the last entry wins; null (nil) removes
		}
	}
	r.keys = &longKeys
	if short {
		r.keys = &shortKeys
	}
	*h = sendHeader{
		producerGroup:         r.str(shProducerGroup),
		topic:                 r.str(shTopic),
		defaultTopic:          r.optStr(shDefaultTopic),
		defaultTopicQueueNums: r.optInt32(shDefaultTopicQueueNums, protocol.DefaultTopicQueueNum),
		queueID:               r.int32(shQueueID),
		sysFlag:               r.optInt32(shSysFlag, 0),
		bornTimestamp:         r.optInt64(shBornTimestamp, 0),
		flag:                  r.optInt32(shFlag, 0),
		properties:            r.optStr(shProperties),
		reconsumeTimes:        r.optInt32(shReconsumeTimes, 0),
		maxReconsumeTimes:     r.optInt32(shMaxReconsumeTimes, 16),
		batch:                 r.boolean(shBatch),
	}
	return r.err
}

// parseSendHeaderMap reads h from req's ExtFields map (remoting.ReadExt);
// the typed path above must agree with it.
func parseSendHeaderMap(req *remoting.Command, h *sendHeader) error {
	keys := &longKeys
	if shortSendKeys(req.Code) {
		keys = &shortKeys
	}
	e := remoting.ReadExt(req)
	*h = sendHeader{
		producerGroup:         e.String(keys[shProducerGroup]),
		topic:                 e.String(keys[shTopic]),
		defaultTopic:          e.OptString(keys[shDefaultTopic]),
		defaultTopicQueueNums: e.OptInt32(keys[shDefaultTopicQueueNums], protocol.DefaultTopicQueueNum),
		queueID:               e.Int32(keys[shQueueID]),
		sysFlag:               e.OptInt32(keys[shSysFlag], 0),
		bornTimestamp:         e.OptInt64(keys[shBornTimestamp], 0),
		flag:                  e.OptInt32(keys[shFlag], 0),
		properties:            e.OptString(keys[shProperties]),
		reconsumeTimes:        e.OptInt32(keys[shReconsumeTimes], 0),
		maxReconsumeTimes:     e.OptInt32(keys[shMaxReconsumeTimes], 16),
		batch:                 e.Bool(keys[shBatch]),
	}
	return e.Err
}

func shortSendKeys(code int32) bool {
	return code == remoting.SendMessageV2 || code == remoting.SendBatchMessage || code == remoting.SendReplyMessageV2
}

// sendKeyIndex is the field k names, or -1.
func sendKeyIndex(k []byte, short bool) int {
	if short {
		if len(k) == 1 && k[0] >= 'a' && k[0] < 'a'+shFields {
			return int(k[0] - 'a')
		}
		return -1
	}
	switch string(k) { // no allocation: compared in place
	case "producerGroup":
		return shProducerGroup
	case "topic":
		return shTopic
	case "defaultTopic":
		return shDefaultTopic
	case "defaultTopicQueueNums":
		return shDefaultTopicQueueNums
	case "queueId":
		return shQueueID
	case "sysFlag":
		return shSysFlag
	case "bornTimestamp":
		return shBornTimestamp
	case "flag":
		return shFlag
	case "properties":
		return shProperties
	case "reconsumeTimes":
		return shReconsumeTimes
	case "unitMode":
		return shUnitMode
	case "maxReconsumeTimes":
		return shMaxReconsumeTimes
	case "batch":
		return shBatch
	}
	return -1
}

// rawHeaderReader reads the header's values as remoting.Ext reads the map
// (the same defaults, parsing and first error), from bytes.
type rawHeaderReader struct {
	keys *[shFields]string
	vals [shFields][]byte // nil: absent
	err  error
}

func (r *rawHeaderReader) fail(i int, v []byte, reason string) {
	if r.err == nil {
		r.err = &remoting.HeaderError{Field: r.keys[i], Value: string(v), Reason: reason}
	}
}

func (r *rawHeaderReader) str(i int) string {
	v := r.vals[i]
	if v == nil {
		r.fail(i, nil, "missing")
		return ""
	}
	return string(v)
}

func (r *rawHeaderReader) optStr(i int) string { return string(r.vals[i]) }

func (r *rawHeaderReader) int32(i int) int32 {
	v := r.vals[i]
	if v == nil {
		r.fail(i, nil, "missing")
		return 0
	}
	n, ok := parseExtInt(v, 32)
	if !ok {
		r.fail(i, v, "not a 32-bit integer")
	}
	return int32(n)
}

func (r *rawHeaderReader) optInt32(i int, def int32) int32 {
	v := r.vals[i]
	if len(v) == 0 {
		return def
	}
	n, ok := parseExtInt(v, 32)
	if !ok {
		r.fail(i, v, "not a 32-bit integer")
	}
	return int32(n)
}

func (r *rawHeaderReader) optInt64(i int, def int64) int64 {
	v := r.vals[i]
	if len(v) == 0 {
		return def
	}
	n, ok := parseExtInt(v, 64)
	if !ok {
		r.fail(i, v, "not an integer")
	}
	return n
}

// boolean is Ext.Bool: "true" in any case, spaces trimmed.
func (r *rawHeaderReader) boolean(i int) bool {
	return bytes.EqualFold(bytes.TrimSpace(r.vals[i]), litTrue)
}

var litTrue = []byte("true")

// parseExtInt is strconv.ParseInt(strings.TrimSpace(string(v)), 10,
// bitSize) as remoting.Ext parses, with plain digits read in place.
func parseExtInt(v []byte, bitSize int) (int64, bool) {
	if n, ok := plainInt(v, bitSize); ok {
		return n, true
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, bitSize)
	return n, err == nil
}

// plainInt reads an optional sign and up to 18 digits that fit bitSize;
// anything else (spaces, more digits) is left to strconv.
func plainInt(v []byte, bitSize int) (int64, bool) {
	d := v
	neg := false
	if len(d) > 0 && (d[0] == '-' || d[0] == '+') {
		neg, d = d[0] == '-', d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if bitSize == 32 && (n > math.MaxInt32 || n < math.MinInt32) {
		return 0, false
	}
	return n, true
}
