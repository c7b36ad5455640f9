package perf

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/amqp1"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
)

// startWarren starts a broker with AMQP and stream listeners on free
// loopback ports and returns the stream address and the AMQP URL; it stops
// at the end of the test.
func startWarren(t *testing.T) (streamAddr, amqpURL string) {
	t.Helper()
	b, err := queues.Open(t.TempDir(), queues.Options{})
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	asrv := amqp.NewServer(amqp.Config{Broker: b, AMQP10: amqp1.NewServer(amqp1.Config{Broker: b}).Handoff})
	ssrv, err := streamproto.NewServer(streamproto.Config{Broker: b, Advertise: sln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	adone, sdone := make(chan struct{}), make(chan struct{})
	go func() { defer close(adone); _ = asrv.Serve(aln) }()
	go func() { defer close(sdone); _ = ssrv.Serve(sln) }()
	t.Cleanup(func() {
		asrv.Close()
		ssrv.Close()
		<-adone
		<-sdone
		b.Close()
	})
	return sln.Addr().String(), "amqp://guest:guest@" + aln.Addr().String() + "/"
}

// checkComplete fails unless every published message was confirmed and
// consumed as often as expected, and latencies were measured.
func checkComplete(t *testing.T, s Summary, wantPublished int64) {
	t.Helper()
	if s.Published != wantPublished || s.Confirmed != wantPublished || s.Nacked != 0 {
		t.Errorf("published %d, confirmed %d, nacked %d; want %d, %d, 0", s.Published, s.Confirmed, s.Nacked, wantPublished, wantPublished)
	}
	if wantConsumers := s.Config.(interface{ consumers() int }).consumers(); wantConsumers > 0 && s.Consumed != s.ExpectedConsumed {
		t.Errorf("consumed %d, expected %d", s.Consumed, s.ExpectedConsumed)
	}
	if s.Consumed > 0 && (s.Latency.Count == 0 || s.Latency.P50 <= 0 || s.ConsumeRate <= 0) {
		t.Errorf("no end-to-end latency or rate: %+v", s.Latency)
	}
	if s.Confirmed > 0 && (s.ConfirmLatency.Count == 0 || s.PublishRate <= 0) {
		t.Errorf("no confirm latency or rate: %+v", s.ConfirmLatency)
	}
}

// Ensure each mode runs to completion against an in-process Warren with
// exact counts: the CI smoke of warren-perf (a few seconds in all).
func TestSmokeAgainstWarren(t *testing.T) {
	streamAddr, amqpURL := startWarren(t)
	const n = 3000
	common := Common{Producers: 1, Consumers: 1, Count: n, SetupTimeout: 10 * time.Second,
		StallTimeout: 10 * time.Second, DrainTimeout: 20 * time.Second}
	run := func(t *testing.T, f func(context.Context) (Summary, error)) Summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		s, err := f(ctx)
		if err != nil {
			t.Fatalf("run: %v (summary %+v)", err, s)
		}
		return s
	}
	t.Run("stream", func(t *testing.T) {
		c := common
		c.Producers, c.Consumers = 2, 2
		c.ConfirmWindow = 500
		var ticks int
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunStream(ctx, StreamConfig{Common: c, Addr: streamAddr, Stream: "smoke-1", Recreate: true,
				BatchSize: 50}, func(Progress) { ticks++ }, 10*time.Millisecond)
		})
		checkComplete(t, s, 2*n)
		if s.ExpectedConsumed != 4*n {
			t.Errorf("expected %d, want %d (2 consumers each read all)", s.ExpectedConsumed, 4*n)
		}
		if s.Metrics["publish_rate"] <= 0 {
			t.Errorf("metrics: %v", s.Metrics)
		}
	})
	t.Run("stream-publish-then-replay", func(t *testing.T) {
		c := common
		c.Consumers, c.Keep = 0, true
		cfg := StreamConfig{Common: c, Addr: streamAddr, Stream: "smoke-replay", Recreate: true,
			SubEntrySize: 10, Compression: "gzip"}
		checkComplete(t, run(t, func(ctx context.Context) (Summary, error) { return RunStream(ctx, cfg, nil, 0) }), n)
		c.Producers, c.Consumers, c.Keep = 0, 1, false
		replay := StreamConfig{Common: c, Addr: streamAddr, Stream: "smoke-replay", Offset: "first"}
		s := run(t, func(ctx context.Context) (Summary, error) { return RunStream(ctx, replay, nil, 0) })
		if s.Consumed != n || s.TimeToFirst <= 0 {
			t.Errorf("replay consumed %d (want %d), time to first %v", s.Consumed, n, s.TimeToFirst)
		}
	})
	t.Run("stream-filter", func(t *testing.T) {
		c := common
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunStream(ctx, StreamConfig{Common: c, Addr: streamAddr, Stream: "smoke-filter", Recreate: true,
				FilterValues: []string{"a", "b", "c"}, ConsumerFilter: []string{"b"}, ProducerName: "dedup"}, nil, 0)
		})
		checkComplete(t, s, n)
		if s.ExpectedConsumed != n/3 {
			t.Errorf("expected %d, want %d (one value in three)", s.ExpectedConsumed, n/3)
		}
	})
	t.Run("stream-rate", func(t *testing.T) {
		c := common
		c.Count, c.Rate = 0, 2000
		c.Duration = 500 * time.Millisecond
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunStream(ctx, StreamConfig{Common: c, Addr: streamAddr, Stream: "smoke-rate", Recreate: true, BatchSize: 10}, nil, 0)
		})
		checkComplete(t, s, s.Published)
		if s.Published < 800 || s.Published > 1100 {
			t.Errorf("published %d in 0.5s at 2000/s, want about 1000", s.Published)
		}
	})
	t.Run("super-stream", func(t *testing.T) {
		c := common
		c.Count = 1000
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunStream(ctx, StreamConfig{Common: c, Addr: streamAddr, Stream: "smoke-super", Recreate: true,
				SuperStream: true, Partitions: 3}, nil, 0)
		})
		checkComplete(t, s, 1000)
	})
	t.Run("amqp-classic", func(t *testing.T) {
		c := common
		c.ConfirmWindow = 200
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunAMQP(ctx, AMQPConfig{Common: c, URL: amqpURL, Persistent: true, Prefetch: 100, MultiAckEvery: 10}, nil, 0)
		})
		checkComplete(t, s, n)
	})
	t.Run("amqp10", func(t *testing.T) {
		c := common
		c.ConfirmWindow = 200
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunAMQP(ctx, AMQPConfig{Common: c, URL: amqpURL, Persistent: true, Prefetch: 100, Client: ClientAMQP10}, nil, 0)
		})
		checkComplete(t, s, n)
	})
	t.Run("amqp10-fanout-settled-receivers", func(t *testing.T) {
		c := common
		c.ConfirmWindow = 200
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunAMQP(ctx, AMQPConfig{Common: c, URL: amqpURL, Queues: 3, AutoAck: true, Client: ClientAMQP10}, nil, 0)
		})
		checkComplete(t, s, n)
	})
	t.Run("amqp-fanout", func(t *testing.T) {
		c := common
		c.ConfirmWindow = 200
		s := run(t, func(ctx context.Context) (Summary, error) {
			return RunAMQP(ctx, AMQPConfig{Common: c, URL: amqpURL, Queues: 3, AutoAck: true}, nil, 0)
		})
		checkComplete(t, s, n)
		if s.ExpectedConsumed != 3*n {
			t.Errorf("expected %d, want %d", s.ExpectedConsumed, 3*n)
		}
	})
	t.Run("declare", func(t *testing.T) {
		ctx := t.Context()
		if err := DeclareQueues(ctx, amqpURL, "idle", 50, QueueClassic, false); err != nil {
			t.Fatal(err)
		}
		if err := DeclareQueues(ctx, amqpURL, "idle", 50, QueueClassic, true); err != nil {
			t.Fatal(err)
		}
	})
}
