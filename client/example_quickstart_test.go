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

// Send messages with a tag and keys, then receive them with a push
// consumer: the usual application shape.
func Example_sendAndReceive() {
	nameServer, stop := startExampleServer() // your name servers, e.g. "10.0.0.1:9876"
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// One client per process: producers and consumers share its
	// connections, route cache and heartbeats. transports.WithDialer
	// links TCP (and QUIC for quic:// addresses).
	c, err := client.New(client.WithNameServers(nameServer), transports.WithDialer())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p, err := producer.New(c, "order-producer")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)
	for _, order := range []string{"order 1", "order 2", "order 3"} {
		msg := client.NewMessage("Orders", []byte(order)).SetTag("created").SetKeys(order)
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("sent:", order, res.Status)
	}

	received := make(chan string, 3)
	pc, err := consumer.NewPush(c, "order-consumer", func(ctx context.Context, msgs []*client.MessageExt) consumer.Result {
		for _, m := range msgs {
			received <- string(m.Body)
		}
		return consumer.ConsumeSuccess // commits; an error result redelivers later
	}, consumer.WithConsumeFrom(consumer.FromFirstOffset), consumer.WithOrderly())
	if err != nil {
		log.Fatal(err)
	}
	if err := pc.Subscribe("Orders", consumer.Tags("created || paid")); err != nil {
		log.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer pc.Shutdown(ctx)
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case body := <-received:
			got[body] = true
		case <-ctx.Done():
			log.Fatal("not all received")
		}
	}
	fmt.Println("received:", len(got), "orders")
	// Output:
	// sent: order 1 SEND_OK
	// sent: order 2 SEND_OK
	// sent: order 3 SEND_OK
	// received: 3 orders
}

// Create a topic, send to it and read a queue from the start with a pull
// consumer, which chooses queues and offsets itself.
func Example_pull() {
	nameServer, stop := startExampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(client.WithNameServers(nameServer), transports.WithDialer())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// One queue, so that everything lands on it in order.
	adm := admin.New(c)
	if err := adm.CreateTopic(ctx, admin.TopicConfig{Topic: "Sensors", ReadQueueNums: 1, WriteQueueNums: 1}); err != nil {
		log.Fatal(err)
	}
	// The broker tells the name servers about the new topic right after
	// answering; wait until they route it.
	for {
		if _, err := adm.Route(ctx, "Sensors"); err == nil {
			break
		} else if ctx.Err() != nil {
			log.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, err := producer.New(c, "sensor-producer")
	if err != nil {
		log.Fatal(err)
	}
	defer p.Shutdown(ctx)
	for _, reading := range []string{"t=21.5", "t=21.7", "t=22.0"} {
		if _, err := p.SendSync(ctx, client.NewMessage("Sensors", []byte(reading)).SetTag("temperature")); err != nil {
			log.Fatal(err)
		}
	}

	pull, err := consumer.NewPull(c, "sensor-reader")
	if err != nil {
		log.Fatal(err)
	}
	if err := pull.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer pull.Shutdown(ctx)
	queues, err := pull.Queues(ctx, "Sensors")
	if err != nil {
		log.Fatal(err)
	}
	res, err := pull.Pull(ctx, queues[0], consumer.Tags("temperature"), 0, 32)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.QueueOffset, string(m.Body))
	}
	// Remember where to go on next time (the broker keeps it for the group).
	if err := pull.CommitOffset(ctx, queues[0], res.NextBeginOffset); err != nil {
		log.Fatal(err)
	}
	committed, err := pull.CommittedOffset(ctx, queues[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed:", committed)
	// Output:
	// 0 t=21.5
	// 1 t=21.7
	// 2 t=22.0
	// committed: 3
}
