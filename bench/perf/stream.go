package perf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// Application properties the stream producers set.
const (
	propFilter = "filter" // the filter value (with FilterValues)
	propKey    = "key"    // the routing key (super streams)
)

// RunStream runs a stream-protocol workload. progress, when not nil, gets
// a Progress every interval. The Summary is filled in as far as the run
// got, also when an error is returned.
func RunStream(ctx context.Context, cfg StreamConfig, progress func(Progress), interval time.Duration) (Summary, error) {
	cfg = cfg.ensureDefaults()
	sum := Summary{Mode: "stream", Target: cfg.Addr, Labels: cfg.Labels, Config: cfg, ExpectedConsumed: -1}
	if err := cfg.validate(); err != nil {
		return sum, err
	}
	probe, err := startProbe(cfg.BrokerPID)
	if err != nil {
		return sum, err
	}
	st := &Stats{}
	env, err := retry(ctx, cfg.WaitReady, func() (*stream.Environment, error) {
		return stream.NewEnvironment(streamEnvOptions(cfg))
	})
	if err != nil {
		return sum, fmt.Errorf("perf: connect %s: %w", cfg.Addr, err)
	}
	defer func() { _ = env.Close() }()

	if err := declareStream(ctx, env, cfg); err != nil {
		return sum, err
	}
	if cfg.Recreate && !cfg.Keep {
		defer func() {
			if cfg.SuperStream {
				_ = env.DeleteSuperStream(cfg.Stream)
			} else {
				_ = env.DeleteStream(cfg.Stream)
			}
		}()
	}

	// Consumers first, so that "next" sees everything published. A Go
	// client's consumer has credit as soon as it subscribes, before the
	// run starts: time to first counts from here.
	if cfg.T0.IsZero() && cfg.Consumers > 0 {
		cfg.T0 = time.Now()
	}
	var closers []func()
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	var starts []func() error // lean consumers get their credit when the run starts
	for i := range cfg.Consumers {
		closeFn, err := retry(ctx, cfg.WaitReady, func() (func(), error) {
			if cfg.Client == ClientLean {
				c, err := newLeanConsumer(ctx, cfg, st, i)
				if err != nil {
					return nil, err
				}
				starts = append(starts, c.start)
				return c.close, nil
			}
			return newStreamConsumer(env, cfg, st, i)
		})
		if err != nil {
			return sum, err
		}
		closers = append(closers, closeFn)
	}

	var matching atomic.Int64 // confirmed messages every consumer must get
	w := workload{common: cfg.Common, stats: st, progress: progress, interval: interval}
	for i := range cfg.Producers {
		if cfg.Client == ClientLean {
			p, err := newLeanProducer(ctx, cfg, st, i, &matching)
			if err != nil {
				return sum, err
			}
			closers = append(closers, p.close)
			w.producers = append(w.producers, p.run)
			continue
		}
		p, err := newStreamProducer(env, cfg, st, i, &matching)
		if err != nil {
			return sum, err
		}
		closers = append(closers, p.close)
		w.producers = append(w.producers, p.run)
	}
	w.expected = func() int64 {
		off, _ := ParseOffset(cfg.Offset)
		switch {
		case cfg.Producers == 0 && cfg.Count > 0:
			return int64(cfg.Count) * int64(cfg.Consumers)
		case cfg.Producers == 0:
			return -1
		case off.String() != stream.OffsetSpecification{}.First().String() &&
			off.String() != stream.OffsetSpecification{}.Next().String():
			return -1
		}
		return matching.Load() * int64(cfg.Consumers)
	}
	if cfg.Producers > 0 {
		sum.ExpectedConsumed = -1
	}
	for _, start := range starts {
		if err := start(); err != nil {
			return sum, err
		}
	}
	err = drive(ctx, w, &sum)
	if cfg.Consumers > 0 {
		sum.ExpectedConsumed = w.expected()
	}
	finishSummary(st, &sum, cfg.Common, cfg.Size, probe, true)
	if err == nil && sum.Nacked > 0 {
		err = fmt.Errorf("%w: %d messages", ErrNacked, sum.Nacked)
	}
	return sum, err
}

