package queues

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Helpers of the TTL, dead-lettering, limits and priority tests.

// declareWith declares a queue with arguments.
func declareWith(t testing.TB, b *Broker, name string, durable bool, args map[string]any) *Queue {
	t.Helper()
	q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: name, Durable: durable, Args: args}})
	if err != nil {
		t.Fatalf("DeclareQueue(%q): %v", name, err)
	}
	return q
}

// msgProps are the properties a test message carries.
type msgProps struct {
	expiration string // "" absent
	priority   int    // -1 absent
	headers    []byte // an encoded table, nil absent
}

func noProps() msgProps { return msgProps{priority: -1} }

// encode returns the raw properties.
func (p msgProps) encode() []byte {
	var flags uint16
	var vals []byte
	if p.headers != nil {
		flags |= amqptab.FlagHeaders
		vals = append(vals, p.headers...)
	}
	if p.priority >= 0 {
		flags |= amqptab.FlagPriority
		vals = append(vals, byte(p.priority))
	}
	if p.expiration != "" {
		flags |= amqptab.FlagExpiration
		vals = append(vals, byte(len(p.expiration)))
		vals = append(vals, p.expiration...)
	}
	return append(binary.BigEndian.AppendUint16(nil, flags), vals...)
}

// publishP publishes one message with properties and returns the
// publish's outcome once stored or refused.
func publishP(t testing.TB, q *Queue, body string, persistent bool, p msgProps) error {
	t.Helper()
	rec := EncodeRecord(nil, &Message{Exchange: "ex", RoutingKey: "rk", Props: p.encode(), Body: []byte(body), Persistent: persistent})
	errc := make(chan error, 1)
	q.Publish(rec, persistent, func(err error) { errc <- err })
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("publish not confirmed")
	}
	return nil
}

// mustPublish publishes messages without properties.
func mustPublish(t testing.TB, q *Queue, persistent bool, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if err := publishP(t, q, body, persistent, noProps()); err != nil {
			t.Fatalf("publish %q: %v", body, err)
		}
	}
}

// eventually polls cond until it holds, failing after a deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readyCount returns the queue's ready count.
func readyCount(q *Queue) int {
	n, _ := q.Counts()
	return n
}

// waitReady waits until the queue has n ready messages.
func waitReady(t testing.TB, q *Queue, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d ready in %s", n, q.Def().Name), func() bool { return readyCount(q) == n })
}

// gotMsg is a basic.get result.
type gotMsg struct {
	id          uint64
	body        string
	exchange    string
	routingKey  string
	props       []byte
	redelivered bool
	left        uint32
}

// getOne does a basic.get; ok is false when the queue is empty.
func getOne(t testing.TB, q *Queue, noAck bool) (gotMsg, bool) {
	t.Helper()
	var g gotMsg
	ok, err := q.Get(nil, noAck, func(d *Delivery) {
		g = gotMsg{d.ID, string(d.Body), d.Exchange, d.RoutingKey, append([]byte(nil), d.Props...), d.Redelivered, d.MessageCount}
	})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return g, ok
}

// drain gets every ready message (no-ack) and returns the bodies.
func drain(t testing.TB, q *Queue) []string {
	t.Helper()
	var out []string
	for {
		g, ok := getOne(t, q, true)
		if !ok {
			return out
		}
		out = append(out, g.body)
	}
}

// headersOf decodes the headers property of raw properties.
func headersOf(t testing.TB, props []byte) map[string]any {
	t.Helper()
	pv, err := amqptab.ScanProps(props)
	if err != nil {
		t.Fatalf("properties: %v", err)
	}
	h := pv.Value(props, amqptab.FlagHeaders)
	if h == nil {
		return nil
	}
	m, _, err := amqptab.ReadTable(h)
	if err != nil {
		t.Fatalf("headers: %v", err)
	}
	return m
}

// fanoutTo declares a fanout exchange bound to queues.
func fanoutTo(t testing.TB, b *Broker, exchange string, queues ...string) {
	t.Helper()
	if err := b.DeclareExchange(ExchangeDef{VHost: "/", Name: exchange, Type: ExchangeFanout}); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if err := b.Bind(BindingDef{VHost: "/", Source: exchange, DestKind: DestQueue, Dest: q}); err != nil {
			t.Fatal(err)
		}
	}
}

// encTable encodes a test headers table of strings and string arrays, in
// the given key order.
func encTable(kv ...any) []byte {
	dst, start := amqptab.Begin(nil)
	for i := 0; i < len(kv); i += 2 {
		dst = amqptab.AppendKey(dst, kv[i].(string))
		switch v := kv[i+1].(type) {
		case string:
			dst = amqptab.AppendLongStr(dst, v)
		case []string:
			dst = append(dst, 'A')
			var a int
			dst, a = amqptab.Begin(dst)
			for _, s := range v {
				dst = amqptab.AppendLongStr(dst, s)
			}
			dst = amqptab.End(dst, a)
		case int64:
			dst = amqptab.AppendLong(dst, v)
		}
	}
	return amqptab.End(dst, start)
}
