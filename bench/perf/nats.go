package perf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSConfig is a JetStream workload: the anchor for the stream scenarios
// (publish with acks, replay from the first message). A JetStream stream
// with file storage and one replica stands in for a stream; a publish ack
// for a confirm; an ordered consumer from the first message for a stream
// consumer at offset first.
type NATSConfig struct {
	Common
	// URL is the server's nats:// URL; default nats://127.0.0.1:4222.
	URL string `json:"url"`
	// Stream is the JetStream stream name; its subject is Stream + ".data".
	Stream string `json:"stream"`
	// Recreate deletes and creates the stream before publishing.
	Recreate bool `json:"recreate"`
}

// BindNATSFlags defines the nats mode's flags on fs.
func BindNATSFlags(fs *flag.FlagSet, c *NATSConfig) {
	BindCommonFlags(fs, &c.Common)
	fs.IntVar(&c.ConfirmWindow, "confirm", 1000, "unacknowledged publishes per producer")
	fs.StringVar(&c.URL, "url", "nats://127.0.0.1:4222", "server URL")
	fs.StringVar(&c.Stream, "stream", "perf", "JetStream stream name (subject STREAM.data)")
	fs.BoolVar(&c.Recreate, "recreate", true, "delete and create the stream before publishing (only with producers)")
}

// RunNATS runs a JetStream workload.
func RunNATS(ctx context.Context, cfg NATSConfig, progress func(Progress), interval time.Duration) (Summary, error) {
	cfg.Common = cfg.Common.ensureDefaults()
	if cfg.ConfirmWindow == 0 {
		cfg.ConfirmWindow = 1000
	}
	if cfg.Stream == "" {
		cfg.Stream = "perf"
	}
	if cfg.URL == "" {
		cfg.URL = nats.DefaultURL
	}
	cfg.Recreate = cfg.Recreate && cfg.Producers > 0
	sum := Summary{Mode: "nats", Target: cfg.URL, Labels: cfg.Labels, Config: cfg, ExpectedConsumed: -1}
	if err := cfg.Common.validate(); err != nil {
		return sum, err
	}
	probe, err := startProbe(cfg.BrokerPID)
	if err != nil {
		return sum, err
	}
	st := &Stats{}
	subject := cfg.Stream + ".data"
	connect := func() (*nats.Conn, jetstream.JetStream, error) {
		nc, err := retry(ctx, cfg.WaitReady, func() (*nats.Conn, error) {
			return nats.Connect(cfg.URL, nats.Timeout(cfg.SetupTimeout))
		})
		if err != nil {
			return nil, nil, fmt.Errorf("perf: connect %s: %w", cfg.URL, err)
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(cfg.ConfirmWindow))
		if err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("perf: jetstream: %w", err)
		}
		return nc, js, nil
	}
	nc, js, err := connect()
	if err != nil {
		return sum, err
	}
	defer nc.Close()
	setupCtx, cancelSetup := context.WithTimeout(ctx, cfg.SetupTimeout)
	defer cancelSetup()
	if cfg.Recreate {
		if err := js.DeleteStream(setupCtx, cfg.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return sum, fmt.Errorf("perf: delete stream %s: %w", cfg.Stream, err)
		}
	}
	if cfg.Producers > 0 {
		if _, err := js.CreateOrUpdateStream(setupCtx, jetstream.StreamConfig{
			Name: cfg.Stream, Subjects: []string{subject}, Storage: jetstream.FileStorage, Replicas: 1,
		}); err != nil {
			return sum, fmt.Errorf("perf: create stream %s: %w", cfg.Stream, err)
		}
		if cfg.Recreate && !cfg.Keep && cfg.Consumers > 0 {
			defer func() {
				dctx, cancel := context.WithTimeout(context.Background(), cfg.SetupTimeout)
				defer cancel()
				_ = js.DeleteStream(dctx, cfg.Stream)
			}()
		}
	}

	for i := range cfg.Consumers {
		var mine atomic.Int64
		limit := int64(0)
		if cfg.Producers == 0 {
			limit = int64(cfg.Count)
		}
		cons, err := retry(ctx, cfg.WaitReady, func() (jetstream.Consumer, error) {
			return js.OrderedConsumer(setupCtx, cfg.Stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
		})
		if err != nil {
			return sum, fmt.Errorf("perf: consumer %d on %s: %w", i, cfg.Stream, err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if limit > 0 && mine.Add(1) > limit {
				return
			}
			d := m.Data()
			st.consumed(d, len(d), time.Now())
		})
		if err != nil {
			return sum, fmt.Errorf("perf: consume %d on %s: %w", i, cfg.Stream, err)
		}
		defer cc.Stop()
	}

	w := workload{common: cfg.Common, stats: st, progress: progress, interval: interval}
	for i := range cfg.Producers {
		pnc, pjs, err := connect()
		if err != nil {
			return sum, err
		}
		defer pnc.Close()
		w.producers = append(w.producers, func(ctx context.Context, deadline time.Time) error {
			return publishNATS(ctx, cfg, st, pjs, subject, i, deadline)
		})
	}
	w.expected = func() int64 {
		if cfg.Producers == 0 {
			if cfg.Count > 0 {
				return int64(cfg.Count) * int64(cfg.Consumers)
			}
			return -1
		}
		return st.Confirmed.Load() * int64(cfg.Consumers)
	}
	err = drive(ctx, w, &sum)
	if cfg.Consumers > 0 {
		sum.ExpectedConsumed = w.expected()
	}
	finishSummary(st, &sum, cfg.Common, cfg.Size, probe, true)
	return sum, err
}

// publishNATS publishes asynchronously with at most cfg.ConfirmWindow
// acks outstanding, settling the acks in order on a second goroutine.
func publishNATS(ctx context.Context, cfg NATSConfig, st *Stats, js jetstream.JetStream, subject string, id int, deadline time.Time) error {
	type pending struct {
		f    jetstream.PubAckFuture
		sent time.Time
	}
	futures := make(chan pending, cfg.ConfirmWindow)
	ackErr := make(chan error, 1)
	go func() {
		defer close(ackErr)
		for p := range futures {
			select {
			case <-p.f.Ok():
				st.confirmed(1, p.sent, time.Now())
			case err := <-p.f.Err():
				st.Nacked.Add(1)
				ackErr <- fmt.Errorf("perf: producer %d: %w: %v", id, ErrNacked, err)
				for range futures {
				}
				return
			case <-time.After(cfg.StallTimeout):
				ackErr <- fmt.Errorf("%w: producer %d: no ack for %v", ErrStall, id, cfg.StallTimeout)
				for range futures {
				}
				return
			}
		}
	}()
	lim := NewLimiter(cfg.Rate)
	seq := uint64(id) << 48
	var sendErr error
	for sent := 0; cfg.Count == 0 || sent < cfg.Count; sent++ {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
		if _, err := lim.Acquire(ctx, 1); err != nil {
			break
		}
		body := make([]byte, cfg.Size) // the client keeps it until acked
		now := time.Now()
		stamp(body, now, seq)
		seq++
		f, err := js.PublishAsync(subject, body)
		if err != nil {
			sendErr = fmt.Errorf("perf: producer %d: publish after %d: %w", id, sent, err)
			break
		}
		st.Published.Add(1)
		select {
		case futures <- pending{f, now}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(futures)
	err := <-ackErr
	return errors.Join(sendErr, err)
}
