package interop

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestRecordCRCHidden: the official client's push consumer and mq admin's
// queryMsgByKey (QUERY_MESSAGE) see no __CRC32# property, as with Java's
// default enabledAppendPropCRC=false, although the commit log keeps the
// checksum in every record; broker.deliver_record_crc=true shows it, as
// Java with the switch on.
func TestRecordCRCHidden(t *testing.T) {
	for _, tt := range []struct {
		name string
		sets []string
		want bool
	}{
		{"default", nil, false},
		{"deliver_record_crc", []string{"broker.deliver_record_crc=true"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := testserver.StartDev(t, testserver.Options{Sets: tt.sets})
			topic := uniq("CRC")
			p := newProducer(t, srv.Namesrv)
			a := newArrivals()
			readyConsumer(t, srv.Namesrv, p, topic, uniq("CG"), a)

			m := primitive.NewMessage(topic, []byte("checked"))
			m.WithKeys([]string{"crc-key"})
			m.WithProperty("color", "blue")
			sendSync(t, p, m)
			a.waitN(t, "checked", 1, 20*time.Second)
			got := a.deliveries("checked")[0]
			assert.Equal(t, "blue", got.GetProperty("color"))
			_, shown := got.GetProperties()[store.PropertyRecordCRC]
			assert.Equal(t, tt.want, shown, "pulled properties: %v", got.GetProperties())

			out := mqAdmin(t, srv, "queryMsgByKey", "-t", topic, "-k", "crc-key", "--output", "json")
			require.Contains(t, out, "crc-key")
			assert.Equal(t, tt.want, strings.Contains(out, store.PropertyRecordCRC), "queryMsgByKey:\n%s", out)
		})
	}
}
