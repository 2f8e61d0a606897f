package namesrv

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/protocol"
)

// maxInflated bounds the decompressed size of a compressed REGISTER_BROKER
// body (a broker with 100k topics needs a few MiB).
const maxInflated = 64 << 20

var errBadBody = errors.New("namesrv: malformed register body")

// decodeRegisterBody parses a REGISTER_BROKER body, plain JSON or the
// compressed layout. An empty body is an empty topic table with a zero data
// version, as Java treats it.
func decodeRegisterBody(body []byte, compressed bool) (*protocol.RegisterBrokerBody, error) {
	out := &protocol.RegisterBrokerBody{}
	if len(body) > 0 {
		var err error
		if compressed {
			err = decodeCompressed(body, out)
		} else if err = json.Unmarshal(body, out); err != nil {
			err = fmt.Errorf("%w: %v", errBadBody, err)
		}
		if err != nil {
			return nil, err
		}
	}
	if out.TopicConfigSerializeWrapper.TopicConfigTable == nil {
		out.TopicConfigSerializeWrapper.TopicConfigTable = map[string]*protocol.TopicConfig{}
	}
	return out, nil
}

// decodeCompressed reads Java's RegisterBrokerBody.encode(true): a zlib
// stream of int32-length-prefixed chunks: the DataVersion JSON, an int32
// topic count, one chunk per topic, and the filter-server list JSON.
//
// Java writes each topic with TopicConfig.encode(), which is not JSON but
// "name read write perm filterType" separated by spaces (5.x adds a sixth
// field with attributes); a chunk starting with '{' is read as TopicConfig
// JSON instead, so encoders following the JSON wording of the spec work too.
func decodeCompressed(body []byte, out *protocol.RegisterBrokerBody) error {
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: zlib: %v", errBadBody, err)
	}
	defer zr.Close()
	r := &chunkReader{r: io.LimitReader(zr, maxInflated)}

	dv := r.chunk("data version")
	if r.err != nil {
		return r.err
	}
	wrapper := &out.TopicConfigSerializeWrapper
	if err := json.Unmarshal(dv, &wrapper.DataVersion); err != nil {
		return fmt.Errorf("%w: data version: %v", errBadBody, err)
	}
	n := r.int32("topic count")
	if r.err != nil {
		return r.err
	}
	if n < 0 {
		return fmt.Errorf("%w: topic count %d", errBadBody, n)
	}
	wrapper.TopicConfigTable = map[string]*protocol.TopicConfig{}
	for i := int32(0); i < n; i++ {
		b := r.chunk("topic config")
		if r.err != nil {
			return r.err
		}
		tc, err := parseTopicConfig(b)
		if err != nil {
			return err
		}
		wrapper.TopicConfigTable[tc.TopicName] = tc
	}
	fs := r.chunk("filter server list")
	if r.err != nil {
		return r.err
	}
	// Java logs and ignores a bad filter-server list; so do we.
	_ = json.Unmarshal(fs, &out.FilterServerList)
	return nil
}

func parseTopicConfig(b []byte) (*protocol.TopicConfig, error) {
	if len(b) > 0 && b[0] == '{' {
		tc := &protocol.TopicConfig{}
		if err := json.Unmarshal(b, tc); err != nil {
			return nil, fmt.Errorf("%w: topic config: %v", errBadBody, err)
		}
		if tc.TopicName == "" {
			return nil, fmt.Errorf("%w: topic config without topicName", errBadBody)
		}
		return tc, nil
	}
	f := strings.Split(string(b), " ")
	if len(f) < 5 || f[0] == "" {
		return nil, fmt.Errorf("%w: topic config %q: want \"name read write perm filterType\"", errBadBody, b)
	}
	tc := &protocol.TopicConfig{TopicName: f[0], TopicFilterType: f[4]}
	for i, dst := range []*int32{&tc.ReadQueueNums, &tc.WriteQueueNums, &tc.Perm} {
		v, err := strconv.ParseInt(f[i+1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: topic config %q: field %d: %v", errBadBody, b, i+1, err)
		}
		*dst = int32(v)
	}
	return tc, nil
}

// chunkReader reads big-endian int32s and length-prefixed chunks, keeping
// the first error.
type chunkReader struct {
	r   io.Reader
	err error
}

func (c *chunkReader) int32(what string) int32 {
	if c.err != nil {
		return 0
	}
	var b [4]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		c.err = fmt.Errorf("%w: %s: %v", errBadBody, what, err)
		return 0
	}
	return int32(binary.BigEndian.Uint32(b[:]))
}

func (c *chunkReader) chunk(what string) []byte {
	n := c.int32(what + " length")
	if c.err != nil {
		return nil
	}
	if n < 0 || n > maxInflated {
		c.err = fmt.Errorf("%w: %s length %d", errBadBody, what, n)
		return nil
	}
	// Read through a bounded buffer, not make([]byte, n): a lying length
	// must not allocate before the data arrives.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, c.r, int64(n)); err != nil {
		c.err = fmt.Errorf("%w: %s: %v", errBadBody, what, err)
		return nil
	}
	return buf.Bytes()
}
