package perf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RunAMQP runs an AMQP 0-9-1 workload: it declares the queues (and a
// fanout exchange for Queues > 1), runs, and deletes them unless Keep.
// Producers and consumers use amqp091-go, or bench/leanamqp with
// cfg.Client ClientLean; the topology always uses amqp091-go.
func RunAMQP(ctx context.Context, cfg AMQPConfig, progress func(Progress), interval time.Duration) (Summary, error) {
	cfg = cfg.ensureDefaults()
	sum := Summary{Mode: "amqp", Target: redact(cfg.URL), Labels: cfg.Labels, Config: cfg, ExpectedConsumed: -1}
	if err := cfg.validate(); err != nil {
		return sum, err
	}
	probe, err := startProbe(cfg.BrokerPID)
	if err != nil {
		return sum, err
	}
	st := &Stats{}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var conns []*amqp.Connection
	defer func() {
		for _, c := range slices.Backward(conns) {
			_ = c.CloseDeadline(time.Now().Add(5 * time.Second))
		}
	}()
	dial := func(name string) (*amqp.Connection, error) {
		c, err := retry(ctx, cfg.WaitReady, func() (*amqp.Connection, error) { return dialAMQP(cfg.URL, name, cfg.SetupTimeout) })
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	lean := &amqpLeanConns{}
	defer lean.closeAll()
	conns10 := &amqp10Conns{}
	defer conns10.closeAll()
	setup, err := dial("perf-setup")
	if err != nil {
		return sum, err
	}
	topo, err := declareTopology(setup, cfg)
	if err != nil {
		return sum, err
	}
	if !cfg.Keep {
		defer topo.delete(cfg.URL)
	}

	var consumers sync.WaitGroup
	defer consumers.Wait()
	defer cancel(nil) // stops the consumers before they are waited for
	for i := range cfg.Consumers {
		queue := topo.queues[i%len(topo.queues)]
		if cfg.Client == ClientAMQP10 {
			c, err := newAMQP10Consumer(ctx, conns10, cfg, st, queue, i)
			if err != nil {
				return sum, err
			}
			consumers.Go(func() {
				if err := c.run(ctx); err != nil {
					cancel(err)
				}
			})
			continue
		}
		if cfg.Client == ClientLean {
			lc, err := newAMQPLeanConsumer(ctx, lean, cfg, st, queue, i)
			if err != nil {
				return sum, err
			}
			consumers.Go(func() {
				if err := lc.run(ctx); err != nil {
					cancel(err)
				}
			})
			continue
		}
		cn, err := dial(fmt.Sprintf("perf-consumer-%d", i))
		if err != nil {
			return sum, err
		}
		deliveries, ch, err := subscribe(cn, cfg, queue, i)
		if err != nil {
			return sum, err
		}
		consumers.Go(func() {
			if err := consumeAMQP(ctx, cfg, st, ch, deliveries); err != nil {
				cancel(err)
			}
		})
	}

	w := workload{common: cfg.Common, stats: st, progress: progress, interval: interval}
	for i := range cfg.Producers {
		if cfg.Client == ClientAMQP10 {
			p, err := newAMQP10Producer(ctx, conns10, cfg, st, topo, i)
			if err != nil {
				return sum, err
			}
			w.producers = append(w.producers, p.run)
			continue
		}
		if cfg.Client == ClientLean {
			p, err := newAMQPLeanProducer(ctx, lean, cfg, st, topo, i)
			if err != nil {
				return sum, err
			}
			w.producers = append(w.producers, p.run)
			continue
		}
		cn, err := dial(fmt.Sprintf("perf-producer-%d", i))
		if err != nil {
			return sum, err
		}
		p, err := newAMQPProducer(cn, cfg, st, topo, i)
		if err != nil {
			return sum, err
		}
		w.producers = append(w.producers, p.run)
	}
	w.expected = func() int64 {
		switch {
		case cfg.Producers == 0 && cfg.Count > 0:
			return int64(cfg.Count) * int64(cfg.Consumers)
		case cfg.Producers == 0:
			return -1
		case cfg.QueueType == QueueStream:
			// Every consumer reads its whole queue.
			return st.Published.Load() * int64(cfg.Consumers)
		}
		return st.Published.Load() * int64(cfg.Queues)
	}
	err = drive(ctx, w, &sum)
	if cfg.Consumers > 0 {
		sum.ExpectedConsumed = w.expected()
	}
	finishSummary(st, &sum, cfg.Common, cfg.Size, probe, cfg.ConfirmWindow > 0)
	return sum, err
}

// redact hides the password of an amqp URL.
func redact(u string) string {
	uri, err := amqp.ParseURI(u)
	if err != nil {
		return "<bad URL>"
	}
	uri.Password = "xxxxx"
	return uri.String()
}

func dialAMQP(url, name string, timeout time.Duration) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	c, err := amqp.DialConfig(url, amqp.Config{Properties: props, Dial: amqp.DefaultDial(timeout)})
	if err != nil {
		return nil, fmt.Errorf("perf: dial %s as %s: %w", redact(url), name, err)
	}
	return c, nil
}

// topology is what a run declared.
type topology struct {
	exchange string   // fanout exchange, or "" for the default exchange
	queues   []string // in order
}

// queueArgs returns the declare arguments of a queue type.
func queueArgs(queueType string) amqp.Table {
	if queueType == QueueClassic {
		return nil
	}
	return amqp.Table{amqp.QueueTypeArg: queueType}
}

func declareTopology(cn *amqp.Connection, cfg AMQPConfig) (topology, error) {
	var t topology
	ch, err := cn.Channel()
	if err != nil {
		return t, fmt.Errorf("perf: setup channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	base := cfg.Queue
	if base == "" {
		base = fmt.Sprintf("perf-%08x", rand.Uint32())
	}
	if cfg.Queues > 1 {
		t.exchange = base + "-x"
		if err := ch.ExchangeDeclare(t.exchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return t, fmt.Errorf("perf: declare exchange %s: %w", t.exchange, err)
		}
	}
	for i := range cfg.Queues {
		name := base
		if cfg.Queues > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		if _, err := ch.QueueDeclare(name, true, false, false, false, queueArgs(cfg.QueueType)); err != nil {
			return t, fmt.Errorf("perf: declare %s queue %s: %w", cfg.QueueType, name, err)
		}
		t.queues = append(t.queues, name)
		if t.exchange != "" {
			if err := ch.QueueBind(name, "", t.exchange, false, nil); err != nil {
				return t, fmt.Errorf("perf: bind %s: %w", name, err)
			}
		}
	}
	return t, nil
}

// delete removes the topology on a connection of its own.
func (t topology) delete(url string) {
	cn, err := dialAMQP(url, "perf-teardown", 10*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = cn.CloseDeadline(time.Now().Add(5 * time.Second)) }()
	ch, err := cn.Channel()
	if err != nil {
		return
	}
	for _, q := range t.queues {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
	if t.exchange != "" {
		_ = ch.ExchangeDelete(t.exchange, false, false)
	}
}

func subscribe(cn *amqp.Connection, cfg AMQPConfig, queue string, i int) (<-chan amqp.Delivery, *amqp.Channel, error) {
	ch, err := cn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("perf: consumer %d channel: %w", i, err)
	}
	if cfg.Prefetch > 0 {
		if err := ch.Qos(cfg.Prefetch, 0, false); err != nil {
			return nil, nil, fmt.Errorf("perf: consumer %d qos: %w", i, err)
		}
	}
	var args amqp.Table
	if cfg.QueueType == QueueStream {
		args = amqp.Table{"x-stream-offset": "first"}
	}
	d, err := ch.Consume(queue, fmt.Sprintf("perf-%d", i), cfg.AutoAck, false, false, false, args)
	if err != nil {
		return nil, nil, fmt.Errorf("perf: consumer %d on %s: %w", i, queue, err)
	}
	return d, ch, nil
}

// consumeAMQP counts deliveries until ctx ends, acking every
// cfg.MultiAckEvery with multiple=true; pending acks are sent when the
// queue goes quiet for a moment, so a short tail is never held back.
func consumeAMQP(ctx context.Context, cfg AMQPConfig, st *Stats, ch *amqp.Channel, deliveries <-chan amqp.Delivery) error {
	limit := int64(0)
	if cfg.Producers == 0 {
		limit = int64(cfg.Count)
	}
	var n, unacked int64
	var lastTag uint64
	idle := time.NewTicker(50 * time.Millisecond)
	defer idle.Stop()
	got := false
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("perf: consumer: deliveries closed after %d", n)
			}
			n++
			if limit == 0 || n <= limit {
				st.consumed(d.Body, len(d.Body), time.Now())
			}
			got = true
			if cfg.AutoAck {
				continue
			}
			unacked++
			lastTag = d.DeliveryTag
			if unacked >= int64(cfg.MultiAckEvery) {
				if err := ch.Ack(lastTag, cfg.MultiAckEvery > 1); err != nil {
					return fmt.Errorf("perf: consumer: ack: %w", err)
				}
				unacked = 0
			}
		case <-idle.C:
			if !got && unacked > 0 {
				if err := ch.Ack(lastTag, true); err != nil && ctx.Err() == nil {
					return fmt.Errorf("perf: consumer: ack: %w", err)
				}
				unacked = 0
			}
			got = false
		case <-ctx.Done():
			return nil
		}
	}
}

