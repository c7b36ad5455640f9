package node

import (
	"bufio"
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warren-mq/warren/queues"
)

// testSink collects a consumer's deliveries.
type testSink struct {
	mu        sync.Mutex
	got       []*queues.Delivery
	cancelled bool
}

func (s *testSink) Deliver(d *queues.Delivery) {
	s.mu.Lock()
	s.got = append(s.got, d)
	s.mu.Unlock()
}

func (s *testSink) Cancelled(*queues.Queue, string) {
	s.mu.Lock()
	s.cancelled = true
	s.mu.Unlock()
}

func (s *testSink) deliveries() []*queues.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*queues.Delivery(nil), s.got...)
}

// publishVia publishes body to queue name through broker b and waits
// for its confirm.
func publishVia(t *testing.T, b *queues.Broker, name string, body string) error {
	t.Helper()
	d, ok := b.Destination("/", name)
	if !ok {
		t.Fatalf("no destination %q", name)
	}
	rec := queues.EncodeRecord(nil, &queues.Message{Props: []byte{0, 0}, Body: []byte(body), Persistent: true})
	done := make(chan error, 1)
	queues.Publish([]queues.Destination{d}, &queues.Publishing{Record: rec, Persistent: true}, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("no confirm for %q", body)
		return nil
	}
}

// A quorum queue led by a is used from b and c: publishes through b are
// stored at a, in order; a consumer on c gets them through the proxy,
// its acks settle them at a, and what it had not settled when it stops
// is back in the queue at a.
func TestProxyQuorumQueue(t *testing.T) {
	c := newTestCluster(t, "a", "b", "c")
	a, b, cn := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	retry(t, "bootstrap", func() error {
		if !a.b.VHostExists("/") {
			return queues.ErrNotApplied
		}
		return nil
	})
	var q *queues.Queue
	retry(t, "declare", func() error {
		var err error
		q, _, _, err = a.b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: "pq", Durable: true,
			Args: map[string]any{"x-queue-type": "quorum"}}})
		return err
	})
	if q == nil {
		t.Fatal("a does not run the queue it declared")
	}
	for _, tn := range []*testNode{b, cn} {
		eventually(t, tn.name+" knows the queue", func() bool { _, _, ok := tn.b.PlacedQueue("/", "pq"); return ok })
	}
	for i := range 20 {
		if err := publishVia(t, b.b, "pq", fmt.Sprintf("m%02d", i)); err != nil {
			t.Fatalf("publish %d through b: %v", i, err)
		}
	}
	if ready, _ := q.Counts(); ready != 20 {
		t.Fatalf("a's queue holds %d messages, want 20", ready)
	}

	sink := &testSink{}
	sub, err := cn.b.Consume("/", "pq", queues.ConsumerOptions{Tag: "t1", Prefetch: 20, Sink: sink}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sub.(queues.RemoteSubscription); !ok {
		t.Fatalf("c's consumer is a %T, want a remote one", sub)
	}
	eventually(t, "20 deliveries on c", func() bool { return len(sink.deliveries()) == 20 })
	ds := sink.deliveries()
	for i, d := range ds {
		if want := fmt.Sprintf("m%02d", i); string(d.Body) != want || d.Redelivered {
			t.Fatalf("delivery %d: %q redelivered %v, want %q", i, d.Body, d.Redelivered, want)
		}
	}
	// Ack the first 15; stop with 5 unsettled: they go back.
	for _, d := range ds[:15] {
		d.Settler().Ack(d.ID)
	}
	eventually(t, "the acks at a", func() bool {
		st := q.Stats()
		return st.Unacked == 5
	})
	sub.Stop()
	eventually(t, "the unsettled back at a", func() bool { ready, consumers := q.Counts(); return ready == 5 && consumers == 0 })
	if sink.cancelled {
		t.Fatal("a consumer stopped by its client was told it was cancelled")
	}

	// A consumer on b sees the returned five, redelivered.
	sink2 := &testSink{}
	sub2, err := b.b.Consume("/", "pq", queues.ConsumerOptions{Tag: "t2", Prefetch: 10, Sink: sink2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "5 redeliveries on b", func() bool { return len(sink2.deliveries()) == 5 })
	for i, d := range sink2.deliveries() {
		if want := fmt.Sprintf("m%02d", 15+i); string(d.Body) != want || !d.Redelivered {
			t.Fatalf("redelivery %d: %q redelivered %v, want %q", i, d.Body, d.Redelivered, want)
		}
	}
	// Deleting the queue cancels the remote consumer.
	if _, err := a.b.DeleteQueue("/", "pq", nil, false, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's consumer cancelled", func() bool { sink2.mu.Lock(); defer sink2.mu.Unlock(); return sink2.cancelled })
	sub2.Stop()
}

// FuzzProxyFrames reads arbitrary bytes as proxy frames and parses each
// as every kind: errors, never a panic; and a frame built by the
// writers' code parses back to what was written.
func FuzzProxyFrames(f *testing.F) {
	b, at := beginFrame(nil, frPublish)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 7)
	b = appendS16(b, "/")
	b = appendS16(b, "q")
	b = append(b, 1, 'r', 'e', 'c')
	f.Add(endFrame(b, at))
	b, at = beginFrame(nil, frDeliver)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 9, 1)
	b = appendS16(b, "x")
	b = appendS16(b, "k")
	b = appendB32(b, []byte{0, 0})
	b = appendB32(b, nil)
	f.Add(endFrame(append(b, "body"...), at))
	b, at = beginFrame(nil, frSettle)
	f.Add(endFrame(append(b, settleAck, 0, 0, 0, 0, 0, 0, 0, 3), at))
	f.Add([]byte{0, 0, 0, 1, frCancelled})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		for range 8 {
			_, payload, out, err := readFrame(br, buf)
			buf = out
			if err != nil {
				return
			}
			parsePublish(payload)
			parsePubStream(payload)
			if r, err := parseConsume(payload); err == nil && r.prefetch < 0 {
				t.Fatalf("negative prefetch %d", r.prefetch)
			}
			if d, err := parseDeliver(payload); err == nil {
				// Written back, it parses the same.
				w, at := beginFrame(nil, frDeliver)
				w = appendUint64(w, d.ID)
				w = append(w, boolByte(d.Redelivered))
				w = appendS16(w, d.Exchange)
				w = appendS16(w, d.RoutingKey)
				w = appendB32(w, d.Props)
				w = appendB32(w, d.AMQP10Props)
				w = endFrame(append(w, d.Body...), at)
				d2, err := parseDeliver(w[5:])
				if err != nil || d2.ID != d.ID || d2.Exchange != d.Exchange || d2.RoutingKey != d.RoutingKey ||
					!bytes.Equal(d2.Props, d.Props) || !bytes.Equal(d2.Body, d.Body) || d2.Redelivered != d.Redelivered {
					t.Fatalf("deliver frame did not round-trip: %+v vs %+v (%v)", d, d2, err)
				}
			}
			if mode, ids, err := parseSettle(payload); err == nil && (mode < settleAck || mode > settleDiscard || len(ids) != (len(payload)-1)/8) {
				t.Fatalf("settle parsed as mode %d, %d ids from %d bytes", mode, len(ids), len(payload))
			}
		}
	})
}

func appendUint64(b []byte, v uint64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
