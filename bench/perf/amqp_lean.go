package perf

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/bench/leanamqp"
)

// amqpLeanBatch is the most publishes a lean producer writes at once.
const amqpLeanBatch = 100

// amqpLeanConns are the lean connections of a run, closed at its end.
type amqpLeanConns struct {
	conns []*leanamqp.Conn
}

// dial connects with the lean client, retrying for cfg.WaitReady.
func (l *amqpLeanConns) dial(ctx context.Context, cfg AMQPConfig, name string, lc leanamqp.Config) (*leanamqp.Conn, error) {
	lc.Name, lc.Timeout = name, cfg.SetupTimeout
	c, err := retry(ctx, cfg.WaitReady, func() (*leanamqp.Conn, error) { return leanamqp.DialConfig(cfg.URL, lc) })
	if err != nil {
		return nil, fmt.Errorf("perf: dial %s as %s (lean client): %w", redact(cfg.URL), name, err)
	}
	l.conns = append(l.conns, c)
	return c, nil
}

// closeAll closes the connections, the latest first.
func (l *amqpLeanConns) closeAll() {
	for _, c := range slices.Backward(l.conns) {
		_ = c.Close()
	}
}

// amqpLeanConsumer is one consumer on a lean connection. Deliveries arrive
// on the connection's reader goroutine.
type amqpLeanConsumer struct {
	id    int
	cfg   AMQPConfig
	st    *Stats
	limit int64 // deliveries to count in a consumer-only run, or 0

	mu      sync.Mutex // guards the fields below; held across acks so they go out in order
	conn    *leanamqp.Conn
	n       int64
	unacked int64
	lastTag uint64
	got     bool // a delivery since the last idle tick
}

// newAMQPLeanConsumer connects consumer i and subscribes it to queue.
func newAMQPLeanConsumer(ctx context.Context, lean *amqpLeanConns, cfg AMQPConfig, st *Stats, queue string, i int) (*amqpLeanConsumer, error) {
	lc := &amqpLeanConsumer{id: i, cfg: cfg, st: st}
	if cfg.Producers == 0 {
		lc.limit = int64(cfg.Count)
	}
	cn, err := lean.dial(ctx, cfg, fmt.Sprintf("perf-consumer-%d", i), leanamqp.Config{OnDelivery: lc.onDelivery})
	if err != nil {
		return nil, err
	}
	lc.mu.Lock()
	lc.conn = cn
	lc.mu.Unlock()
	if cfg.Prefetch > 0 {
		if err := cn.Qos(cfg.Prefetch); err != nil {
			return nil, fmt.Errorf("perf: consumer %d qos: %w", i, err)
		}
	}
	var args wire.Table
	if cfg.QueueType == QueueStream {
		args = wire.Table{"x-stream-offset": "first"}
	}
	if _, err := cn.Consume(queue, fmt.Sprintf("perf-%d", i), cfg.AutoAck, args); err != nil {
		return nil, fmt.Errorf("perf: consumer %d on %s: %w", i, queue, err)
	}
	return lc, nil
}

// onDelivery counts a delivery and acks every cfg.MultiAckEvery, as
// consumeAMQP does.
func (lc *amqpLeanConsumer) onDelivery(tag uint64, _ bool, body []byte) {
	now := time.Now()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.n++
	if lc.limit == 0 || lc.n <= lc.limit {
		lc.st.consumed(body, len(body), now)
	}
	lc.got = true
	if lc.cfg.AutoAck {
		return
	}
	lc.unacked++
	lc.lastTag = tag
	if lc.unacked >= int64(lc.cfg.MultiAckEvery) {
		// An error fails the connection, which run reports.
		_ = lc.conn.Ack(tag, lc.cfg.MultiAckEvery > 1)
		lc.unacked = 0
	}
}