// streamEnvOptions points every connection at cfg.Addr and leaves the
// socket buffers to the kernel (the client's 8 KiB stalls loopback TCP;
// see bench/README.md).
func streamEnvOptions(cfg StreamConfig) *stream.EnvironmentOptions {
	host, port, _ := splitHostPort(cfg.Addr)
	opts := stream.NewEnvironmentOptions().
		SetHost(host).SetPort(port).
		SetUser(cfg.User).SetPassword(cfg.Password).SetVHost(cfg.Vhost).
		SetAddressResolver(stream.AddressResolver{Host: host, Port: port}).
		SetRPCTimeout(cfg.SetupTimeout).
		SetWriteBuffer(0).SetReadBuffer(0)
	if cfg.TLS {
		opts.IsTLS(true).SetTLSConfig(&tls.Config{ServerName: host})
	}
	return opts
}

// declareStream creates the stream or super stream: afresh with Recreate,
// else only if missing (and only when there are producers).
func declareStream(ctx context.Context, env *stream.Environment, cfg StreamConfig) error {
	opts := stream.NewStreamOptions()
	if cfg.MaxSegmentSize > 0 {
		opts.SetMaxSegmentSizeBytes(stream.ByteCapacity{}.B(cfg.MaxSegmentSize))
	}
	if cfg.SuperStream {
		if cfg.Producers == 0 {
			return nil
		}
		if cfg.Recreate {
			_ = env.DeleteSuperStream(cfg.Stream) // absent is fine
		}
		po := stream.NewPartitionsOptions(cfg.Partitions)
		if cfg.MaxSegmentSize > 0 {
			po.SetMaxSegmentSizeBytes(stream.ByteCapacity{}.B(cfg.MaxSegmentSize))
		}
		if err := env.DeclareSuperStream(cfg.Stream, po); err != nil && !errors.Is(err, stream.StreamAlreadyExists) {
			return fmt.Errorf("perf: declare super stream %q: %w", cfg.Stream, err)
		}
		return nil
	}
	if cfg.Recreate {
		return recreateStream(ctx, env, cfg.Stream, opts, cfg.SetupTimeout)
	}
	if cfg.Producers == 0 {
		return nil
	}
	if err := env.DeclareStream(cfg.Stream, opts); err != nil {
		return fmt.Errorf("perf: declare stream %q: %w", cfg.Stream, err)
	}
	return nil
}