// amqpProducer is one publishing channel.
type amqpProducer struct {
	// Static after construction.
	id       int
	cfg      AMQPConfig
	st       *Stats
	ch       *amqp.Channel
	exchange string
	key      string
	confirms chan amqp.Confirmation
	window   chan struct{} // one element per unconfirmed message
	times    []int64       // send time of delivery tag t at t % len
	sendDone chan struct{}
	sent     int64 // written by send before sendDone closes
}

func newAMQPProducer(cn *amqp.Connection, cfg AMQPConfig, st *Stats, t topology, id int) (*amqpProducer, error) {
	p := &amqpProducer{id: id, cfg: cfg, st: st, exchange: t.exchange, sendDone: make(chan struct{})}
	if p.exchange == "" {
		p.key = t.queues[0]
	}
	var err error
	if p.ch, err = cn.Channel(); err != nil {
		return nil, fmt.Errorf("perf: producer %d channel: %w", id, err)
	}
	if cfg.ConfirmWindow > 0 {
		p.window = make(chan struct{}, cfg.ConfirmWindow)
		p.times = make([]int64, cfg.ConfirmWindow)
		// Room for the whole window, so the client's reader never waits.
		p.confirms = p.ch.NotifyPublish(make(chan amqp.Confirmation, cfg.ConfirmWindow+1))
		if err := p.ch.Confirm(false); err != nil {
			return nil, fmt.Errorf("perf: producer %d confirm.select: %w", id, err)
		}
	}
	return p, nil
}

