package amqpbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

var (
	// ErrDeclare marks a declare (queue, exchange or binding) the broker
	// refused, such as a quorum queue on a broker without them.
	ErrDeclare = errors.New("amqpbench: declare refused")
	// ErrNacked marks a run in which the broker nacked a message.
	ErrNacked = errors.New("amqpbench: message nacked")
	// ErrStall marks a run in which confirms or deliveries stopped.
	ErrStall = errors.New("amqpbench: no progress")
	// ErrClosed marks a channel or connection closed under the run.
	ErrClosed = errors.New("amqpbench: closed")
)

// teardownTimeout bounds each polite close and each delete at the end.
const teardownTimeout = 5 * time.Second

// RunScenario declares the scenario's queues (and exchange), runs
// cfg.Scenario once against cfg.URL and deletes what it declared. The
// Result is filled in as far as the run got, also when an error is
// returned. A refused declare returns an error wrapping ErrDeclare.
func RunScenario(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.ensureDefaults()
	res := Result{
		Scenario:    cfg.Scenario,
		QueueType:   cfg.QueueType,
		MessageSize: cfg.MessageSize,
		Queues:      cfg.Queues,
		URL:         RedactURL(cfg.URL),
	}
	if err := cfg.validate(); err != nil {
		return res, err
	}
	if cfg.BrokerPID > 0 {
		if _, err := ReadProc(cfg.BrokerPID); err != nil {
			return res, err
		}
	}
	r := &run{cfg: cfg, base: fmt.Sprintf("%s-%s-%08x", cfg.Prefix, cfg.Scenario, rand.Uint32())}
	err := r.setup(ctx)
	if err == nil {
		err = r.measure(ctx, &res)
	}
	return res, errors.Join(err, r.teardown())
}

// run is the state of one RunScenario.
type run struct {
	cfg  Config
	base string // name prefix of everything declared

	setupConn *conn
	setupCh   *amqp.Channel
	exchange  string   // declared fanout exchange, or ""
	queues    []string // declared queues, in order

	pub       *publisher
	consumers []*consumer
	runConns  []*conn // publisher and consumer connections
}

// setup declares the topology, subscribes the consumers and readies the
// publisher.
func (r *run) setup(ctx context.Context) error {
	cfg := r.cfg
	var err error
	if r.setupConn, err = dial(ctx, cfg, "amqpbench-setup"); err != nil {
		return err
	}
	if err := guard(ctx, cfg.SetupTimeout, r.setupConn, "open setup channel", func() (err error) {
		r.setupCh, err = r.setupConn.c.Channel()
		return err
	}); err != nil {
		return err
	}
	declare := func(what string, f func() error) error {
		err := guard(ctx, cfg.SetupTimeout, r.setupConn, what, f)
		var aerr *amqp.Error
		if errors.As(err, &aerr) {
			return fmt.Errorf("%w: %w", ErrDeclare, err)
		}
		if err != nil {
			return fmt.Errorf("amqpbench: %w", err)
		}
		return nil
	}

	if cfg.Scenario == ScenarioFanout {
		name := r.base + "-x"
		if err := declare("declare fanout exchange "+name, func() error {
			return r.setupCh.ExchangeDeclare(name, amqp.ExchangeFanout, true, false, false, false, nil)
		}); err != nil {
			return err
		}
		r.exchange = name
	}
	var args amqp.Table
	if cfg.QueueType != QueueTypeClassic {
		args = amqp.Table{amqp.QueueTypeArg: cfg.QueueType}
	}
	for i := range cfg.Queues {
		name := fmt.Sprintf("%s-q%d", r.base, i)
		if err := declare(fmt.Sprintf("declare %s queue %s", cfg.QueueType, name), func() error {
			_, err := r.setupCh.QueueDeclare(name, true, false, false, false, args)
			return err
		}); err != nil {
			return err
		}
		r.queues = append(r.queues, name)
		if r.exchange != "" {
			if err := declare(fmt.Sprintf("bind %s to %s", name, r.exchange), func() error {
				return r.setupCh.QueueBind(name, "", r.exchange, false, nil)
			}); err != nil {
				return err
			}
		}
	}

	consConns := make([]*conn, cfg.ConsumerConnections)
	for i := range consConns {
		if consConns[i], err = dial(ctx, cfg, fmt.Sprintf("amqpbench-consumer-%d", i)); err != nil {
			return err
		}
		r.runConns = append(r.runConns, consConns[i])
	}
	for i, q := range r.queues {
		c, err := newConsumer(ctx, cfg, consConns[i%len(consConns)], i, q)
		if err != nil {
			return err
		}
		r.consumers = append(r.consumers, c)
	}

	pubConn, err := dial(ctx, cfg, "amqpbench-publisher")
	if err != nil {
		return err
	}
	r.runConns = append(r.runConns, pubConn)
	exchange, key := r.exchange, ""
	if exchange == "" {
		key = r.queues[0] // the default exchange routes by queue name
	}
	r.pub, err = newPublisher(ctx, cfg, pubConn, exchange, key)
	return err
}

