package leanstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
	"github.com/warren-mq/warren/streamproto/wire"
)

// startWarren starts an in-process broker with a stream listener on a free
// loopback port and returns its address; it stops at the end of the test.
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
	srv, err := streamproto.NewServer(streamproto.Config{Broker: b, Advertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
		b.Close()
	})
	return ln.Addr().String()
}

// confirms collects confirmed ids and publish errors of a connection.
type confirms struct {
	mu     sync.Mutex
	ids    []uint64
	errs   []PublishError
	signal chan struct{}
}

func newConfirms() *confirms { return &confirms{signal: make(chan struct{}, 1)} }

func (c *confirms) config(addr string) Config {
	return Config{Addr: addr, CheckCRC: true,
		OnConfirm: func(_ uint8, ids []uint64) {
			c.mu.Lock()
			c.ids = append(c.ids, ids...)
			c.mu.Unlock()
			c.notify()
		},
		OnPublishError: func(_ uint8, errs []PublishError) {
			c.mu.Lock()
			c.errs = append(c.errs, errs...)
			c.mu.Unlock()
			c.notify()
		},
	}
}

func (c *confirms) notify() {
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// wait waits until n ids or errors arrived.
func (c *confirms) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.ids) + len(c.errs)
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c.signal:
		case <-deadline:
			t.Fatalf("%d confirms and errors after 10s, want %d", got, n)
		}
	}
}

