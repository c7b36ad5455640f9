package streambench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// ErrUnconfirmed marks a publish run in which the broker or the client
// reported messages as not confirmed.
var ErrUnconfirmed = errors.New("streambench: messages not confirmed")

// RunPublish deletes cfg.Stream if it exists, declares it again and publishes
// cfg.Messages messages with confirms (see the package doc). It returns an
// error wrapping ErrUnconfirmed, with the Result filled in, if any message
// was not confirmed.
func RunPublish(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := prepare(cfg)
	res := Result{Mode: "publish", Addr: cfg.Addr, Messages: cfg.Messages, MessageSize: cfg.MessageSize}
	if err != nil {
		return res, err
	}
	env, err := connect(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Close() }()

	if err := RecreateStream(ctx, env, cfg.Stream, stream.NewStreamOptions(), cfg.SetupTimeout); err != nil {
		return res, err
	}

	pubs := make([]*publisher, cfg.Producers)
	for i := range pubs {
		n := cfg.Messages / cfg.Producers
		if i < cfg.Messages%cfg.Producers {
			n++
		}
		p, err := newPublisher(ctx, env, cfg, i, n)
		if err != nil {
			return res, err
		}
		defer p.close()
		pubs[i] = p
	}

	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(pubs))
	for i, p := range pubs {
		wg.Go(func() { errs[i] = p.run(ctx, cfg) })
	}
	wg.Wait()

	var end time.Time
	var latencies []time.Duration
	var firstFailure error
	for _, p := range pubs {
		res.Count += p.ok
		res.Failed += p.failed
		res.Bytes += p.bytes
		if p.last.After(end) {
			end = p.last
		}
		latencies = append(latencies, p.latencies...)
		if firstFailure == nil {
			firstFailure = p.firstFailure
		}
	}
	if !end.IsZero() {
		res.Elapsed = end.Sub(start)
	}
	res.finish()
	res.setLatencies(latencies)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if res.Failed > 0 {
		return res, fmt.Errorf("streambench: publish to %s: %d of %d: %w (first: %v)",
			cfg.Addr, res.Failed, cfg.Messages, ErrUnconfirmed, firstFailure)
	}
	return res, nil
}