// recreateStream deletes the stream name if it exists, waits (at most
// timeout) until it is gone and declares it with opts.
func recreateStream(ctx context.Context, env *stream.Environment, name string, opts *stream.StreamOptions, timeout time.Duration) error {
	exists, err := env.StreamExists(name)
	if err != nil {
		return fmt.Errorf("perf: stream %q exists: %w", name, err)
	}
	if exists {
		if err := env.DeleteStream(name); err != nil {
			return fmt.Errorf("perf: delete stream %q: %w", name, err)
		}
		// DeclareStream treats "already exists" as success, so a declare
		// that overtook the delete would publish onto the old stream.
		deadline := time.Now().Add(timeout)
		for {
			exists, err := env.StreamExists(name)
			if err != nil {
				return fmt.Errorf("perf: stream %q exists: %w", name, err)
			}
			if !exists {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: stream %q still exists %v after delete", ErrStall, name, timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err := env.DeclareStream(name, opts); err != nil {
		return fmt.Errorf("perf: declare stream %q: %w", name, err)
	}
	return nil
}

// newStreamConsumer subscribes consumer i and returns its close function.
func newStreamConsumer(env *stream.Environment, cfg StreamConfig, st *Stats, i int) (func(), error) {
	off, _ := ParseOffset(cfg.Offset)
	var mine atomic.Int64
	limit := int64(0)
	if cfg.Producers == 0 {
		limit = int64(cfg.Count)
	}
	handler := func(_ stream.ConsumerContext, m *amqp.Message) {
		if limit > 0 && mine.Add(1) > limit {
			return
		}
		data := m.GetData()
		st.consumed(data, len(data), time.Now())
	}
	var filter *stream.ConsumerFilter
	if len(cfg.ConsumerFilter) > 0 {
		values := cfg.ConsumerFilter
		filter = stream.NewConsumerFilter(values, false, func(m *amqp.Message) bool {
			v, _ := m.ApplicationProperties[propFilter].(string)
			return slices.Contains(values, v)
		})
	}
	name := fmt.Sprintf("perf-consumer-%d", i)
	if cfg.SuperStream {
		opts := stream.NewSuperStreamConsumerOptions().SetClientProvidedName(name).SetOffset(off)
		if filter != nil {
			opts.SetFilter(filter)
		}
		c, err := env.NewSuperStreamConsumer(cfg.Stream, handler, opts)
		if err != nil {
			return nil, fmt.Errorf("perf: consumer %d on super stream %q: %w", i, cfg.Stream, err)
		}
		return func() { _ = c.Close() }, nil
	}
	opts := stream.NewConsumerOptions().SetClientProvidedName(name).SetOffset(off).
		SetInitialCredits(int16(cfg.Credits))
	if filter != nil {
		opts.SetFilter(filter)
	}
	c, err := env.NewConsumer(cfg.Stream, handler, opts)
	if err != nil {
		return nil, fmt.Errorf("perf: consumer %d on stream %q: %w", i, cfg.Stream, err)
	}
	return func() { _ = c.Close() }, nil
}

// streamProducer is one producer, plain or super stream.
type streamProducer struct {
	// Static after construction.
	id       int
	cfg      StreamConfig
	st       *Stats
	matching *atomic.Int64
	win      *confirmWindow
	plain    *stream.Producer
	super    *stream.SuperStreamProducer
	confirms <-chan []*stream.ConfirmationStatus
	closed   stream.ChannelClose
	// sent is written by send and read by awaitConfirms after sendDone.
	sent     atomic.Int64
	sendDone chan struct{}
}

func newStreamProducer(env *stream.Environment, cfg StreamConfig, st *Stats, id int, matching *atomic.Int64) (*streamProducer, error) {
	p := &streamProducer{id: id, cfg: cfg, st: st, matching: matching,
		win: newConfirmWindow(cfg.ConfirmWindow), sendDone: make(chan struct{})}
	name := fmt.Sprintf("perf-producer-%d", id)
	var pf *stream.ProducerFilter
	if len(cfg.FilterValues) > 0 {
		pf = stream.NewProducerFilter(func(m message.StreamMessage) string {
			v, _ := m.GetApplicationProperties()[propFilter].(string)
			return v
		})
	}
	if cfg.SuperStream {
		route := stream.NewHashRoutingStrategy(func(m message.StreamMessage) string {
			v, _ := m.GetApplicationProperties()[propKey].(string)
			return v
		})
		opts := stream.NewSuperStreamProducerOptions(route).SetClientProvidedName(name)
		if pf != nil {
			opts = opts.SetFilter(pf)
		}
		sp, err := env.NewSuperStreamProducer(cfg.Stream, opts)
		if err != nil {
			return nil, fmt.Errorf("perf: producer %d on super stream %q: %w", id, cfg.Stream, err)
		}
		p.super = sp
		// Flatten the per-partition confirms into one channel.
		in := sp.NotifyPublishConfirmation(cfg.ConfirmWindow + 1)
		out := make(chan []*stream.ConfirmationStatus, cfg.ConfirmWindow+1)
		go func() {
			defer close(out)
			for pc := range in {
				out <- pc.ConfirmationStatus
			}
		}()
		p.confirms = out
		return p, nil
	}
	opts := stream.NewProducerOptions().SetClientProvidedName(name).
		// The client's own unconfirmed limit stays above the window, so
		// BatchSend never blocks inside the client (and at or above the
		// 500 the client accepts at least).
		SetQueueSize(max(cfg.ConfirmWindow+cfg.BatchSize, 500))
	if cfg.SubEntrySize > 1 {
		comp, _ := ParseCompression(cfg.Compression)
		opts.SetSubEntrySize(cfg.SubEntrySize).SetCompression(comp)
	}
	if cfg.ProducerName != "" {
		opts.SetProducerName(fmt.Sprintf("%s-%d", cfg.ProducerName, id))
	}
	if pf != nil {
		opts.SetFilter(pf)
	}
	prod, err := env.NewProducer(cfg.Stream, opts)
	if err != nil {
		return nil, fmt.Errorf("perf: producer %d on stream %q: %w", id, cfg.Stream, err)
	}
	p.plain = prod
	p.confirms = prod.NotifyPublishConfirmation()
	p.closed = prod.NotifyClose()
	return p, nil
}

func (p *streamProducer) close() {
	if p.plain != nil {
		_ = p.plain.Close()
	}
	if p.super != nil {
		_ = p.super.Close()
	}
}

// run publishes and waits for every confirm.
func (p *streamProducer) run(ctx context.Context, deadline time.Time) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sendErr := make(chan error, 1)
	go func() {
		err := p.send(ctx, deadline)
		close(p.sendDone)
		if err != nil {
			cancel(err)
		}
		sendErr <- err
	}()
	confErr := p.awaitConfirms(ctx)
	if err := <-sendErr; err != nil {
		return err
	}
	return confErr
}

// send publishes cfg.Count messages (0: unlimited) until deadline.
func (p *streamProducer) send(ctx context.Context, deadline time.Time) error {
	cfg := p.cfg
	lim := NewLimiter(cfg.Rate)
	batch := make([]message.StreamMessage, 0, cfg.BatchSize)
	seq := uint64(p.id) << 48
	base := rand.Uint64() // spreads super stream keys across runs
	var sent int64
	for cfg.Count == 0 || sent < int64(cfg.Count) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
		k := cfg.BatchSize
		if cfg.Count > 0 {
			k = int(min(int64(k), int64(cfg.Count)-sent))
		}
		k, err := lim.Acquire(ctx, k)
		if err != nil {
			return nil // the run ended; whoever ended it reports why
		}
		if err := p.win.Acquire(ctx, k, cfg.StallTimeout); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("perf: producer %d after %d sent: %w", p.id, sent, err)
		}
		batch = batch[:0]
		bodies := make([]byte, k*cfg.Size)
		now := time.Now()
		matched := int64(0)
		for i := range k {
			body := bodies[i*cfg.Size : (i+1)*cfg.Size : (i+1)*cfg.Size]
			stamp(body, now, seq)
			m := amqp.NewMessage(body)
			if len(cfg.FilterValues) > 0 || cfg.SuperStream {
				props := map[string]any{}
				if len(cfg.FilterValues) > 0 {
					v := cfg.FilterValues[int(sent+int64(i))%len(cfg.FilterValues)]
					props[propFilter] = v
					if len(cfg.ConsumerFilter) == 0 || slices.Contains(cfg.ConsumerFilter, v) {
						matched++
					}
				}
				if cfg.SuperStream {
					props[propKey] = strconv.FormatUint(base+seq, 10)
				}
				if len(cfg.FilterValues) == 0 {
					matched++
				}
				m.ApplicationProperties = props
			} else {
				matched++
			}
			seq++
			batch = append(batch, m)
		}
		if p.super != nil {
			for _, m := range batch {
				if err := p.super.Send(m); err != nil {
					return fmt.Errorf("perf: producer %d: send after %d: %w", p.id, sent, err)
				}
			}
		} else if err := p.plain.BatchSend(batch); err != nil {
			return fmt.Errorf("perf: producer %d: batch send after %d: %w", p.id, sent, err)
		}
		sent += int64(k)
		p.sent.Store(sent)
		p.st.Published.Add(int64(k))
		p.matching.Add(matched)
	}
	return nil
}

