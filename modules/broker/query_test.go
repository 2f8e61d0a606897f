package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// TestQueryMessageByKeyAndUniqKey: QUERY_MESSAGE finds messages by KEYS
// entries and by UNIQ_KEY within a time range, bounded by maxNum; unknown
// keys answer QUERY_NOT_FOUND.
func TestQueryMessageByKeyAndUniqKey(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	begin := time.Now().Add(-time.Minute).UnixMilli()
	for i := 0; i < 10; i++ {
		props := message.Properties{"KEYS": fmt.Sprintf("order-%d shared", i), "UNIQ_KEY": fmt.Sprintf("U%02d", i)}
		require.Equal(t, remoting.Success, h.send("Q", i%4, fmt.Sprint("body-", i), props).Code)
	}
	end := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	query := func(key string, max int, uniq bool) *remoting.Command {
		ext := map[string]string{"topic": "Q", "key": key, "maxNum": strconv.Itoa(max),
			"beginTimestamp": strconv.FormatInt(begin, 10), "endTimestamp": end}
		if uniq {
			ext["_UNIQUE_KEY_QUERY"] = "true"
		}
		return h.invoke(remoting.QueryMessage, ext, nil)
	}
	resp := query("order-3", 32, false)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	msgs, err := message.DecodeAll(resp.Body)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "body-3", string(msgs[0].Body))

	resp = query("shared", 4, false)
	require.Equal(t, remoting.Success, resp.Code)
	msgs, err = message.DecodeAll(resp.Body)
	require.NoError(t, err)
	assert.Len(t, msgs, 4, "bounded by maxNum")

	resp = query("U07", 1, true)
	require.Equal(t, remoting.Success, resp.Code)
	msgs, err = message.DecodeAll(resp.Body)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	assert.Equal(t, "body-7", string(msgs[0].Body))

	assert.Equal(t, remoting.QueryNotFound, query("nope", 32, false).Code)
	// Outside the time range nothing is found.
	ext := map[string]string{"topic": "Q", "key": "order-3", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(begin, 10)}
	assert.Equal(t, remoting.QueryNotFound, h.invoke(remoting.QueryMessage, ext, nil).Code)
}