// RecreateStream deletes the stream name if it exists, waits (at most
// timeout) until it is gone and declares it with opts. Other harnesses
// (bench/perf) share it.
func RecreateStream(ctx context.Context, env *stream.Environment, name string, opts *stream.StreamOptions, timeout time.Duration) error {
	exists, err := env.StreamExists(name)
	if err != nil {
		return fmt.Errorf("streambench: stream %q exists: %w", name, err)
	}
	if exists {
		if err := env.DeleteStream(name); err != nil {
			return fmt.Errorf("streambench: delete stream %q: %w", name, err)
		}
		// DeclareStream treats "already exists" as success, so a declare
		// that overtook the delete would publish onto the old stream.
		deadline := time.Now().Add(timeout)
		for {
			exists, err := env.StreamExists(name)
			if err != nil {
				return fmt.Errorf("streambench: stream %q exists: %w", name, err)
			}
			if !exists {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("streambench: stream %q still exists %v after delete: %w",
					name, timeout, ErrTimeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err := env.DeclareStream(name, opts); err != nil {
		return fmt.Errorf("streambench: declare stream %q: %w", name, err)
	}
	return nil
}

// publisher is one producer and its counters.
type publisher struct {
	// Static after construction.
	id       int
	n        int // messages to publish
	producer *stream.Producer
	confirms stream.ChannelPublishConfirm
	closed   stream.ChannelClose
	win      *Window

	// Owned by the confirm loop in run; read after run returns.
	ok, failed   int
	bytes        int64
	last         time.Time // when the last confirm arrived
	latencies    []time.Duration
	firstFailure error
}

func newPublisher(ctx context.Context, env *stream.Environment, cfg Config, id, n int) (*publisher, error) {
	opts := stream.NewProducerOptions().
		SetClientProvidedName(fmt.Sprintf("streambench-producer-%d", id)).
		// QueueSize is the client's own unconfirmed limit; keep the window
		// below it so BatchSend never blocks inside the client.
		SetQueueSize(cfg.MaxInFlight + cfg.BatchSize)
	if cfg.SubEntrySize > 1 {
		opts.SetSubEntrySize(cfg.SubEntrySize)
	}
	what := fmt.Sprintf("producer %d on stream %q", id, cfg.Stream)
	prod, err := withTimeout(ctx, cfg.SetupTimeout, what,
		func() (*stream.Producer, error) { return env.NewProducer(cfg.Stream, opts) },
		func(p *stream.Producer) { _ = p.Close() })
	if err != nil {
		if errors.Is(err, ErrTimeout) {
			return nil, fmt.Errorf("streambench: %w%s", err, setupHint(env, cfg))
		}
		return nil, fmt.Errorf("streambench: %s: %w", what, err)
	}
	return &publisher{
		id:        id,
		n:         n,
		producer:  prod,
		confirms:  prod.NotifyPublishConfirmation(),
		closed:    prod.NotifyClose(),
		win:       NewWindow(cfg.MaxInFlight),
		latencies: make([]time.Duration, 0, n),
	}, nil
}

func (p *publisher) close() {
	_ = p.producer.Close()
}

// run sends p.n messages and waits for all their confirms.
func (p *publisher) run(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sendErr := make(chan error, 1)
	go func() {
		err := p.send(ctx, cfg)
		if err != nil {
			cancel()
		}
		sendErr <- err
	}()
	confirmErr := p.awaitConfirms(ctx, cfg)
	if err := <-sendErr; err != nil {
		return err
	}
	return confirmErr
}

// send publishes p.n messages in batches of cfg.BatchSize, within the window.
func (p *publisher) send(ctx context.Context, cfg Config) error {
	filler := make([]byte, cfg.MessageSize-headerSize)
	for i := range filler {
		filler[i] = 0x5A
	}
	var seq uint64
	batch := make([]message.StreamMessage, 0, cfg.BatchSize)
	for sent := 0; sent < p.n; {
		b := min(cfg.BatchSize, p.n-sent)
		if err := p.win.Acquire(ctx, b, cfg.StallTimeout); err != nil {
			return fmt.Errorf("streambench: producer %d after %d of %d sent: %w", p.id, sent, p.n, err)
		}
		batch = batch[:0]
		bodies := make([]byte, b*cfg.MessageSize)
		now := uint64(time.Now().UnixNano())
		for i := range b {
			body := bodies[i*cfg.MessageSize : (i+1)*cfg.MessageSize : (i+1)*cfg.MessageSize]
			binary.BigEndian.PutUint64(body[0:8], now)
			binary.BigEndian.PutUint64(body[8:16], seq)
			copy(body[headerSize:], filler)
			seq++
			batch = append(batch, amqp.NewMessage(body))
		}
		if err := p.producer.BatchSend(batch); err != nil {
			return fmt.Errorf("streambench: producer %d: batch send after %d of %d: %w", p.id, sent, p.n, err)
		}
		sent += b
	}
	return nil
}

// awaitConfirms counts confirms until all p.n messages are settled.
func (p *publisher) awaitConfirms(ctx context.Context, cfg Config) error {
	stall := time.NewTimer(cfg.StallTimeout)
	defer stall.Stop()
	for settled := 0; settled < p.n; {
		select {
		case statuses, ok := <-p.confirms:
			if !ok {
				return fmt.Errorf("streambench: producer %d: confirm channel closed after %d of %d", p.id, settled, p.n)
			}
			now := time.Now()
			for _, st := range statuses {
				if !st.IsConfirmed() {
					p.failed++
					if p.firstFailure == nil {
						p.firstFailure = fmt.Errorf("publishing id %d: code %d: %w",
							st.GetPublishingId(), st.GetErrorCode(), st.GetError())
					}
					continue
				}
				p.ok++
				p.bytes += int64(cfg.MessageSize)
				if sent, ok := sendTime(st.GetMessage()); ok {
					p.latencies = append(p.latencies, now.Sub(sent))
				}
			}
			settled += len(statuses)
			p.last = now
			p.win.Release(len(statuses))
			stall.Reset(cfg.StallTimeout)
			if p.failed > 0 {
				// The client reports a message as failed when the broker
				// rejects it or when it has waited ConfirmationTimeOut (10 s)
				// for the confirm; either way the run is void, so stop
				// rather than limp on at one window per timeout.
				return fmt.Errorf("streambench: producer %d: %d of %d not confirmed: %w (first: %v)",
					p.id, p.failed, p.n, ErrUnconfirmed, p.firstFailure)
			}
		case ev := <-p.closed:
			return fmt.Errorf("streambench: producer %d closed after %d of %d confirms: %s %v", p.id, settled, p.n, ev.Reason, ev.Err)
		case <-stall.C:
			return fmt.Errorf("streambench: producer %d: no confirm for %v after %d of %d: %w",
				p.id, cfg.StallTimeout, settled, p.n, ErrTimeout)
		case <-ctx.Done():
			return fmt.Errorf("streambench: producer %d after %d of %d confirms: %w", p.id, settled, p.n, ctx.Err())
		}
	}
	return nil
}

// sendTime reads the send time from a message body written by send.
func sendTime(m message.StreamMessage) (time.Time, bool) {
	if m == nil {
		return time.Time{}, false
	}
	data := m.GetData()
	if len(data) == 0 || len(data[0]) < headerSize {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(data[0][0:8]))), true
}
