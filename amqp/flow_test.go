package amqp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/internal/flow"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
)

// Ensure a publisher that does not wait for confirms, flooding a durable
// queue and a stream (one fanout exchange to both) while their log
// writers are held, is held by flow control: the broker never holds more
// of its messages than the connection's credit plus one message (by the
// broker's own accounting), its reader stops before the client is done,
// the connection and its channel show "flow", and once the writers go on
// every message arrives in both, in order, exactly once.
func TestFlowControlHoldsPublisher(t *testing.T) {
	const (
		credit = 64 << 10
		n      = 2000
		size   = 1024 // n*size is 30 times the credit
	)
	var gated atomic.Bool
	release := make(chan struct{})
	tb := startBroker(t, brokerOpts{
		cfg: Config{PublishCredit: credit},
		queues: queues.Options{StreamOptions: osiris.Options{BeforeCycle: func() {
			if gated.Load() {
				<-release // a disk that does not write until the test says so
			}
		}}},
	})
	releaseWriters := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseWriters) // before the broker stops (cleanups run last first)

	c := tb.dial(t)
	ch, err := c.Channel()
	must(t, err)
	must(t, ch.ExchangeDeclare("flow", "fanout", true, false, false, false, nil))
	_, err = ch.QueueDeclare("flow-q", true, false, false, false, nil)
	must(t, err)
	declareStream(t, ch, "flow-s", nil)
	must(t, ch.QueueBind("flow-q", "", "flow", false, nil))
	must(t, ch.QueueBind("flow-s", "", "flow", false, nil))
	gated.Store(true)

	pubConn := tb.dial(t)
	pub, err := pubConn.Channel()
	must(t, err)
	body := func(i int) string { return fmt.Sprintf("%06d-", i) + strings.Repeat("x", size-7) }
	published := make(chan error, 1)
	go func() {
		for i := range n {
			err := pub.PublishWithContext(context.Background(), "flow", "", false, false,
				amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body(i))})
			if err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()

	var pc *conn
	eventually(t, "the publisher's reader to be held by flow control", func() bool {
		for _, x := range tb.broker.Conns() {
			if x := x.(*conn); x.credit.Waiting() {
				pc = x
				return true
			}
		}
		return false
	})
	// A message's charge: exchange, key, properties (delivery mode: a
	// few bytes), body and the fixed overhead.
	bound := int64(credit + len("flow") + 16 + size + flow.MessageOverhead)
	if p := pc.credit.Peak(); p > bound {
		t.Errorf("the broker held %d bytes of the publisher's messages; want at most %d (credit %d plus one message)", p, bound, credit)
	}
	if got := pc.ctr.Received.Load(); got >= n {
		t.Errorf("the held reader had read all %d messages", got)
	}
	info := pc.Info()
	if info.State != queues.StateFlow {
		t.Errorf("held connection state %q, want %q", info.State, queues.StateFlow)
	}
	for _, ci := range info.AMQPChannels {
		if ci.Publishing && ci.State != queues.StateFlow {
			t.Errorf("publishing channel %d state %q, want %q", ci.Number, ci.State, queues.StateFlow)
		}
	}

	gated.Store(false)
	releaseWriters()
	if err := <-published; err != nil {
		t.Fatalf("publish: %v", err)
	}
	// The client's publishes return once written to its socket.
	eventually(t, "the broker to read every message", func() bool { return pc.ctr.Received.Load() == n })
	eventually(t, "every message to be written and its credit given back", func() bool { return pc.credit.Held() == 0 })
	if p := pc.credit.Peak(); p > bound {
		t.Errorf("the broker held %d bytes of the publisher's messages; want at most %d", p, bound)
	}
	// Every hold ended before the last message was read.
	if pc.credit.Holds() == 0 || pc.ctr.FlowHolds.Load() != pc.credit.Holds() {
		t.Errorf("holds: credit %d, warren_flow_control_holds_total's counter %d; want equal, above 0", pc.credit.Holds(), pc.ctr.FlowHolds.Load())
	}

	want := make([]string, n)
	for i := range want {
		want[i] = body(i)
	}
	qd, err := ch.Consume("flow-q", "", true, false, false, false, nil)
	must(t, err)
	if got := bodies(recvN(t, qd, n)); !slicesEqual(got, want) {
		t.Errorf("durable queue delivered %d messages not in publish order", len(got))
	}
	if q, err := ch.QueueDeclarePassive("flow-q", true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Errorf("durable queue after delivering all: %d messages, %v; want 0", q.Messages, err)
	}
	_, sd := consumeStreamQ(t, c, "flow-s", n, amqp091.Table{"x-stream-offset": "first"})
	ds := recvN(t, sd, n)
	ackAll(t, ds)
	if got := bodies(ds); !slicesEqual(got, want) {
		t.Errorf("stream delivered %d messages not in publish order", len(got))
	}
	// Offsets 0 ... n-1 for n messages in order: none is there twice.
	if first, last := offsetOf(t, ds[0]), offsetOf(t, ds[n-1]); first != 0 || last != n-1 {
		t.Errorf("stream offsets %d ... %d, want 0 ... %d", first, last, n-1)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
