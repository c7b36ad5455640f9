package streamproto

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/osiris"
)

// End-to-end tests of the data path with the real Go stream client: many
// chunks (consumer credit), the client's asynchronous Send, messages near
// the chunk and frame limits, and Bloom-filtered subscriptions.

// Ensure thousands of messages sent one by one with the asynchronous Send,
// then more in many small confirmed batches (one chunk each, far more
// chunks than the client's initial credit of 10), are all confirmed and
// delivered in order to a consumer that was following the stream and to
// one that comes after.
func TestE2EAsyncSendManyChunks(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	_, live := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.Next()))
	p := e2eNewProducer(t, env, "s", stream.NewProducerOptions().SetBatchSize(50))
	const async, batches = 5000, 40
	want := seq("m", 0, async+batches*10)
	for _, b := range want[:async] {
		if err := p.Send(amqp.NewMessage([]byte(b))); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	got := p.awaitConfirms(t, async)
	slices.Sort(got)
	if !slices.Equal(got, e2eIDs(1, async+1)) {
		t.Fatalf("confirmed ids are not 1..%d", async)
	}
	for i := async; i < len(want); i += 10 {
		p.send(t, want[i:i+10], nil)
	}

	s, err := tb.broker.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := s.NewReader(osiris.First(), osiris.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	chunks := 0
	for {
		_, ok, err := rd.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		chunks++
	}
	if n := s.Stats().NextOffset; n != uint64(len(want)) || chunks <= batches {
		t.Fatalf("%d records in %d chunks, want %d in more than %d", n, chunks, len(want), batches)
	}

	bodies, offsets := live.wait(t, len(want))
	e2eWantBodies(t, "following consumer", bodies, want)
	e2eWantOffsets(t, "following consumer", offsets, 0)
	_, late := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets = late.wait(t, len(want))
	e2eWantBodies(t, "late consumer", bodies, want)
	e2eWantOffsets(t, "late consumer", offsets, 0)
}

// Ensure large messages survive: several 300 KB messages (more than a
// chunk's 1 MiB of data together, so they span chunks) and one of
// 1,000,000 bytes (a chunk of its own) are delivered intact within the
// negotiated 1 MiB frame max.
func TestE2ELargeMessages(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	// The client's default 8 KiB SO_RCVBUF stalls TCP on loopback (64 KiB
	// MTU) once a few hundred KB are in flight, whatever the server: a
	// plain Go sender and receiver stall the same way. Use 1 MiB.
	env := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetReadBuffer(1 << 20) })
	e2eDeclare(t, env, "big", nil)
	p := e2eNewProducer(t, env, "big", nil)
	body := func(i, size int) []byte {
		b := bytes.Repeat([]byte{byte('a' + i)}, size)
		copy(b, fmt.Sprintf("big-%d-", i))
		return b
	}
	var want [][]byte
	for i := range 5 {
		want = append(want, body(i, 300_000))
	}
	want = append(want, body(5, 1_000_000))
	for _, b := range want {
		if err := p.Send(amqp.NewMessage(b)); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	p.awaitConfirms(t, len(want))
	s, err := tb.broker.Stream("/", "big")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := s.NewReader(osiris.First(), osiris.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	chunks := 0
	for {
		ch, ok, err := rd.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		chunks++
		if ch.Header.DataLen > osiris.DefaultMaxChunkBytes && ch.Header.NumEntries > 1 {
			t.Fatalf("chunk %d holds %d bytes in %d entries, over the chunk limit", ch.Header.ChunkID, ch.Header.DataLen, ch.Header.NumEntries)
		}
	}
	if chunks < 3 {
		t.Fatalf("%d chunks, want at least 3", chunks)
	}

	_, sk := e2eSubscribe(t, env, "big", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets := sk.wait(t, len(want))
	e2eWantOffsets(t, "large messages", offsets, 0)
	for i, b := range bodies {
		if b != string(want[i]) {
			t.Fatalf("message %d: %d bytes starting %q, want %d starting %q", i, len(b), b[:min(len(b), 12)], len(want[i]), want[i][:12])
		}
	}
}

// Ensure a filtered subscription gets only the chunks whose Bloom filter
// may hold its value: chunks of other values are never sent (the client's
// post-filter never sees them).
func TestE2EFilteredSubscription(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "f", nil)
	color := func(m message.StreamMessage) string {
		if c, ok := m.GetApplicationProperties()["color"].(string); ok {
			return c
		}
		return ""
	}
	p := e2eNewProducer(t, env, "f", stream.NewProducerOptions().SetFilter(stream.NewProducerFilter(color)))
	send := func(c string, from, to int) []string {
		var bodies []string
		var msgs []message.StreamMessage
		for i := from; i < to; i++ {
			b := fmt.Sprintf("%s-%d", c, i)
			m := amqp.NewMessage([]byte(b))
			m.ApplicationProperties = map[string]any{"color": c}
			msgs = append(msgs, m)
			bodies = append(bodies, b)
		}
		if err := p.BatchSend(msgs); err != nil {
			t.Fatalf("BatchSend: %v", err)
		}
		p.awaitConfirms(t, len(msgs))
		return bodies
	}
	// One chunk per batch: red, blue, red.
	red := send("red", 0, 10)
	send("blue", 10, 20)
	red = append(red, send("red", 20, 30)...)

	var seen atomic.Int64
	postFilter := func(m *amqp.Message) bool {
		seen.Add(1)
		return m.ApplicationProperties["color"] == "red"
	}
	_, sk := e2eSubscribe(t, env, "f", e2eFrom(stream.OffsetSpecification{}.First()).
		SetFilter(stream.NewConsumerFilter([]string{"red"}, false, postFilter)))
	bodies, _ := sk.wait(t, 20)
	e2eWantBodies(t, "red subscription", bodies, red)
	// The blue chunk was skipped by the broker, so all 20 messages the
	// post-filter saw were red. A later red chunk proves the blue one
	// would have arrived by now.
	red = append(red, send("red", 30, 35)...)
	bodies, _ = sk.wait(t, 25)
	e2eWantBodies(t, "red subscription, live", bodies, red)
	if n := seen.Load(); n != 25 {
		t.Fatalf("post-filter saw %d messages, want 25 (no blue chunk)", n)
	}
}

// Ensure messages from two producers publishing at the same time on two
// connections are all stored, each producer's in its own order.
func TestE2EConcurrentProducers(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	const n = 1000
	producers := []*e2eProducer{e2eNewProducer(t, env, "s", nil), e2eNewProducer(t, env, "s", nil)}
	errs := make(chan error, len(producers))
	for i, p := range producers {
		go func() {
			for _, b := range seq(fmt.Sprintf("p%d", i), 0, n) {
				if err := p.Send(amqp.NewMessage([]byte(b))); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	for _, p := range producers {
		p.awaitConfirms(t, n)
	}
	_, sk := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets := sk.wait(t, 2*n)
	e2eWantOffsets(t, "interleaved", offsets, 0)
	var p0, p1 []string
	for _, b := range bodies {
		switch {
		case strings.HasPrefix(b, "p0-"):
			p0 = append(p0, b)
		case strings.HasPrefix(b, "p1-"):
			p1 = append(p1, b)
		default:
			t.Fatalf("unexpected body %q", b)
		}
	}
	e2eWantBodies(t, "producer 0", p0, seq("p0", 0, n))
	e2eWantBodies(t, "producer 1", p1, seq("p1", 0, n))
}
