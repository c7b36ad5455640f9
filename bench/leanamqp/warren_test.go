package leanamqp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	warrenamqp "github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/queues"
)

// startWarren starts an in-process broker on a free loopback port and
// returns its AMQP URL; it stops at the end of the test.
func startWarren(t *testing.T) string {
	t.Helper()
	b, err := queues.Open(t.TempDir(), queues.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := warrenamqp.NewServer(warrenamqp.Config{Broker: b})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
		b.Close()
	})
	return "amqp://guest:guest@" + ln.Addr().String() + "/"
}

// goChannel opens an amqp091-go channel for setup and checks.
func goChannel(t *testing.T, url string) *amqp091.Channel {
	t.Helper()
	cn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cn.Close() })
	ch, err := cn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func declare(t *testing.T, ch *amqp091.Channel, name string) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}

// confirmTracker counts confirms, expanding multiple acks.
type confirmTracker struct {
	mu     sync.Mutex
	acked  uint64 // highest tag settled in order
	nacks  int
	bad    error
	notify chan struct{}
}

func newConfirmTracker() *confirmTracker { return &confirmTracker{notify: make(chan struct{}, 1)} }

func (ct *confirmTracker) onConfirm(tag uint64, multiple, ack bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	switch {
	case multiple && tag > ct.acked:
		ct.acked = tag
	case !multiple && tag == ct.acked+1:
		ct.acked = tag
	default:
		ct.bad = fmt.Errorf("confirm tag %d multiple %v after %d", tag, multiple, ct.acked)
	}
	if !ack {
		ct.nacks++
	}
	select {
	case ct.notify <- struct{}{}:
	default:
	}
}

// wait waits until tag n is confirmed.
func (ct *confirmTracker) wait(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ct.mu.Lock()
		acked, bad, nacks := ct.acked, ct.bad, ct.nacks
		ct.mu.Unlock()
		if bad != nil || nacks > 0 {
			t.Fatalf("confirms: %v, %d nacks", bad, nacks)
		}
		if acked >= n {
			if acked > n {
				t.Fatalf("confirmed %d > published %d", acked, n)
			}
			return
		}
		select {
		case <-ct.notify:
		case <-deadline:
			t.Fatalf("confirmed %d of %d", acked, n)
		}
	}
}

// collector gathers deliveries, acking every ackEvery with multiple.
type collector struct {
	conn     *Conn
	ackEvery int
	mu       sync.Mutex
	bodies   [][]byte
	tags     []uint64
	ackErr   error
	notify   chan struct{}
}

func newCollector(ackEvery int) *collector {
	return &collector{ackEvery: ackEvery, notify: make(chan struct{}, 1)}
}

func (co *collector) onDelivery(tag uint64, redelivered bool, body []byte) {
	co.mu.Lock()
	co.bodies = append(co.bodies, bytes.Clone(body))
	co.tags = append(co.tags, tag)
	n := len(co.tags)
	co.mu.Unlock()
	if co.ackEvery > 0 && n%co.ackEvery == 0 {
		if err := co.conn.Ack(tag, true); err != nil {
			co.mu.Lock()
			co.ackErr = err
			co.mu.Unlock()
		}
	}
	select {
	case co.notify <- struct{}{}:
	default:
	}
}

func (co *collector) wait(t *testing.T, n int) ([][]byte, []uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		co.mu.Lock()
		got, err := len(co.bodies), co.ackErr
		co.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			time.Sleep(20 * time.Millisecond) // anything extra?
			co.mu.Lock()
			defer co.mu.Unlock()
			if len(co.bodies) != n {
				t.Fatalf("got %d deliveries, want %d", len(co.bodies), n)
			}
			return co.bodies, co.tags
		}
		select {
		case <-co.notify:
		case <-deadline:
			t.Fatalf("got %d of %d deliveries", got, n)
		}
	}
}

func indexBody(i, size int) []byte {
	b := make([]byte, size)
	fillIndex(b, i)
	return b
}

func fillIndex(b []byte, i int) {
	for j := range b {
		b[j] = byte(i + j)
	}
	if len(b) >= 8 {
		binary.BigEndian.PutUint64(b, uint64(i))
	}
}