// run sends pending acks when the queue goes quiet for a moment and
// waits until ctx ends or the connection fails.
func (lc *amqpLeanConsumer) run(ctx context.Context) error {
	idle := time.NewTicker(50 * time.Millisecond)
	defer idle.Stop()
	lc.mu.Lock()
	cn := lc.conn
	lc.mu.Unlock()
	for {
		select {
		case <-idle.C:
			lc.mu.Lock()
			if !lc.got && lc.unacked > 0 {
				_ = lc.conn.Ack(lc.lastTag, true)
				lc.unacked = 0
			}
			lc.got = false
			lc.mu.Unlock()
		case <-cn.Done():
			if ctx.Err() != nil {
				return nil
			}
			lc.mu.Lock()
			n := lc.n
			lc.mu.Unlock()
			return fmt.Errorf("perf: consumer %d: connection failed after %d deliveries: %w", lc.id, n, cn.Err())
		case <-ctx.Done():
			return nil
		}
	}
}

// amqpLeanProducer is one producer on a lean connection: it publishes in
// batches of up to amqpLeanBatch messages per write, within the confirm
// window.
type amqpLeanProducer struct {
	// Static after construction.
	id       int
	cfg      AMQPConfig
	st       *Stats
	conn     *leanamqp.Conn
	exchange string
	key      string
	window   uint64        // cfg.ConfirmWindow; 0 without confirms
	room     chan struct{} // poked when window slots free up (send waits)
	settle   chan struct{} // poked on every confirm (awaitConfirms waits)
	sendDone chan struct{}
	sent     int64 // written by send before sendDone closes

	mu       sync.Mutex // guards the fields below
	times    []int64    // send time of tag t at t % window
	settled  []bool     // whether tag t (low ≤ t ≤ high) is confirmed, at t % window
	low      uint64     // lowest unconfirmed tag
	high     uint64     // latest published tag
	progress time.Time  // latest confirm
	err      error      // a nack or a bad confirm
}

// newAMQPLeanProducer connects producer id, in confirm mode with a window.
func newAMQPLeanProducer(ctx context.Context, lean *amqpLeanConns, cfg AMQPConfig, st *Stats, t topology, id int) (*amqpLeanProducer, error) {
	p := &amqpLeanProducer{id: id, cfg: cfg, st: st, exchange: t.exchange, window: uint64(cfg.ConfirmWindow),
		room: make(chan struct{}, 1), settle: make(chan struct{}, 1), sendDone: make(chan struct{}), low: 1}
	if p.exchange == "" {
		p.key = t.queues[0]
	}
	lc := leanamqp.Config{}
	if p.window > 0 {
		p.times = make([]int64, p.window)
		p.settled = make([]bool, p.window)
		lc.OnConfirm = p.onConfirm
	}
	var err error
	if p.conn, err = lean.dial(ctx, cfg, fmt.Sprintf("perf-producer-%d", id), lc); err != nil {
		return nil, err
	}
	if p.window > 0 {
		if err := p.conn.ConfirmSelect(); err != nil {
			return nil, fmt.Errorf("perf: producer %d confirm.select: %w", id, err)
		}
	}
	return p, nil
}

// pokeAMQP wakes a waiter on ch without blocking.
func pokeAMQP(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// onConfirm settles the tags of a basic.ack or basic.nack; it runs on
// the connection's reader goroutine.
func (p *amqpLeanProducer) onConfirm(tag uint64, multiple, ack bool) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	defer pokeAMQP(p.settle)
	defer pokeAMQP(p.room)
	if p.err != nil {
		return
	}
	if tag < p.low || tag > p.high {
		p.err = fmt.Errorf("perf: producer %d: confirm of delivery tag %d outside the unconfirmed %d..%d", p.id, tag, p.low, p.high)
		return
	}
	from := tag
	if multiple {
		from = p.low
	}
	nacked := false
	for t := from; t <= tag; t++ {
		i := t % p.window
		if p.settled[i] {
			if !multiple {
				p.err = fmt.Errorf("perf: producer %d: delivery tag %d confirmed twice", p.id, t)
				return
			}
			continue
		}
		p.settled[i] = true
		if ack {
			p.st.confirmed(1, time.Unix(0, p.times[i]), now)
		} else {
			p.st.Nacked.Add(1)
			nacked = true
		}
	}
	if nacked {
		p.err = fmt.Errorf("perf: producer %d: delivery tag %d: %w", p.id, tag, ErrNacked)
	}
	for p.low <= p.high && p.settled[p.low%p.window] {
		p.settled[p.low%p.window] = false
		p.low++
	}
	p.progress = now
}

