package mgmt

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/osiris"
)

// Ensure a publisher held by flow control shows state "flow" in
// /api/connections and its publishing channel in /api/channels, as
// RabbitMQ's do, while the queue's writer is held, and that it finishes
// once the writer goes on.
func TestConnectionFlowState(t *testing.T) {
	var gated atomic.Bool
	release := make(chan struct{})
	tb := startBrokerWith(t, brokerOpts{publishCredit: 32 << 10, stream: osiris.Options{BeforeCycle: func() {
		if gated.Load() {
			<-release // a disk that does not write until the test says so
		}
	}}})
	releaseWriters := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseWriters) // before the broker stops (cleanups run last first)

	c, err := amqp091.Dial(tb.amqpURL("guest", "guest", "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("flow-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	gated.Store(true)
	const n = 1000
	body := make([]byte, 1024) // n*1 KiB: 30 times the credit
	published := make(chan error, 1)
	go func() {
		for range n {
			if err := ch.PublishWithContext(context.Background(), "", "flow-q", false, false, amqp091.Publishing{DeliveryMode: 2, Body: body}); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()

	var name string
	eventually(t, `the connection to show state "flow"`, func() bool {
		for _, co := range tb.guest("GET", "/api/connections", nil).list(t) {
			if co["state"] == "flow" {
				name, _ = co["name"].(string)
				return true
			}
		}
		return false
	})
	co := tb.guest("GET", "/api/connections/"+url.PathEscape(name), nil).obj(t)
	if co["state"] != "flow" {
		t.Errorf("/api/connections/{name} state %v, want flow", co["state"])
	}
	chans := tb.guest("GET", "/api/channels", nil).list(t)
	if len(chans) != 1 || chans[0]["state"] != "flow" {
		t.Errorf("channels %v, want one in state flow", chans)
	}

	gated.Store(false)
	releaseWriters()
	if err := <-published; err != nil {
		t.Fatalf("publish: %v", err)
	}
	eventually(t, "every message to be stored", func() bool {
		return num(t, tb.guest("GET", "/api/queues/%2F/flow-q", nil).obj(t)["messages"]) == n
	})
}
