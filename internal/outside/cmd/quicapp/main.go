// Command quicapp is an application built outside Quiver's module: it
// sends messages with keys to a topic over quic:// and receives them with
// two push consumers, one subscribed to every message and one with the
// out-of-tree SUFFIX filter, then prints what each received.
//
//	quicapp -namesrv quic://127.0.0.1:9876 -topic T -n 20
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
)

func main() {
	ns := flag.String("namesrv", "quic://127.0.0.1:9876", "name server address")
	topic := flag.String("topic", "OutsideOrders", "topic")
	n := flag.Int("n", 20, "messages to send; every other one has a key ending -eu")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := run(ctx, *ns, *topic, *n); err != nil {
		cancel()
		log.Printf("quicapp: %v", err)
		os.Exit(1) //nolint:gocritic // cancel ran above
	}
}

func run(ctx context.Context, ns, topic string, n int) error {
	// mq dev's self-signed certificate: a real deployment sets the CA.
	c, err := client.New(client.WithNameServers(ns), transports.WithDialer(transports.WithInsecureQUIC()))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer c.Close()
	if err := admin.New(c).CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: 2, WriteQueueNums: 2}); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	p, err := producer.New(c, "outside-producer")
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer p.Shutdown(ctx)
	for i := range n {
		key := fmt.Sprintf("order-%d-us", i)
		if i%2 == 1 {
			key = fmt.Sprintf("order-%d-eu", i)
		}
		if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte(key)).SetKeys(key)); err != nil {
			return fmt.Errorf("send %s: %w", key, err)
		}
	}
	fmt.Println("sent:", n)
	all, err := receive(ctx, c, "outside-all", topic, consumer.All(), n)
	if err != nil {
		return err
	}
	eu, err := receive(ctx, c, "outside-eu", topic, consumer.Selector{Type: "SUFFIX", Expression: "-eu"}, n/2)
	if err != nil {
		return err
	}
	fmt.Println("received all:", len(all))
	fmt.Println("received SUFFIX -eu:", strings.Join(eu, " "))
	return nil
}

// receive consumes topic from its first offset with sel until want
// distinct bodies arrived, waits a moment for any extra one, and returns
// the bodies sorted.
func receive(ctx context.Context, c *client.Client, group, topic string, sel consumer.Selector, want int) ([]string, error) {
	var mu sync.Mutex
	got := map[string]bool{}
	enough := make(chan struct{})
	var once sync.Once
	pc, err := consumer.NewPush(c, group, func(_ context.Context, msgs []*client.MessageExt) consumer.Result {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
		if len(got) >= want {
			once.Do(func() { close(enough) })
		}
		return consumer.ConsumeSuccess
	}, consumer.WithConsumeFrom(consumer.FromFirstOffset))
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", group, err)
	}
	if err := pc.Subscribe(topic, sel); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", group, err)
	}
	if err := pc.Start(ctx); err != nil {
		return nil, fmt.Errorf("start %s: %w", group, err)
	}
	defer pc.Shutdown(ctx)
	select {
	case <-enough:
	case <-ctx.Done():
		return nil, fmt.Errorf("consumer %s: %d of %d received: %w", group, len(got), want, ctx.Err())
	}
	// Anything the filter should have held back would arrive with the
	// same pulls; a short grace catches a late one.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(got))
	for b := range got {
		out = append(out, b)
	}
	sort.Strings(out)
	return out, nil
}
