package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// benchFilterExpr is a typical 3-predicate subscription.
const benchFilterExpr = "region = 'hz' AND prio > 5 AND kind <> 'test'"

// BenchmarkPullFiltered measures PULL_MESSAGE through the broker with a
// SQL92 subscription (SUBSCRIPTION flag) over a queue of 1 KiB messages
// of which 100% or 1% match, next to an unfiltered ("*") pull. Each
// request asks for 32 messages; the store scans at most 800 consume-queue
// entries per request, so at 1% a request returns about 8. msgs/s are
// delivered messages, scanned/s the queue entries the broker read and
// evaluated.
func BenchmarkPullFiltered(b *testing.B) {
	h := startBrokerFiltersTB(b)
	const n = 20000
	body := make([]byte, 1024)
	fill := func(topic string, every int) {
		for i := 0; i < n; i++ {
			region := "bj"
			if i%every == 0 {
				region = "hz"
			}
			props := message.Properties{"region": region, "prio": "9", "kind": "real"}
			resp, err := h.client.Invoke(context.Background(), h.addr, remoting.NewRequest(remoting.SendMessage, sendExt(topic, 0, props), body))
			require.NoError(b, err)
			require.Equal(b, remoting.Success, resp.Code, resp.Remark)
		}
	}
	fill("Hit100", 1)
	fill("Hit1", 100)
	for _, bm := range []struct {
		name, topic, typ, expr string
	}{
		{"all/no-filter", "Hit100", filter.TypeTag, "*"},
		{"sql92/match-100pct", "Hit100", filter.TypeSQL92, benchFilterExpr},
		{"sql92/match-1pct", "Hit1", filter.TypeSQL92, benchFilterExpr},
	} {
		b.Run(bm.name, func(b *testing.B) {
			var off, delivered, scanned int64
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				ext := pullExt("G", bm.topic, 0, off, pullSubscription, 0)
				ext["expressionType"], ext["subscription"] = bm.typ, bm.expr
				resp, err := h.client.Invoke(context.Background(), h.addr, remoting.NewRequest(remoting.PullMessage, ext, nil))
				if err != nil {
					b.Fatal(err)
				}
				next, _ := strconv.ParseInt(resp.Ext("nextBeginOffset"), 10, 64)
				switch resp.Code {
				case remoting.Success:
					delivered += int64(countRecords(b, resp.Body))
				case remoting.PullRetryImmediately:
				default:
					b.Fatalf("pull: code %d %s", resp.Code, resp.Remark)
				}
				scanned += next - off
				off = next
				if off >= n-1 {
					off = 0
				}
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(delivered)/sec, "msgs/s")
			b.ReportMetric(float64(scanned)/sec, "scanned/s")
			b.ReportMetric(float64(delivered)/float64(b.N), "msgs/op")
		})
	}
}

func countRecords(b *testing.B, body []byte) int {
	msgs, err := message.DecodeAll(body)
	if err != nil {
		b.Fatal(err)
	}
	return len(msgs)
}

// startBrokerFiltersTB is startBrokerTB with the stock TAG and SQL92
// filters.
func startBrokerFiltersTB(b *testing.B) *harness {
	dir := b.TempDir()
	st := openStoreTB(b, dir)
	cfg := NewConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = "127.0.0.1:10911"
	br, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: dir, Filters: stockFilters(b, nil)})
	require.NoError(b, err)
	require.NoError(b, br.Start(context.Background()))
	h := &harness{b: br, st: st, dir: dir, addr: br.Addrs()[0]}
	h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	b.Cleanup(func() {
		h.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		br.Stop(ctx)
		st.Close()
	})
	return h
}