// awaitConfirms counts confirms until every sent message is settled.
func (p *streamProducer) awaitConfirms(ctx context.Context) error {
	stall := time.NewTimer(p.cfg.StallTimeout)
	defer stall.Stop()
	done := p.sendDone
	target := int64(-1)
	var settled int64
	for target < 0 || settled < target {
		select {
		case statuses, ok := <-p.confirms:
			if !ok {
				return fmt.Errorf("perf: producer %d: confirm channel closed after %d", p.id, settled)
			}
			now := time.Now()
			ok = true
			for _, s := range statuses {
				if !s.IsConfirmed() {
					p.st.Nacked.Add(1)
					ok = false
					continue
				}
				var sent time.Time
				if m := s.GetMessage(); m != nil {
					if d := m.GetData(); len(d) > 0 {
						sent, _ = stampTime(d[0])
					}
				}
				p.st.confirmed(1, sent, now)
			}
			settled += int64(len(statuses))
			p.win.Release(len(statuses))
			stall.Reset(p.cfg.StallTimeout)
			if !ok {
				return fmt.Errorf("perf: producer %d: %w (code %d)", p.id, ErrNacked, statuses[0].GetErrorCode())
			}
		case <-done:
			target, done = p.sent.Load(), nil
		case ev := <-p.closed:
			return fmt.Errorf("perf: producer %d closed after %d confirms: %s %v", p.id, settled, ev.Reason, ev.Err)
		case <-stall.C:
			if settled >= p.sent.Load() {
				stall.Reset(p.cfg.StallTimeout) // nothing awaited (a slow rate)
				continue
			}
			return fmt.Errorf("%w: producer %d: no confirm for %v after %d", ErrStall, p.id, p.cfg.StallTimeout, settled)
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}