func (p *amqpProducer) run(ctx context.Context, deadline time.Time) error {
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
	var confErr error
	if p.window != nil {
		if confErr = p.awaitConfirms(ctx); confErr != nil {
			cancel(confErr) // stops a send waiting for window room
		}
	}
	if err := <-sendErr; err != nil {
		return err
	}
	return confErr
}

func (p *amqpProducer) send(ctx context.Context, deadline time.Time) error {
	cfg := p.cfg
	lim := NewLimiter(cfg.Rate)
	body := make([]byte, cfg.Size)
	msg := amqp.Publishing{DeliveryMode: amqp.Transient, Body: body}
	if cfg.Persistent {
		msg.DeliveryMode = amqp.Persistent
	}
	seq := uint64(p.id) << 48
	for cfg.Count == 0 || p.sent < int64(cfg.Count) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil
		}
		if _, err := lim.Acquire(ctx, 1); err != nil {
			return nil
		}
		if p.window != nil {
			select {
			case p.window <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
		}
		now := time.Now()
		stamp(body, now, seq)
		seq++
		if p.times != nil {
			p.times[uint64(p.sent+1)%uint64(len(p.times))] = now.UnixNano()
		}
		// The client writes the frames before Publish returns, so the
		// body can be reused.
		if err := p.ch.PublishWithContext(ctx, p.exchange, p.key, false, false, msg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("perf: producer %d: publish after %d: %w", p.id, p.sent, err)
		}
		p.sent++
		p.st.Published.Add(1)
	}
	return nil
}

func (p *amqpProducer) awaitConfirms(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	progress := time.Now()
	done := p.sendDone
	target := int64(-1)
	var settled int64
	w := uint64(len(p.times))
	for target < 0 || settled < target {
		select {
		case c, ok := <-p.confirms:
			if !ok {
				return fmt.Errorf("perf: producer %d: channel closed after %d confirms", p.id, settled)
			}
			now := time.Now()
			settled++
			progress = now
			// Read the send time before freeing the slot that send
			// overwrites next.
			sent := time.Unix(0, p.times[c.DeliveryTag%w])
			<-p.window
			if !c.Ack {
				p.st.Nacked.Add(1)
				return fmt.Errorf("perf: producer %d: delivery tag %d: %w", p.id, c.DeliveryTag, ErrNacked)
			}
			p.st.confirmed(1, sent, now)
		case <-done:
			target, done = p.sent, nil
		case now := <-tick.C:
			if len(p.window) > 0 && now.Sub(progress) > p.cfg.StallTimeout {
				return fmt.Errorf("%w: producer %d: no confirm for %v, %d unconfirmed", ErrStall, p.id, p.cfg.StallTimeout, len(p.window))
			}
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// DeclareQueues declares n durable queues of queueType named
// prefix-0 … prefix-(n-1) on one connection to url (idle-memory
// measurements), or with remove deletes them.
func DeclareQueues(ctx context.Context, url, prefix string, n int, queueType string, remove bool) error {
	cn, err := dialAMQP(url, "perf-declare", 30*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = cn.CloseDeadline(time.Now().Add(5 * time.Second)) }()
	ch, err := cn.Channel()
	if err != nil {
		return fmt.Errorf("perf: declare channel: %w", err)
	}
	for i := range n {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		if remove {
			_, err = ch.QueueDelete(name, false, false, false)
		} else {
			_, err = ch.QueueDeclare(name, true, false, false, false, queueArgs(queueType))
		}
		if err != nil {
			return fmt.Errorf("perf: queue %s: %w", name, err)
		}
	}
	return nil
}
