package streamproto

import (
	"fmt"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

// chunkRecords returns the record counts of a stream's user chunks.
func chunkRecords(t *testing.T, tb *testBroker, name string) []uint32 {
	t.Helper()
	s, err := tb.broker.Stream("/", name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.NewReader(osiris.First(), osiris.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []uint32
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		if c.Header.Type == segment.ChunkUser {
			out = append(out, c.Header.NumRecords)
		}
	}
}

// Ensure a burst on an idle stream forms small chunks first, doubling
// (32, 64, 128, ... as RabbitMQ's writer batches), so that a consumer's
// credit, one chunk each, bounds what it receives: with one credit and
// manual credit it gets the first 32 of 500 messages and no more until it
// grants credit (the Go client's "Manual Credit Strategy"); and that the
// committed chunk id moves past 0 ("Stream Status").
func TestE2EChunksGrowWithTheBurst(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "burst", nil)
	p := e2eNewProducer(t, env, "burst", nil)
	var bodies []string
	for i := range 500 {
		bodies = append(bodies, fmt.Sprintf("m%03d", i))
	}
	p.send(t, bodies, nil)

	counts := chunkRecords(t, tb, "burst")
	total := uint32(0)
	for i, n := range counts {
		total += n
		if i < len(counts)-1 && i < 4 && n != 32<<i {
			t.Fatalf("chunk record counts %v, want 32, 64, 128, 256, ...", counts)
		}
	}
	if total != 500 || len(counts) < 5 {
		t.Fatalf("chunk record counts %v (%d records), want 500 records in 5 or more chunks", counts, total)
	}
	stats, err := env.StreamStats("burst")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := stats.CommittedChunkId(); err != nil || id <= 0 {
		t.Fatalf("committed chunk id %d (%v), want > 0", id, err)
	}

	c, sink := e2eSubscribe(t, env, "burst", e2eFrom(stream.OffsetSpecification{}.First()).
		SetCreditStrategy(stream.ManualCreditStrategy).SetInitialCredits(1))
	got, _ := sink.wait(t, 32)
	if got[0] != "m000" || got[31] != "m031" {
		t.Fatalf("first chunk %q .. %q", got[0], got[31])
	}
	time.Sleep(200 * time.Millisecond) // a burst beyond the credit would arrive meanwhile
	if b, _ := sink.snapshot(); len(b) != 32 {
		t.Fatalf("%d messages with one credit, want the first chunk's 32", len(b))
	}
	if err := c.Credit(20); err != nil {
		t.Fatal(err)
	}
	got, _ = sink.wait(t, 500)
	e2eWantBodies(t, "after more credit", got, bodies)
}