func dial(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := DialConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func body(i int) []byte { return fmt.Appendf(nil, "message-%05d", i) }

// publish publishes n bodies (body(0..n-1)) with ids 1..n in batches and
// waits for their confirms, checking they are exactly those ids.
func publish(t *testing.T, addr, streamName string, n, batch int) {
	t.Helper()
	cf := newConfirms()
	c := dial(t, cf.config(addr))
	if err := c.DeclarePublisher(3, "", streamName); err != nil {
		t.Fatal(err)
	}
	var b Batch
	for i := 0; i < n; {
		b.Reset()
		for ; b.Len() < batch && i < n; i++ {
			b.Add(uint64(i+1), body(i))
		}
		if err := c.Publish(3, &b); err != nil {
			t.Fatal(err)
		}
	}
	cf.wait(t, n)
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if len(cf.errs) > 0 {
		t.Fatalf("publish errors: %v", cf.errs[:min(5, len(cf.errs))])
	}
	ids := slices.Clone(cf.ids)
	slices.Sort(ids)
	if len(ids) != n || ids[0] != 1 || ids[n-1] != uint64(n) || len(slices.Compact(ids)) != n {
		t.Fatalf("confirmed %d ids, want exactly 1..%d", len(cf.ids), n)
	}
}

// consume subscribes at spec and returns the first n bodies and offsets.
func consume(t *testing.T, addr, streamName string, spec OffsetSpec, n int) ([]string, []uint64) {
	t.Helper()
	c := dial(t, Config{Addr: addr, CheckCRC: true})
	var mu sync.Mutex
	var bodies []string
	var offs []uint64
	var iterErr error
	done := make(chan struct{})
	err := c.Subscribe(7, streamName, spec, 2, func(ch *Chunk) {
		mu.Lock()
		defer mu.Unlock()
		it := ch.Messages()
		for it.Next() {
			b, ok := DataBody(it.Message())
			if !ok {
				iterErr = fmt.Errorf("offset %d: not a data section: % x", it.Offset(), it.Message())
			}
			if len(bodies) < n {
				bodies = append(bodies, string(b))
				offs = append(offs, it.Offset())
				if len(bodies) == n {
					close(done)
				}
			}
		}
		if it.Err() != nil {
			iterErr = it.Err()
		}
		if err := c.Credit(ch.SubscriptionID, 1); err != nil {
			iterErr = err
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("consumed %d of %d after 10s (err %v)", len(bodies), n, iterErr)
	}
	if err := c.Unsubscribe(7); err != nil {
		t.Errorf("unsubscribe: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if iterErr != nil {
		t.Fatal(iterErr)
	}
	return bodies, offs
}

// Ensure publishing in batches is confirmed with exactly the published ids
// and that subscribers read the bodies back in order, from first and from
// an offset.
func TestPublishAndConsume(t *testing.T) {
	addr := startWarren(t)
	c := dial(t, Config{Addr: addr})
	if c.FrameMax() == 0 || c.ServerProperties()["product"] == "" {
		t.Errorf("frame max %d, server properties %v", c.FrameMax(), c.ServerProperties())
	}
	if err := c.Create("lean", map[string]string{"max-length-bytes": "100000000"}); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	publish(t, addr, "lean", n, 64)

	bodies, offs := consume(t, addr, "lean", First(), n)
	for i := range n {
		if bodies[i] != string(body(i)) || offs[i] != uint64(i) {
			t.Fatalf("message %d: %q at offset %d, want %q at %d", i, bodies[i], offs[i], body(i), i)
		}
	}
	const k = 1234
	bodies, offs = consume(t, addr, "lean", Offset(k), n-k)
	if offs[0] != k || bodies[0] != string(body(k)) || bodies[n-k-1] != string(body(n-1)) {
		t.Errorf("from offset %d: first %q at %d, last %q", k, bodies[0], offs[0], bodies[n-k-1])
	}
	if err := c.Delete("lean"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := c.Create("x", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("create after close: %v", err)
	}
}

// Ensure the server's refusals come back with their codes.
func TestErrorCodes(t *testing.T) {
	addr := startWarren(t)
	cf := newConfirms()
	c := dial(t, cf.config(addr))
	if err := c.Create("dup", nil); err != nil {
		t.Fatal(err)
	}
	err := c.Create("dup", nil)
	var re *ResponseError
	if !errors.Is(err, wire.CodeStreamAlreadyExists) || !errors.As(err, &re) || re.Code != 5 {
		t.Errorf("create twice: %v", err)
	}
	if err := c.Delete("missing"); !errors.Is(err, wire.CodeStreamDoesNotExist) {
		t.Errorf("delete missing: %v", err)
	}
	if err := c.DeclarePublisher(1, "", "missing"); !errors.Is(err, wire.CodeStreamDoesNotExist) {
		t.Errorf("declare publisher on missing stream: %v", err)
	}
	if err := c.Subscribe(1, "missing", First(), 1, func(*Chunk) {}); !errors.Is(err, wire.CodeStreamDoesNotExist) {
		t.Errorf("subscribe to missing stream: %v", err)
	}
	// A publisher that was never declared: every message is refused.
	var b Batch
	for i := range 3 {
		b.Add(uint64(10+i), []byte("x"))
	}
	if err := c.Publish(9, &b); err != nil {
		t.Fatal(err)
	}
	cf.wait(t, 3)
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if len(cf.ids) != 0 || len(cf.errs) != 3 {
		t.Fatalf("confirms %v, errors %v", cf.ids, cf.errs)
	}
	for i, e := range cf.errs {
		if e.PublishingID != uint64(10+i) || e.Code != wire.CodePublisherDoesNotExist {
			t.Errorf("error %d: %+v, want id %d code %#x", i, e, 10+i, wire.CodePublisherDoesNotExist)
		}
	}
}

// Ensure the Go client reads what leanstream publishes and the other way
// round.
func TestInteropWithGoClient(t *testing.T) {
	addr := startWarren(t)
	host, port, _ := net.SplitHostPort(addr)
	var p int
	fmt.Sscan(port, &p)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(p).
		SetAddressResolver(stream.AddressResolver{Host: host, Port: p}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	const n = 500

	t.Run("go-reads-lean", func(t *testing.T) {
		if err := env.DeclareStream("from-lean", nil); err != nil {
			t.Fatal(err)
		}
		publish(t, addr, "from-lean", n, 50)
		got := make(chan string, n)
		cons, err := env.NewConsumer("from-lean", func(_ stream.ConsumerContext, m *amqp.Message) {
			got <- string(m.GetData())
		}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cons.Close() }()
		for i := range n {
			select {
			case s := <-got:
				if s != string(body(i)) {
					t.Fatalf("message %d: %q, want %q", i, s, body(i))
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Go consumer got %d of %d", i, n)
			}
		}
	})

	t.Run("lean-reads-go", func(t *testing.T) {
		if err := env.DeclareStream("from-go", nil); err != nil {
			t.Fatal(err)
		}
		prod, err := env.NewProducer("from-go", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = prod.Close() }()
		confirmed := prod.NotifyPublishConfirmation()
		msgs := make([]message.StreamMessage, 0, n)
		for i := range n {
			msgs = append(msgs, amqp.NewMessage(body(i)))
		}
		if err := prod.BatchSend(msgs); err != nil {
			t.Fatal(err)
		}
		for acked := 0; acked < n; {
			select {
			case st := <-confirmed:
				acked += len(st)
			case <-time.After(10 * time.Second):
				t.Fatalf("Go producer: %d of %d confirmed", acked, n)
			}
		}
		bodies, offs := consume(t, addr, "from-go", First(), n)
		for i := range n {
			if bodies[i] != string(body(i)) || offs[i] != uint64(i) {
				t.Fatalf("message %d: %q at %d", i, bodies[i], offs[i])
			}
		}
	})
}

// Ensure frameReader hands out every frame intact and in order when
// reads come in odd pieces, frames are cut by the buffer's end (moved to
// the front) or larger than the buffer (grown), and reports the end of
// the input, a cut frame and an oversized one.
func TestFrameReader(t *testing.T) {
	const bufSize = 4096
	sizes := []int{4, 10, 3000, 100, 3 * bufSize, 7, bufSize - 4, bufSize - 3, 500, 9 * bufSize, 4}
	var src []byte
	for i, n := range sizes {
		src = binary.BigEndian.AppendUint32(src, uint32(n))
		src = append(src, bytes.Repeat([]byte{byte('a' + i)}, n)...)
	}
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(src) },
		"halves":   func() io.Reader { return iotest.HalfReader(bytes.NewReader(src)) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(src)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(src)) },
	}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			fr := newFrameReader(r(), bufSize)
			for i, n := range sizes {
				frame, err := fr.next(1 << 20)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if want := bytes.Repeat([]byte{byte('a' + i)}, n); !bytes.Equal(frame, want) {
					t.Fatalf("frame %d of %d bytes: wrong bytes (%d)", i, n, len(frame))
				}
			}
			if _, err := fr.next(1 << 20); err != io.EOF {
				t.Errorf("read past the end: %v, want io.EOF", err)
			}
		})
	}
	for _, cut := range []int{2, 4 + 5, len(src) - 1} {
		fr := newFrameReader(bytes.NewReader(src[:cut]), bufSize)
		var err error
		for err == nil {
			_, err = fr.next(1 << 20)
		}
		if err != io.ErrUnexpectedEOF {
			t.Errorf("input cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	fr := newFrameReader(bytes.NewReader(src), bufSize)
	if _, err := fr.next(3); err == nil {
		t.Error("a frame over the limit was read")
	}
	fr = newFrameReader(bytes.NewReader([]byte{0, 0, 0, 3, 1, 2, 3}), bufSize)
	if _, err := fr.next(1 << 20); err == nil {
		t.Error("a frame of 3 bytes (no key and version) was read")
	}
}
