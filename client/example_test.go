package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
)

// A producer and a push consumer sharing one client, over QUIC.
func Example() {
	c, err := client.New(
		client.WithNameServers("quic://127.0.0.1:9876"),
		transports.WithDialer(transports.WithInsecureQUIC()),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	if err := admin.New(c).CreateTopic(ctx, admin.TopicConfig{Topic: "Orders", ReadQueueNums: 4, WriteQueueNums: 4}); err != nil {
		log.Fatal(err)
	}

	p, err := producer.New(c, "order-producer")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)
	res, err := p.SendSync(ctx, client.NewMessage("Orders", []byte("order 42")).SetTag("created").SetShardingKey("customer-7"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status)

	pc, err := consumer.NewPush(c, "order-consumer", func(ctx context.Context, msgs []*client.MessageExt) consumer.Result {
		for _, m := range msgs {
			fmt.Printf("%s %s\n", m.Tag(), m.Body)
		}
		return consumer.ConsumeSuccess
	}, consumer.WithOrderly())
	if err != nil {
		log.Fatal(err)
	}
	if err := pc.Subscribe("Orders", consumer.Tags("created || paid")); err != nil {
		log.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		log.Fatal(err)
	}
	time.Sleep(time.Second)
	pc.Shutdown(ctx)
}
