package streamproto

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// e2eWait bounds every wait for the broker in the end-to-end tests.
const e2eWait = 10 * time.Second

// e2eSink collects what a consumer receives, in order.
type e2eSink struct {
	mu      sync.Mutex
	bodies  []string
	offsets []int64
	signal  chan struct{} // cap 1: a message arrived
}

func newE2ESink() *e2eSink { return &e2eSink{signal: make(chan struct{}, 1)} }

func (s *e2eSink) handle(ctx stream.ConsumerContext, m *amqp.Message) {
	s.mu.Lock()
	s.bodies = append(s.bodies, string(m.GetData()))
	s.offsets = append(s.offsets, ctx.Consumer.GetOffset())
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// snapshot returns copies of what arrived so far.
func (s *e2eSink) snapshot() ([]string, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies), slices.Clone(s.offsets)
}

// waitUntil waits until done holds for what arrived so far and returns it.
func (s *e2eSink) waitUntil(t *testing.T, what string, done func(bodies []string) bool) ([]string, []int64) {
	t.Helper()
	timeout := time.After(e2eWait)
	for {
		bodies, offsets := s.snapshot()
		if done(bodies) {
			return bodies, offsets
		}
		select {
		case <-s.signal:
		case <-timeout:
			t.Fatalf("waiting for %s: got %d messages: %v", what, len(bodies), bodies)
		}
	}
}

// wait waits for at least n messages and returns the first n.
func (s *e2eSink) wait(t *testing.T, n int) ([]string, []int64) {
	t.Helper()
	bodies, offsets := s.waitUntil(t, fmt.Sprintf("%d messages", n), func(b []string) bool { return len(b) >= n })
	return bodies[:n], offsets[:n]
}

// e2eSubscribe attaches a consumer that collects into a new e2eSink; it is
// closed at the end of the test.
func e2eSubscribe(t *testing.T, env *stream.Environment, name string, opts *stream.ConsumerOptions) (*stream.Consumer, *e2eSink) {
	t.Helper()
	s := newE2ESink()
	c, err := env.NewConsumer(name, s.handle, opts)
	if err != nil {
		t.Fatalf("NewConsumer(%q): %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, s
}

// e2eFrom is consumer options starting at spec.
func e2eFrom(spec stream.OffsetSpecification) *stream.ConsumerOptions {
	return stream.NewConsumerOptions().SetOffset(spec)
}

// e2eProducer is a producer whose confirmations are collected as they
// arrive: the client's reader goroutine blocks until its confirmation
// channel is drained, so it must always be read.
type e2eProducer struct {
	*stream.Producer
	mu     sync.Mutex
	got    []*stream.ConfirmationStatus // every status received, in order
	taken  int                          // statuses returned by awaitConfirms
	signal chan struct{}                // cap 1: a status arrived
}

// e2eNewProducer declares a producer on name; it is closed at the end of the
// test.
func e2eNewProducer(t *testing.T, env *stream.Environment, name string, opts *stream.ProducerOptions) *e2eProducer {
	t.Helper()
	p, err := env.NewProducer(name, opts)
	if err != nil {
		t.Fatalf("NewProducer(%q): %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	ep := &e2eProducer{Producer: p, signal: make(chan struct{}, 1)}
	confirms := p.NotifyPublishConfirmation()
	go func() {
		for cs := range confirms { // closed when the producer closes
			ep.mu.Lock()
			ep.got = append(ep.got, cs...)
			ep.mu.Unlock()
			select {
			case ep.signal <- struct{}{}:
			default:
			}
		}
	}()
	return ep
}

// send publishes bodies in one BatchSend, with publishing ids ids when
// ids is not nil, waits until each message is confirmed and returns the
// confirmed publishing ids in the order the confirms arrived.
func (p *e2eProducer) send(t *testing.T, bodies []string, ids []int64) []int64 {
	t.Helper()
	msgs := make([]message.StreamMessage, len(bodies))
	for i, b := range bodies {
		m := amqp.NewMessage([]byte(b))
		if ids != nil {
			m.SetPublishingId(ids[i])
		}
		msgs[i] = m
	}
	if err := p.BatchSend(msgs); err != nil {
		t.Fatalf("BatchSend: %v", err)
	}
	return p.awaitConfirms(t, len(bodies))
}

// awaitConfirms waits for the next n confirmations, which must all be
// positive, and returns their publishing ids in arrival order.
func (p *e2eProducer) awaitConfirms(t *testing.T, n int) []int64 {
	t.Helper()
	timeout := time.After(e2eWait)
	for {
		p.mu.Lock()
		have := len(p.got) - p.taken
		var next []*stream.ConfirmationStatus
		if have >= n {
			next = p.got[p.taken : p.taken+n]
			p.taken += n
		}
		p.mu.Unlock()
		if next != nil || n == 0 {
			ids := make([]int64, len(next))
			for i, c := range next {
				if !c.IsConfirmed() {
					t.Fatalf("publishing id %d not confirmed: code %d, %v", c.GetPublishingId(), c.GetErrorCode(), c.GetError())
				}
				ids[i] = c.GetPublishingId()
			}
			return ids
		}
		select {
		case <-p.signal:
		case <-timeout:
			t.Fatalf("%d of %d confirms", have, n)
		}
	}
}

// e2eDeclare declares a stream and fails the test on error.
func e2eDeclare(t *testing.T, env *stream.Environment, name string, opts *stream.StreamOptions) {
	t.Helper()
	if err := env.DeclareStream(name, opts); err != nil {
		t.Fatalf("DeclareStream(%q): %v", name, err)
	}
}

// e2eWantErr fails unless err wraps want.
func e2eWantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// e2eWantBodies fails unless got equals want.
func e2eWantBodies(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %d bodies %v, want %d %v", what, len(got), got, len(want), want)
	}
}

// e2eWantOffsets fails unless offsets run from first up by one.
func e2eWantOffsets(t *testing.T, what string, offsets []int64, first int64) {
	t.Helper()
	for i, o := range offsets {
		if o != first+int64(i) {
			t.Fatalf("%s: offset %d at position %d, want %d (all: %v)", what, o, i, first+int64(i), offsets)
		}
	}
}

// e2eIDs returns from, from+1, ..., to-1.
func e2eIDs(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// e2eClock is a settable clock for the broker's streams (chunk
// timestamps), in Unix milliseconds.
type e2eClock struct{ ms atomic.Int64 }

func (c *e2eClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }
