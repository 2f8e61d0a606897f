package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bodies as Java 4.9's brokers and tools write them with fastjson:
// fields in alphabetical order, MessageQueue keys as objects.
const (
	// ConsumeStats (GET_CONSUME_STATS, 208).
	javaConsumeStats = `{"consumeTps":0.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":0}}}`
	// TopicStatsTable (GET_TOPIC_STATS_INFO, 202).
	javaTopicStats = `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":1700000000000,"maxOffset":12,"minOffset":2},{"brokerName":"broker-b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}`
	// ResetOffsetBody (INVOKE_BROKER_TO_RESET_OFFSET, 222 answer).
	javaResetOffset = `{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5,{"brokerName":"broker-a","queueId":1,"topic":"T"}:-1}}`
	// OffsetSerializeWrapper as LocalFileOffsetStore writes it
	// (toJson(true): fastjson's PrettyFormat, tabs).
	javaLocalOffsets = "{\n\t\"offsetTable\":{{\n\t\t\t\"brokerName\":\"broker-a\",\n\t\t\t\"queueId\":0,\n\t\t\t\"topic\":\"T\"\n\t\t}:5,{\n\t\t\t\"brokerName\":\"broker-a\",\n\t\t\t\"queueId\":1,\n\t\t\t\"topic\":\"T\"\n\t\t}:-1\n\t}\n}"
	// ConsumeStatsList (GET_BROKER_CONSUME_STATS, 317).
	javaConsumeStatsList = `{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"G":[{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000}}}]}],"totalDiff":3}`
)

type offsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

type topicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

func mq(topic, broker string, q int32) MessageQueue {
	return MessageQueue{Topic: topic, BrokerName: broker, QueueID: q}
}

func TestMQTableJavaBodies(t *testing.T) {
	t.Run("ConsumeStats", func(t *testing.T) {
		var got struct {
			ConsumeTps  float64                `json:"consumeTps"`
			OffsetTable MQTable[offsetWrapper] `json:"offsetTable"`
		}
		require.NoError(t, UnmarshalFastjson([]byte(javaConsumeStats), &got))
		assert.Equal(t, 0.5, got.ConsumeTps)
		assert.Equal(t, MQTable[offsetWrapper]{
			mq("T", "broker-a", 0): {10, 7, 1700000000000},
			mq("T", "broker-a", 1): {3, 3, 0},
		}, got.OffsetTable)
	})
	t.Run("TopicStatsTable", func(t *testing.T) {
		var got struct {
			OffsetTable MQTable[topicOffset] `json:"offsetTable"`
		}
		require.NoError(t, UnmarshalFastjson([]byte(javaTopicStats), &got))
		assert.Equal(t, MQTable[topicOffset]{
			mq("T", "broker-a", 0): {2, 12, 1700000000000},
			mq("T", "broker-b", 0): {},
		}, got.OffsetTable)
	})
	for name, body := range map[string]string{"ResetOffsetBody": javaResetOffset, "LocalFileOffsetStore": javaLocalOffsets} {
		t.Run(name, func(t *testing.T) {
			var got struct {
				OffsetTable MQTable[int64] `json:"offsetTable"`
			}
			require.NoError(t, UnmarshalFastjson([]byte(body), &got))
			assert.Equal(t, MQTable[int64]{mq("T", "broker-a", 0): 5, mq("T", "broker-a", 1): -1}, got.OffsetTable)
		})
	}
	t.Run("ConsumeStatsList", func(t *testing.T) {
		var got struct {
			BrokerAddr       string `json:"brokerAddr"`
			ConsumeStatsList []map[string][]struct {
				OffsetTable MQTable[offsetWrapper] `json:"offsetTable"`
			} `json:"consumeStatsList"`
			TotalDiff int64 `json:"totalDiff"`
		}
		require.NoError(t, UnmarshalFastjson([]byte(javaConsumeStatsList), &got))
		assert.Equal(t, "127.0.0.1:10911", got.BrokerAddr)
		assert.Equal(t, int64(3), got.TotalDiff)
		require.Len(t, got.ConsumeStatsList, 1)
		require.Len(t, got.ConsumeStatsList[0]["G"], 1)
		assert.Equal(t, MQTable[offsetWrapper]{mq("T", "broker-a", 0): {10, 7, 1700000000000}}, got.ConsumeStatsList[0]["G"][0].OffsetTable)
	})
}

