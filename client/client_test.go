package client

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseRoute(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"quoted", `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"b","cluster":"c"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"writeQueueNums":4}]}`},
		{"java unquoted keys", `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b","cluster":"c"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"writeQueueNums":4}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd, err := ParseRoute([]byte(tt.give))
			require.NoError(t, err)
			r := buildRoute("T", rd)
			assert.Equal(t, "10.0.0.1:10911", rd.BrokerDatas[0].BrokerAddrs[0])
			assert.Len(t, r.Publish, 4)
			assert.Len(t, r.Subscribe, 4)
		})
	}
}

func TestBuildRouteSkipsReadOnlyAndMasterless(t *testing.T) {
	rd, err := ParseRoute([]byte(`{"brokerDatas":[{"brokerAddrs":{"0":"1.1.1.1:1"},"brokerName":"a"},{"brokerAddrs":{"1":"2.2.2.2:1"},"brokerName":"b"}],` +
		`"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,"writeQueueNums":2},{"brokerName":"a","perm":4,"readQueueNums":3,"writeQueueNums":3}]}`))
	require.NoError(t, err)
	r := buildRoute("T", rd)
	assert.Empty(t, r.Publish, "a is read-only, b has no master")
	assert.Len(t, r.Subscribe, 5)
	assert.Equal(t, "a", r.Subscribe[0].BrokerName, "sorted by broker name")
}

func TestParseOffsetTable(t *testing.T) {
	want := map[MessageQueue]int64{{Topic: "T", BrokerName: "b", QueueID: 0}: 5, {Topic: "T", BrokerName: "b", QueueID: 1}: 7}
	tests := []struct {
		name string
		give string
	}{
		{"fastjson", `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}}`},
		{"gson pairs", `{"offsetTable":[[{"brokerName":"b","queueId":0,"topic":"T"},5],[{"brokerName":"b","queueId":1,"topic":"T"},7]]}`},
		{"string keys", `{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":5,"{\"brokerName\":\"b\",\"queueId\":1,\"topic\":\"T\"}":7}}`},
		{"own encoding", string(EncodeOffsetTable("offsetTable", want))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOffsetTable([]byte(tt.give))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestUniqID(t *testing.T) {
	u := newUniqIDs()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.Local)
	a, b := u.id(now), u.id(now)
	assert.NotEqual(t, a, b)
	assert.Regexp(t, regexp.MustCompile(`^[0-9A-F]{20}[0-9a-f]{12}$`), a)
}

func TestNewSubscription(t *testing.T) {
	s := NewSubscription("T", "TAG", "TagB || TagA ||  ")
	assert.Equal(t, []string{"TagA", "TagB"}, s.TagsSet)
	assert.Equal(t, []string{"2598919", "2598920"}, s.CodeSet)
	assert.Equal(t, "*", NewSubscription("T", "TAG", " ").SubString)
	sql := NewSubscription("T", "SQL92", "a > 1")
	assert.Empty(t, sql.TagsSet)
	assert.Equal(t, "SQL92", sql.ExpressionType)
}

// TestSignBodyParts: a request whose body is a vector is signed as the
// same bytes in one piece (automatic batches send vectors).
func TestSignBodyParts(t *testing.T) {
	c := &Client{opts: options{accessKey: "AK", secretKey: "SK"}}
	whole := NewRequest(320, map[string]string{"a": "PG", "b": "T"}, []byte("head|body|tail"))
	parts := NewRequest(320, map[string]string{"a": "PG", "b": "T"}, nil)
	parts.BodyParts = [][]byte{[]byte("head|"), []byte("body"), []byte("|tail")}
	c.sign(whole)
	c.sign(parts)
	require.NotEmpty(t, whole.ExtFields["Signature"])
	assert.Equal(t, whole.ExtFields["Signature"], parts.ExtFields["Signature"])
	other := NewRequest(320, map[string]string{"a": "PG", "b": "T"}, []byte("head|body|tail!"))
	c.sign(other)
	assert.NotEqual(t, whole.ExtFields["Signature"], other.ExtFields["Signature"])
}