func (p *amqpLeanProducer) run(ctx context.Context, deadline time.Time) error {
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
	if p.window > 0 {
		if confErr = p.awaitConfirms(ctx); confErr != nil {
			cancel(confErr) // stops a send waiting for room
		}
	}
	if err := <-sendErr; err != nil {
		return err
	}
	return confErr
}

// reserve waits for room in the confirm window and takes up to want
// tags of it, recording now as their send time; it returns 0 when the
// producer must stop.
func (p *amqpLeanProducer) reserve(ctx context.Context, want int, now func() time.Time) (int, time.Time) {
	for {
		p.mu.Lock()
		if p.err != nil {
			p.mu.Unlock()
			return 0, time.Time{}
		}
		if room := p.window - (p.high - p.low + 1); room > 0 {
			n := min(uint64(want), room)
			t := now()
			ns := t.UnixNano()
			for tag := p.high + 1; tag <= p.high+n; tag++ {
				p.times[tag%p.window] = ns
			}
			p.high += n
			p.mu.Unlock()
			return int(n), t
		}
		p.mu.Unlock()
		select {
		case <-p.room:
		case <-ctx.Done():
			return 0, time.Time{}
		case <-p.conn.Done():
			return 0, time.Time{}
		}
	}
}

func (p *amqpLeanProducer) send(ctx context.Context, deadline time.Time) error {
	cfg := p.cfg
	lim := NewLimiter(cfg.Rate)
	body := make([]byte, cfg.Size)
	seq := uint64(p.id) << 48
	var now time.Time
	fill := func(_ int, b []byte) {
		stamp(b, now, seq)
		seq++
	}
	for cfg.Count == 0 || p.sent < int64(cfg.Count) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil
		}
		want := amqpLeanBatch
		if cfg.Count > 0 {
			want = int(min(int64(want), int64(cfg.Count)-p.sent))
		}
		// Pace before reserving, so the send times in the window are
		// the times the messages go out.
		n, err := lim.Acquire(ctx, want)
		if err != nil {
			return nil
		}
		if p.window > 0 {
			if n, now = p.reserve(ctx, n, time.Now); n == 0 {
				if err := p.conn.Err(); err != nil && ctx.Err() == nil {
					return fmt.Errorf("perf: producer %d: after %d: %w", p.id, p.sent, err)
				}
				return nil
			}
		} else {
			now = time.Now()
		}
		if err := p.conn.PublishBatch(p.exchange, p.key, cfg.Persistent, body, n, fill); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("perf: producer %d: publish after %d: %w", p.id, p.sent, err)
		}
		p.sent += int64(n)
		p.st.Published.Add(int64(n))
	}
	return nil
}

func (p *amqpLeanProducer) awaitConfirms(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	done := p.sendDone
	finished := false
	for {
		p.mu.Lock()
		err, unconfirmed, progress := p.err, p.high+1-p.low, p.progress
		p.mu.Unlock()
		if err != nil {
			return err
		}
		if finished && unconfirmed == 0 {
			return nil
		}
		select {
		case <-p.settle:
		case <-done:
			finished, done = true, nil
		case now := <-tick.C:
			if progress.IsZero() {
				progress = start
			}
			if unconfirmed > 0 && now.Sub(progress) > p.cfg.StallTimeout {
				return fmt.Errorf("%w: producer %d: no confirm for %v, %d unconfirmed", ErrStall, p.id, p.cfg.StallTimeout, unconfirmed)
			}
		case <-p.conn.Done():
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("perf: producer %d: connection failed: %w", p.id, p.conn.Err())
		case <-ctx.Done():
			return nil
		}
	}
}