// TestMQTableLenient: what fastjson's default features accept, and the
// other forms Go clients write.
func TestMQTableLenient(t *testing.T) {
	want := MQTable[int64]{mq("T", "b", 0): 5, mq("T", "b", 1): 7}
	tests := []struct {
		name string
		give string
	}{
		{"fastjson", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}}`},
		{"key order and extra fields", `{"offsetTable":{{"topic":"T","queueId":0,"brokerName":"b","extra":[1,{"x":null}]}:5,{"queueId":1,"brokerName":"b","topic":"T","readOnly":true}:7}}`},
		{"whitespace", " {\r\n \"offsetTable\" : { { \"brokerName\" : \"b\" , \"queueId\" : 0 , \"topic\" : \"T\" } : 5 ,\n{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"T\"}\t:\t7 } } \n"},
		{"unquoted names", `{offsetTable:{{brokerName:"b",queueId:0,topic:"T"}:5,{brokerName:"b",queueId:1,topic:"T"}:7}}`},
		{"single quotes", `{'offsetTable':{{'brokerName':'b','queueId':0,'topic':'T'}:5,{'brokerName':'b','queueId':1,'topic':'T'}:7}}`},
		{"arbitrary commas", `{,"offsetTable":{,,{"brokerName":"b",,"queueId":0,"topic":"T",}:5,,{"brokerName":"b","queueId":1,"topic":"T"}:7,},}`},
		{"numbers as strings", `{"offsetTable":{{"brokerName":"b","queueId":"0","topic":"T"}:"5",{"brokerName":"b","queueId":" 1 ","topic":"T"}:"7"}}`},
		{"long suffix", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5L,{"brokerName":"b","queueId":1,"topic":"T"}:7L}}`},
		{"comments", "{/* a */\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}:5, // b\n{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"T\"}:7}}"},
		{"field case", `{"offsetTable":{{"BROKERNAME":"b","QueueId":0,"Topic":"T"}:5,{"brokername":"b","queueid":1,"topic":"T"}:7}}`},
		{"gson pairs", `{"offsetTable":[[{"brokerName":"b","queueId":0,"topic":"T"},5],[{"brokerName":"b","queueId":1,"topic":"T"},7]]}`},
		{"string keys", `{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":5,"{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"T\"}":7}}`},
		{"string keys in fastjson", `{"offsetTable":{"{brokerName:'b',queueId:0,topic:'T'}":5,"{'brokerName':'b','queueId':1,'topic':'T'}":7}}`},
		{"other fields around", `{"a":{"offsetTable":1},"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7},"z":[{0:1}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				OffsetTable MQTable[int64] `json:"offsetTable"`
			}
			require.NoError(t, UnmarshalFastjson([]byte(tt.give), &got))
			assert.Equal(t, want, got.OffsetTable)
		})
	}
}

func TestFastjsonToJSON(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{`{0:5,1:7}`, `{"0":5,"1":7}`},
		{`{'a':'it''s'}`, ``},
		{`{'a':'say "hi"'}`, `{"a":"say \"hi\""}`},
		{`{"a":'\'\v\x41\0\u00e9'}`, `{"a":"'\u000b\u0041\u0000\u00e9"}`},
		{"{\"a\":\"tab\there\"}", `{"a":"tab\u0009here"}`},
		{`[007,-0.50,1E3,2e-2,3D,undefined,true,false,null]`, `[7,-0.50,1E3,2e-2,3,null,true,false,null]`},
		{`{"k":{}}`, `{"k":{}}`},
		{`{{}:1}`, `{"{}":1}`},
		{`{{"a":"x\"y"}:1}`, `{"{\"a\":\"x\\\"y\"}":1}`},
		{`  "s"  `, `"s"`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := FastjsonToJSON([]byte(tt.give))
			if tt.want == "" {
				require.ErrorIs(t, err, ErrFastjson)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.True(t, json.Valid(got), "%s", got)
		})
	}
}

func TestFastjsonRefuses(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"empty", "", "empty body"},
		{"unterminated object", `{"a":1`, "unexpected end in an object"},
		{"unterminated string", `{"a":"b`, "unterminated string"},
		{"missing colon", `{"a" 1}`, "want ':'"},
		{"garbage", `{"a":1}x`, "after the value"},
		{"bad value", `{"a":@}`, "want a value"},
		{"bad escape", `"\q"`, "bad escape"},
		{"bad hex escape", `"\x4"`, "bad \\x escape"},
		{"bad number", `[1.]`, "bad number"},
		{"number glued to a name", `[12ab]`, "bad number"},
		{"missing comma", `[1 2]`, "want ',' or ']'"},
		{"deep", strings.Repeat("[", MaxFastjsonDepth+1) + strings.Repeat("]", MaxFastjsonDepth+1), "nested deeper than 64"},
		{"deep keys", strings.Repeat("{", MaxFastjsonDepth+1), "nested deeper than 64"},
		{"unclosed comment", `/* x`, "want a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FastjsonToJSON([]byte(tt.give))
			require.ErrorIs(t, err, ErrFastjson)
			var fe *FastjsonError
			require.True(t, errors.As(err, &fe))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("depth at the limit", func(t *testing.T) {
		_, err := FastjsonToJSON([]byte(strings.Repeat("[", MaxFastjsonDepth) + strings.Repeat("]", MaxFastjsonDepth)))
		assert.NoError(t, err)
	})
	t.Run("size", func(t *testing.T) {
		_, err := FastjsonToJSON(make([]byte, MaxFastjsonSize+1))
		require.ErrorIs(t, err, ErrFastjson)
		assert.Contains(t, err.Error(), "exceeds the limit")
	})
}

func TestMQTableRefuses(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"integer key", `{"offsetTable":{0:5}}`, "is not an object"},
		{"queueId not a number", `{"offsetTable":{{"brokerName":"b","queueId":"x","topic":"T"}:5}}`, "not a 32-bit integer"},
		{"queueId too big", `{"offsetTable":{{"brokerName":"b","queueId":4294967296,"topic":"T"}:5}}`, "not a 32-bit integer"},
		{"topic an object", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":{}}:5}}`, "is not a string"},
		{"value not a number", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"five"}}`, "value of T@b@0"},
		{"value an object", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{}}}`, "value of T@b@0"},
		{"short pair", `{"offsetTable":[[{"brokerName":"b","queueId":0,"topic":"T"}]]}`, "has 1 elements"},
		{"not a table", `{"offsetTable":5}`, "message queue table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				OffsetTable MQTable[int64] `json:"offsetTable"`
			}
			err := UnmarshalFastjson([]byte(tt.give), &got)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("null and missing", func(t *testing.T) {
		var got struct {
			OffsetTable MQTable[int64] `json:"offsetTable"`
		}
		require.NoError(t, UnmarshalFastjson([]byte(`{"offsetTable":null}`), &got))
		assert.Empty(t, got.OffsetTable)
		require.NoError(t, UnmarshalFastjson([]byte(`{}`), &got))
		assert.Empty(t, got.OffsetTable)
	})
}

func TestParseMQKey(t *testing.T) {
	got, err := ParseMQKey([]byte(`{"brokerName":"b","queueId":3,"topic":"%RETRY%G"}`))
	require.NoError(t, err)
	assert.Equal(t, mq("%RETRY%G", "b", 3), got)
	got, err = ParseMQKey([]byte(`{"topic":"T"}`))
	require.NoError(t, err, "missing fields keep their zero values, as in Java")
	assert.Equal(t, mq("T", "", 0), got)
	_, err = ParseMQKey([]byte(`[1]`))
	assert.ErrorContains(t, err, "is not an object")
}

// appendFastjsonTable writes t as Java's fastjson does.
func appendFastjsonTable(t MQTable[int64]) []byte {
	var sb strings.Builder
	sb.WriteString(`{"offsetTable":{`)
	i := 0
	for k, v := range t {
		if i > 0 {
			sb.WriteByte(',')
		}
		i++
		bn, _ := json.Marshal(k.BrokerName)
		tp, _ := json.Marshal(k.Topic)
		sb.WriteString(`{"brokerName":` + string(bn) + `,"queueId":` + strconv.Itoa(int(k.QueueID)) + `,"topic":` + string(tp) + `}:` + strconv.FormatInt(v, 10))
	}
	sb.WriteString(`}}`)
	return []byte(sb.String())
}

// FuzzMQTable: the rewrite never panics, stays within its bounds, writes
// valid JSON that reads as encoding/json reads the input when that is
// standard JSON, and a table that parses survives a round trip through
// Java's form.
func FuzzMQTable(f *testing.F) {
	for _, s := range []string{javaConsumeStats, javaTopicStats, javaResetOffset, javaLocalOffsets, javaConsumeStatsList,
		`{offsetTable:{{'brokerName':'b',queueId:"0",topic:'T'}:5L,,}}`, `{"offsetTable":[[{"topic":"T"},1]]}`,
		`{"a":"\x41\v\'"}`, `[1e5,-0,007]`, `{0:1}`, "/*c*/{//d\n}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		std, err := FastjsonToJSON(body)
		if err != nil {
			require.ErrorIs(t, err, ErrFastjson)
		} else {
			require.True(t, json.Valid(std), "not JSON: %q from %q", std, body)
			again, err := FastjsonToJSON(std)
			require.NoError(t, err)
			require.Equal(t, string(std), string(again), "standard JSON is a fixed point")
			if json.Valid(body) {
				var a, b any
				if json.Unmarshal(body, &a) == nil {
					require.NoError(t, json.Unmarshal(std, &b))
					require.True(t, reflect.DeepEqual(a, b), "%q read as %v, rewritten %q as %v", body, a, std, b)
				}
			}
		}
		var tbl struct {
			OffsetTable MQTable[int64] `json:"offsetTable"`
		}
		if UnmarshalFastjson(body, &tbl) != nil {
			return
		}
		var back struct {
			OffsetTable MQTable[int64] `json:"offsetTable"`
		}
		require.NoError(t, UnmarshalFastjson(appendFastjsonTable(tbl.OffsetTable), &back))
		if len(tbl.OffsetTable) == 0 {
			require.Empty(t, back.OffsetTable)
			return
		}
		require.Equal(t, tbl.OffsetTable, back.OffsetTable)
	})
}

// TestDecodeTopicRouteData: a route as Java 4.9's name server writes it
// (brokerAddrs keyed by unquoted numbers) and as standard JSON decode to
// the same value; a string holding what looks like such a key ("b,1:x")
// is left as it is, and a body that is neither is refused.
func TestDecodeTopicRouteData(t *testing.T) {
	java := `{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b,1:x","cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b,1:x","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	std := `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"b,1:x","cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b,1:x","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	a, err := DecodeTopicRouteData([]byte(java))
	require.NoError(t, err)
	b, err := DecodeTopicRouteData([]byte(std))
	require.NoError(t, err)
	assert.Equal(t, b, a)
	require.Len(t, a.BrokerDatas, 1)
	assert.Equal(t, "b,1:x", a.BrokerDatas[0].BrokerName)
	assert.Equal(t, "127.0.0.1:10921", a.BrokerDatas[0].BrokerAddrs[1])
	assert.Equal(t, int32(4), a.QueueDatas[0].WriteQueueNums)

	_, err = DecodeTopicRouteData([]byte(`{"brokerDatas":[`))
	assert.Error(t, err)
}
