package perf

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/bench/leanstream"
)

// validateLean refuses what the lean client does not do.
func (c StreamConfig) validateLean() error {
	switch {
	case c.SuperStream:
		return fmt.Errorf("%w: the lean client does not support super streams (use -client go)", ErrConfig)
	case len(c.FilterValues) > 0 || len(c.ConsumerFilter) > 0:
		return fmt.Errorf("%w: the lean client does not support filtering (use -client go)", ErrConfig)
	case c.ProducerName != "":
		return fmt.Errorf("%w: the lean client does not support named producers (deduplication; use -client go)", ErrConfig)
	case c.SubEntrySize > 1:
		return fmt.Errorf("%w: the lean client does not support sub-entries (use -client go)", ErrConfig)
	}
	return nil
}

// leanConfig is the connection config of a lean producer or consumer.
func leanConfig(cfg StreamConfig, name string) leanstream.Config {
	return leanstream.Config{Addr: cfg.Addr, User: cfg.User, Password: cfg.Password, Vhost: cfg.Vhost,
		ConnectionName: name, Timeout: cfg.SetupTimeout, CheckCRC: true, TLS: cfg.TLS}
}

// leanConsumer is one consumer on its own lean connection.
type leanConsumer struct {
	id      int
	credits uint16
	c       *leanstream.Client
}

// newLeanConsumer subscribes consumer i on its own lean connection, with
// no credit until start: deliveries must not begin before the run's clock.
// It gives one credit back per chunk.
func newLeanConsumer(ctx context.Context, cfg StreamConfig, st *Stats, i int) (*leanConsumer, error) {
	spec, err := leanstream.ParseOffsetSpec(cfg.Offset)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	name := fmt.Sprintf("perf-consumer-%d", i)
	c, err := leanstream.DialConfig(ctx, leanConfig(cfg, name))
	if err != nil {
		return nil, fmt.Errorf("perf: consumer %d: %w", i, err)
	}
	limit := int64(0)
	if cfg.Producers == 0 {
		limit = int64(cfg.Count)
	}
	var mine int64 // only the connection's reader goroutine runs the handler
	lat := latencyRun{h: &st.Latency}
	handler := func(ch *leanstream.Chunk) {
		now := time.Now()
		nowNs := now.UnixNano()
		n, bytes := 0, 0
		it := ch.Messages()
		for it.Next() {
			if limit > 0 {
				if mine++; mine > limit {
					continue
				}
			}
			data, _ := leanstream.DataBody(it.Message())
			n, bytes = n+1, bytes+len(data)
			if sent, ok := stampNanos(data); ok { // as deliveryLatency, one add per run
				lat.record(nowNs - sent)
			}
		}
		lat.flush()
		st.consumedBatch(n, bytes, now)
		if it.Err() != nil {
			// Records after the error are lost; the run then ends
			// incomplete or stalled.
			st.Nacked.Add(1)
		}
		c.DeferCredit(ch.SubscriptionID, 1) // written before the reader next reads the socket
	}
	if err := c.Subscribe(leanSubscriptionID, cfg.Stream, spec, 0, handler); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("perf: consumer %d on stream %q: %w", i, cfg.Stream, err)
	}
	return &leanConsumer{id: i, credits: uint16(cfg.Credits), c: c}, nil
}

// leanSubscriptionID is the subscription id of every lean consumer: each
// has its own connection.
const leanSubscriptionID = 0

// start gives the consumer its initial credit.
func (lc *leanConsumer) start() error {
	if err := lc.c.Credit(leanSubscriptionID, lc.credits); err != nil {
		return fmt.Errorf("perf: consumer %d: %w", lc.id, err)
	}
	return nil
}

func (lc *leanConsumer) close() { _ = lc.c.Close() }

// leanPublisherID is the publisher id of every lean producer: each has its
// own connection.
const leanPublisherID = 0

// leanProducer is one producer on its own lean connection.
type leanProducer struct {
	// Static after construction.
	id       int
	cfg      StreamConfig
	st       *Stats
	matching *atomic.Int64
	win      *confirmWindow
	c        *leanstream.Client
	// sentAt remembers the send time of recent publishing ids for confirm
	// latencies: slot id % len holds the id and its time.
	sentAt []sentSlot

	sent     atomic.Int64  // written by send, read after sendDone
	settled  atomic.Int64  // confirmed or refused, by the reader goroutine
	nackCode atomic.Uint32 // the first refusal's code
	signal   chan struct{} // 1-buffered: settled grew
	sendDone chan struct{}
}

type sentSlot struct {
	id atomic.Uint64
	ns atomic.Int64
}