func TestPublishConfirmConsumeWarren(t *testing.T) {
	url := startWarren(t)
	ch := goChannel(t, url)
	declare(t, ch, "q1")

	ct := newConfirmTracker()
	p, err := DialConfig(url, Config{Name: "lean-producer", OnConfirm: ct.onConfirm})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ConfirmSelect(); err != nil {
		t.Fatal(err)
	}
	const n, size = 1000, 64
	body := make([]byte, size)
	next := 0
	for next < n {
		k := min(100, n-next)
		base := next
		if err := p.PublishBatch("", "q1", true, body, k, func(i int, b []byte) { fillIndex(b, base+i) }); err != nil {
			t.Fatal(err)
		}
		next += k
	}
	if got := p.PublishCount(); got != n {
		t.Fatalf("PublishCount %d, want %d", got, n)
	}
	ct.wait(t, n)

	co := newCollector(50)
	c, err := DialConfig(url, Config{Name: "lean-consumer", OnDelivery: co.onDelivery})
	if err != nil {
		t.Fatal(err)
	}
	co.conn = c
	if err := c.Qos(100); err != nil {
		t.Fatal(err)
	}
	tag, err := c.Consume("q1", "lean-c", false, nil)
	if err != nil || tag != "lean-c" {
		t.Fatalf("consume: %q %v", tag, err)
	}
	bodies, tags := co.wait(t, n)
	for i := range n {
		if !bytes.Equal(bodies[i], indexBody(i, size)) {
			t.Fatalf("body %d = %x", i, bodies[i])
		}
		if tags[i] != uint64(i+1) {
			t.Fatalf("tag %d = %d", i, tags[i])
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := c.Ack(1, false); !errors.Is(err, ErrClosed) {
		t.Errorf("ack after close: %v", err)
	}
	q, err := ch.QueueDeclarePassive("q1", true, false, false, false, nil)
	if err != nil || q.Messages != 0 {
		t.Fatalf("after acking: %d messages, %v", q.Messages, err)
	}
}

// Bodies larger than frame_max span several body frames both ways.
func TestLargeBodiesWarren(t *testing.T) {
	url := startWarren(t)
	ch := goChannel(t, url)
	declare(t, ch, "big")
	ct := newConfirmTracker()
	co := newCollector(1)
	c, err := DialConfig(url, Config{Name: "lean-big", OnConfirm: ct.onConfirm, OnDelivery: co.onDelivery})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	co.conn = c
	if err := c.ConfirmSelect(); err != nil {
		t.Fatal(err)
	}
	sizes := []int{0, 1, int(c.FrameMax()) - 8, int(c.FrameMax()) - 7, 3*int(c.FrameMax()) + 5}
	for i, s := range sizes {
		if err := c.Publish("", "big", false, indexBody(i, s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	ct.wait(t, uint64(len(sizes)))
	if _, err := c.Consume("big", "", false, nil); err != nil {
		t.Fatal(err)
	}
	bodies, _ := co.wait(t, len(sizes))
	for i, s := range sizes {
		if !bytes.Equal(bodies[i], indexBody(i, s)) {
			t.Errorf("body %d: %d bytes, want %d", i, len(bodies[i]), s)
		}
	}
}

func TestPublishToMissingExchangeWarren(t *testing.T) {
	url := startWarren(t)
	c, err := Dial(url, "lean-404")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfirmSelect(); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishBatch("no-such-exchange", "k", false, []byte("x"), 1, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no channel close")
	}
	var se *ServerError
	if !errors.As(c.Err(), &se) {
		t.Fatalf("err %v, want a *ServerError", c.Err())
	}
	if !se.Channel || se.Code != 404 || !strings.Contains(se.Text, "NOT_FOUND") || !strings.Contains(se.Text, "no-such-exchange") {
		t.Errorf("close %+v", se)
	}
	if err := c.Publish("", "x", false, nil); !errors.As(err, &se) {
		t.Errorf("publish after close: %v", err)
	}
	if err := c.Close(); !errors.As(err, &se) {
		t.Errorf("Close: %v, want the server's error", err)
	}
}

func TestInteropWarren(t *testing.T) {
	url := startWarren(t)
	ch := goChannel(t, url)
	declare(t, ch, "to-lean")
	declare(t, ch, "to-go")
	const n = 200

	// amqp091-go publishes, the lean client consumes.
	for i := range n {
		err := ch.Publish("", "to-lean", false, false, amqp091.Publishing{Body: indexBody(i, 20+i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	co := newCollector(1)
	c, err := DialConfig(url, Config{Name: "lean-interop", OnDelivery: co.onDelivery})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	co.conn = c
	if _, err := c.Consume("to-lean", "", false, nil); err != nil {
		t.Fatal(err)
	}
	bodies, _ := co.wait(t, n)
	for i := range n {
		if !bytes.Equal(bodies[i], indexBody(i, 20+i)) {
			t.Fatalf("lean got body %d = %x", i, bodies[i])
		}
	}

	// The lean client publishes, amqp091-go consumes.
	d, err := ch.Consume("to-go", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := c.Publish("", "to-go", i%2 == 0, indexBody(i, 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case m := <-d:
			if !bytes.Equal(m.Body, indexBody(i, 10+i)) {
				t.Fatalf("go got body %d = %x", i, m.Body)
			}
			want := uint8(amqp091.Transient)
			if i%2 == 0 {
				want = amqp091.Persistent
			}
			if m.DeliveryMode != want {
				t.Fatalf("delivery mode %d, want %d", m.DeliveryMode, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("amqp091-go got %d of %d", i, n)
		}
	}
}