// measure runs the publisher and the consumers until every consumer has
// every published message, and fills res.
func (r *run) measure(ctx context.Context, res *Result) error {
	cfg := r.cfg
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// On the first failure every socket of the run is closed, so that no
	// goroutine stays blocked in the client.
	stopAbort := context.AfterFunc(ctx, func() {
		for _, cn := range r.runConns {
			cn.abort()
		}
	})
	defer stopAbort()

	var before ProcSample
	if cfg.BrokerPID > 0 {
		var err error
		if before, err = ReadProc(cfg.BrokerPID); err != nil {
			return err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	fail := func(err error) {
		if err != nil {
			cancel(err)
		}
	}
	for _, c := range r.consumers {
		wg.Go(func() { fail(c.run(ctx, cfg, start, r.pub)) })
	}
	wg.Go(func() { fail(r.pub.awaitConfirms(ctx, cfg, start)) })
	wg.Go(func() { fail(r.pub.send(ctx, cfg, start)) })
	wg.Wait()
	var after ProcSample
	haveAfter := false
	if cfg.BrokerPID > 0 {
		var err error
		after, err = ReadProc(cfg.BrokerPID)
		haveAfter = err == nil
	}

	p := r.pub
	res.Published = p.sent
	res.Confirmed = p.confirmed
	res.Nacked = p.nacked
	if !p.lastConfirm.IsZero() {
		res.PublishElapsed = p.lastConfirm.Sub(start)
	}
	var first, last time.Time
	var latencies []time.Duration
	for _, c := range r.consumers {
		res.Delivered += c.received
		res.Redelivered += c.redelivered
		if !c.first.IsZero() && (first.IsZero() || c.first.Before(first)) {
			first = c.first
		}
		if c.last.After(last) {
			last = c.last
		}
		latencies = append(latencies, c.latencies...)
	}
	if !last.IsZero() {
		res.DeliverElapsed = last.Sub(start)
		res.ConsumeElapsed = last.Sub(first)
	}
	res.LatencyP50, res.LatencyP99, res.LatencyMax = percentiles(latencies)
	res.ConfirmP50, res.ConfirmP99, _ = percentiles(p.latencies)
	if haveAfter {
		res.BrokerStats = true
		res.BrokerCPU = after.CPU - before.CPU
		if before.HaveIO && after.HaveIO {
			res.BrokerIO = true
			res.BrokerWriteBytes = after.WriteBytes - before.WriteBytes
		}
	}
	res.finish()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// teardown closes the run's connections and deletes what setup declared,
// on the setup connection (or a new one if that one is gone).
func (r *run) teardown() error {
	for _, cn := range r.runConns {
		cn.close(teardownTimeout)
	}
	if len(r.queues) == 0 && r.exchange == "" {
		r.setupConn.close(teardownTimeout)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.SetupTimeout+teardownTimeout)
	defer cancel()
	cn, ch := r.setupConn, r.setupCh
	if cn == nil || cn.c.IsClosed() {
		r.setupConn.close(teardownTimeout)
		var err error
		if cn, err = dial(ctx, r.cfg, "amqpbench-teardown"); err != nil {
			return fmt.Errorf("amqpbench: delete %v: %w", r.queues, err)
		}
		ch = nil
	}
	defer cn.close(teardownTimeout)
	if ch == nil || ch.IsClosed() {
		if err := guard(ctx, teardownTimeout, cn, "open teardown channel", func() (err error) {
			ch, err = cn.c.Channel()
			return err
		}); err != nil {
			return fmt.Errorf("amqpbench: delete %v: %w", r.queues, err)
		}
	}
	var errs []error
	for _, q := range r.queues {
		errs = append(errs, guard(ctx, teardownTimeout, cn, "delete queue "+q, func() error {
			_, err := ch.QueueDelete(q, false, false, false)
			return err
		}))
	}
	if r.exchange != "" {
		errs = append(errs, guard(ctx, teardownTimeout, cn, "delete exchange "+r.exchange, func() error {
			return ch.ExchangeDelete(r.exchange, false, false)
		}))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("amqpbench: teardown: %w", err)
	}
	return nil
}

// checkEvery is how often the confirm and delivery loops look for a stall.
func checkEvery(stall time.Duration) time.Duration {
	return min(max(stall/10, 10*time.Millisecond), time.Second)
}

// publisher is the publishing channel and its counters.
type publisher struct {
	// Static after construction.
	ch        *amqp.Channel
	exchange  string
	key       string
	confirms  chan amqp.Confirmation
	closed    chan *amqp.Error
	window    chan struct{} // one element per unconfirmed message
	sendTimes []int64       // unix nanos of delivery tag t at t % len

	// Written by send before done is closed; read after.
	done chan struct{}
	sent int

	// Owned by awaitConfirms; read after it returns.
	confirmed, nacked int
	lastConfirm       time.Time
	latencies         []time.Duration
}

func newPublisher(ctx context.Context, cfg Config, cn *conn, exchange, key string) (*publisher, error) {
	p := &publisher{
		exchange:  exchange,
		key:       key,
		window:    make(chan struct{}, cfg.MaxInFlight),
		sendTimes: make([]int64, cfg.MaxInFlight),
		done:      make(chan struct{}),
	}
	if cfg.limited() {
		p.latencies = make([]time.Duration, 0, cfg.Count)
	}
	if err := guard(ctx, cfg.SetupTimeout, cn, "publisher: open channel and select confirm mode", func() (err error) {
		if p.ch, err = cn.c.Channel(); err != nil {
			return err
		}
		p.closed = p.ch.NotifyClose(make(chan *amqp.Error, 1))
		// The client hands every confirmation to the listener and blocks
		// until it is taken; room for the whole window keeps the reader
		// goroutine of the connection from waiting on awaitConfirms.
		p.confirms = p.ch.NotifyPublish(make(chan amqp.Confirmation, cfg.MaxInFlight+1))
		return p.ch.Confirm(false)
	}); err != nil {
		return nil, fmt.Errorf("amqpbench: %w", err)
	}
	return p, nil
}

// send publishes until cfg.Count messages are sent or cfg.Duration has
// passed, keeping at most cfg.MaxInFlight unconfirmed, then records the
// count and closes p.done.
func (p *publisher) send(ctx context.Context, cfg Config, start time.Time) error {
	defer close(p.done)
	body := make([]byte, cfg.MessageSize)
	for i := range body {
		body[i] = 0x5A
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body}
	if cfg.Transient {
		msg.DeliveryMode = amqp.Transient
	}
	deadline := start.Add(cfg.Duration)
	w := len(p.sendTimes)
	for ; !cfg.limited() || p.sent < cfg.Count; p.sent++ {
		if cfg.Duration > 0 && !time.Now().Before(deadline) {
			break
		}
		select {
		case p.window <- struct{}{}:
		case <-ctx.Done():
			return nil // the cause is reported by whoever cancelled
		}
		now := time.Now()
		if len(body) >= timestampSize {
			binary.BigEndian.PutUint64(body, uint64(now.UnixNano()))
		}
		p.sendTimes[(p.sent+1)%w] = now.UnixNano()
		// The client writes the frames before Publish returns, so the body
		// can be reused.
		if err := p.ch.Publish(p.exchange, p.key, false, false, msg); err != nil {
			return fmt.Errorf("amqpbench: publish after %d sent: %w%s", p.sent, err, closeReason(p.closed))
		}
	}
	return nil
}

// awaitConfirms counts confirms until every sent message is settled.
func (p *publisher) awaitConfirms(ctx context.Context, cfg Config, start time.Time) error {
	ticker := time.NewTicker(checkEvery(cfg.StallTimeout))
	defer ticker.Stop()
	progress := start
	done := p.done
	target := -1 // known once done is closed
	w := uint64(len(p.sendTimes))
	for settled := 0; target < 0 || settled < target; {
		select {
		case c, ok := <-p.confirms:
			if !ok {
				return fmt.Errorf("amqpbench: publisher channel %w after %d confirms%s", ErrClosed, settled, closeReason(p.closed))
			}
			now := time.Now()
			if c.Ack {
				p.confirmed++
				p.latencies = append(p.latencies, now.Sub(time.Unix(0, p.sendTimes[c.DeliveryTag%w])))
			} else {
				p.nacked++
			}
			settled++
			p.lastConfirm, progress = now, now
			<-p.window
			if p.nacked > 0 {
				return fmt.Errorf("%w: delivery tag %d (after %d confirms)", ErrNacked, c.DeliveryTag, p.confirmed)
			}
		case <-done:
			target, done = p.sent, nil
		case now := <-ticker.C:
			if len(p.window) > 0 && now.Sub(progress) > cfg.StallTimeout {
				return fmt.Errorf("%w: no confirm for %v, %d unconfirmed, %d confirmed",
					ErrStall, cfg.StallTimeout, len(p.window), p.confirmed)
			}
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// consumer is one subscription and its counters.
type consumer struct {
	// Static after construction.
	id         int
	queue      string
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	closed     chan *amqp.Error

	// Owned by run; read after it returns.
	received, redelivered int
	first, last           time.Time
	latencies             []time.Duration
}

func newConsumer(ctx context.Context, cfg Config, cn *conn, id int, queue string) (*consumer, error) {
	c := &consumer{id: id, queue: queue}
	if cfg.limited() && cfg.MessageSize >= timestampSize {
		c.latencies = make([]time.Duration, 0, cfg.Count)
	}
	if err := guard(ctx, cfg.SetupTimeout, cn, fmt.Sprintf("consumer %d on %s: subscribe", id, queue), func() (err error) {
		if c.ch, err = cn.c.Channel(); err != nil {
			return err
		}
		c.closed = c.ch.NotifyClose(make(chan *amqp.Error, 1))
		if err := c.ch.Qos(cfg.Prefetch, 0, false); err != nil {
			return err
		}
		c.deliveries, err = c.ch.Consume(queue, fmt.Sprintf("amqpbench-%d", id), false, false, false, false, nil)
		return err
	}); err != nil {
		return nil, fmt.Errorf("amqpbench: %w", err)
	}
	return c, nil
}

// run receives messages until it has as many as the publisher sent, acking
// every cfg.AckEvery with multiple=true and the rest at the end.
func (c *consumer) run(ctx context.Context, cfg Config, start time.Time, p *publisher) error {
	ticker := time.NewTicker(checkEvery(cfg.StallTimeout))
	defer ticker.Stop()
	progress := start
	done := p.done
	target := -1 // known once the publisher is done
	unacked := 0
	var lastTag uint64
	for target < 0 || c.received < target {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				return fmt.Errorf("amqpbench: consumer %d on %s: %w after %d messages%s",
					c.id, c.queue, ErrClosed, c.received, closeReason(c.closed))
			}
			now := time.Now()
			if c.received == 0 {
				c.first = now
			}
			c.received++
			c.last, progress = now, now
			if cfg.MessageSize >= timestampSize && len(d.Body) >= timestampSize {
				sent := int64(binary.BigEndian.Uint64(d.Body))
				c.latencies = append(c.latencies, now.Sub(time.Unix(0, sent)))
			}
			if d.Redelivered {
				c.redelivered++
			}
			unacked++
			lastTag = d.DeliveryTag
			if unacked >= cfg.AckEvery {
				if err := c.ch.Ack(lastTag, true); err != nil {
					return fmt.Errorf("amqpbench: consumer %d: ack: %w", c.id, err)
				}
				unacked = 0
			}
		case <-done:
			target, done = p.sent, nil
		case now := <-ticker.C:
			if now.Sub(progress) > cfg.StallTimeout {
				want := "?"
				if target >= 0 {
					want = fmt.Sprint(target)
				}
				return fmt.Errorf("%w: consumer %d on %s: no delivery for %v after %d of %s",
					ErrStall, c.id, c.queue, cfg.StallTimeout, c.received, want)
			}
		case <-ctx.Done():
			return nil
		}
	}
	if unacked > 0 {
		if err := c.ch.Ack(lastTag, true); err != nil {
			return fmt.Errorf("amqpbench: consumer %d: final ack: %w", c.id, err)
		}
	}
	return nil
}