func newLeanProducer(ctx context.Context, cfg StreamConfig, st *Stats, id int, matching *atomic.Int64) (*leanProducer, error) {
	p := &leanProducer{id: id, cfg: cfg, st: st, matching: matching,
		win:    newConfirmWindow(cfg.ConfirmWindow),
		sentAt: make([]sentSlot, cfg.ConfirmWindow+cfg.BatchSize),
		signal: make(chan struct{}, 1), sendDone: make(chan struct{})}
	lc := leanConfig(cfg, fmt.Sprintf("perf-producer-%d", id))
	lc.OnConfirm = p.onConfirm
	lc.OnPublishError = p.onPublishError
	c, err := leanstream.DialConfig(ctx, lc)
	if err != nil {
		return nil, fmt.Errorf("perf: producer %d: %w", id, err)
	}
	if err := c.DeclarePublisher(leanPublisherID, "", cfg.Stream); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("perf: producer %d on stream %q: %w", id, cfg.Stream, err)
	}
	p.c = c
	return p, nil
}

func (p *leanProducer) close() { _ = p.c.Close() }

func (p *leanProducer) notify() {
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// onConfirm runs on the connection's reader goroutine.
func (p *leanProducer) onConfirm(_ uint8, ids []uint64) {
	now := time.Now()
	for _, id := range ids {
		var sent time.Time
		if s := &p.sentAt[id%uint64(len(p.sentAt))]; s.id.Load() == id {
			sent = time.Unix(0, s.ns.Load())
		}
		p.st.confirmed(1, sent, now)
	}
	p.settled.Add(int64(len(ids)))
	p.win.Release(len(ids))
	p.notify()
}

// onPublishError runs on the connection's reader goroutine.
func (p *leanProducer) onPublishError(_ uint8, errs []leanstream.PublishError) {
	if len(errs) == 0 {
		return
	}
	p.nackCode.CompareAndSwap(0, uint32(errs[0].Code))
	p.st.Nacked.Add(int64(len(errs)))
	p.settled.Add(int64(len(errs)))
	p.win.Release(len(errs))
	p.notify()
}

// run publishes and waits for every confirm.
func (p *leanProducer) run(ctx context.Context, deadline time.Time) error {
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

// send publishes cfg.Count messages (0: unlimited) until deadline, at most
// BatchSize (and a frame's worth) per Publish frame.
func (p *leanProducer) send(ctx context.Context, deadline time.Time) error {
	cfg := p.cfg
	perFrame := cfg.BatchSize
	if fm := p.c.FrameMax(); fm > 0 {
		// Frame header 13 bytes; per message id 8, size 4 and the message.
		perFrame = min(perFrame, (int(fm)-13)/(12+leanstream.EncodedSize(cfg.Size)))
		if perFrame < 1 {
			return fmt.Errorf("perf: producer %d: a %d-byte message exceeds the frame max %d", p.id, cfg.Size, fm)
		}
	}
	lim := NewLimiter(cfg.Rate)
	var batch leanstream.Batch
	seq := uint64(p.id) << 48
	var pid uint64 // publishing ids 1, 2, ...
	var sent int64
	for cfg.Count == 0 || sent < int64(cfg.Count) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
		k := perFrame
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
		batch.Reset()
		now := time.Now()
		ns := now.UnixNano()
		for range k {
			pid++
			stamp(batch.Append(pid, cfg.Size), now, seq)
			seq++
			s := &p.sentAt[pid%uint64(len(p.sentAt))]
			s.ns.Store(ns)
			s.id.Store(pid)
		}
		if err := p.c.Publish(leanPublisherID, &batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("perf: producer %d: publish after %d: %w", p.id, sent, err)
		}
		sent += int64(k)
		p.sent.Store(sent)
		p.st.Published.Add(int64(k))
		p.matching.Add(int64(k))
	}
	return nil
}

// awaitConfirms waits until every sent message is settled.
func (p *leanProducer) awaitConfirms(ctx context.Context) error {
	stall := time.NewTimer(p.cfg.StallTimeout)
	defer stall.Stop()
	done := p.sendDone
	target := int64(-1)
	var last int64
	for {
		settled := p.settled.Load()
		if code := p.nackCode.Load(); code != 0 {
			return fmt.Errorf("perf: producer %d: %w (code %d)", p.id, ErrNacked, code)
		}
		if target >= 0 && settled >= target {
			return nil
		}
		if settled != last {
			last = settled
			stall.Reset(p.cfg.StallTimeout)
		}
		select {
		case <-p.signal:
		case <-done:
			target, done = p.sent.Load(), nil
		case <-p.c.Done():
			return fmt.Errorf("perf: producer %d closed after %d confirms: %w", p.id, p.settled.Load(), p.c.Err())
		case <-stall.C:
			if p.settled.Load() >= p.sent.Load() {
				stall.Reset(p.cfg.StallTimeout) // nothing awaited (a slow rate)
				continue
			}
			return fmt.Errorf("%w: producer %d: no confirm for %v after %d", ErrStall, p.id, p.cfg.StallTimeout, p.settled.Load())
		case <-ctx.Done():
			return nil
		}
	}
}
