package perf

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// The AMQP 1.0 client of AMQPConfig.Client ClientAMQP10: go-amqp
// (github.com/Azure/go-amqp). Producers send unsettled messages with up
// to ConfirmWindow outcomes outstanding (pre-settled with no window);
// consumers grant Prefetch credit and accept each message. The topology
// is declared over AMQP 0-9-1 as for the other clients, so the same run
// works against Warren and RabbitMQ's AMQP 1.0 plugin (3.x: address v1,
// AMQP10Address "v1").

// amqp10Conns are the AMQP 1.0 connections of a run, closed at its end.
type amqp10Conns struct {
	mu    sync.Mutex
	conns []*goamqp.Conn
}

// dial connects with SASL PLAIN from the URL's user info, retrying for
// cfg.WaitReady.
func (l *amqp10Conns) dial(ctx context.Context, cfg AMQPConfig) (*goamqp.Conn, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("perf: amqp10: %w", err)
	}
	user, pass := "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	opts := &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(user, pass)}
	if vh := u.Path; len(vh) > 1 {
		opts.HostName = "vhost:" + vh[1:]
	}
	addr := "amqp://" + u.Host
	if u.Scheme == "amqps" {
		addr = "amqps://" + u.Host
	}
	c, err := retry(ctx, cfg.WaitReady, func() (*goamqp.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, cfg.SetupTimeout)
		defer cancel()
		return goamqp.Dial(dctx, addr, opts)
	})
	if err != nil {
		return nil, fmt.Errorf("perf: dial %s (AMQP 1.0): %w", redact(cfg.URL), err)
	}
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	return c, nil
}

func (l *amqp10Conns) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range slices.Backward(l.conns) {
		_ = c.Close()
	}
}

// amqp10QueueAddress is the address of a queue: RabbitMQ 4.x's v2
// "/queues/q", or the 3.x plugin's "/amq/queue/q" for an existing queue.
func amqp10QueueAddress(cfg AMQPConfig, q string) string {
	if cfg.AMQP10Address == "v1" {
		return "/amq/queue/" + q
	}
	return "/queues/" + url.PathEscape(q)
}

// amqp10ExchangeAddress is the address of an exchange with an empty
// routing key.
func amqp10ExchangeAddress(cfg AMQPConfig, x string) string {
	if cfg.AMQP10Address == "v1" {
		return "/exchange/" + x
	}
	return "/exchanges/" + url.PathEscape(x)
}

// amqp10Consumer receives from one queue.
type amqp10Consumer struct {
	cfg AMQPConfig
	st  *Stats
	rcv *goamqp.Receiver
}

func newAMQP10Consumer(ctx context.Context, conns *amqp10Conns, cfg AMQPConfig, st *Stats, queue string, i int) (*amqp10Consumer, error) {
	if cfg.QueueType == QueueStream {
		return nil, fmt.Errorf("%w: the amqp10 client does not read streams", ErrConfig)
	}
	cn, err := conns.dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := cn.NewSession(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("perf: consumer %d session: %w", i, err)
	}
	opts := &goamqp.ReceiverOptions{Credit: int32(max(cfg.Prefetch, 1))}
	if cfg.AutoAck {
		opts.SettlementMode = goamqp.ReceiverSettleModeFirst.Ptr()
		opts.RequestedSenderSettleMode = goamqp.SenderSettleModeSettled.Ptr()
	}
	rcv, err := s.NewReceiver(ctx, amqp10QueueAddress(cfg, queue), opts)
	if err != nil {
		return nil, fmt.Errorf("perf: consumer %d on %s: %w", i, queue, err)
	}
	return &amqp10Consumer{cfg: cfg, st: st, rcv: rcv}, nil
}

// run counts messages until ctx ends, accepting each (go-amqp grants
// credit back as messages are settled).
func (c *amqp10Consumer) run(ctx context.Context) error {
	limit := int64(0)
	if c.cfg.Producers == 0 {
		limit = int64(c.cfg.Count)
	}
	var n int64
	for {
		m, err := c.rcv.Receive(ctx, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("perf: amqp10 consumer: after %d: %w", n, err)
		}
		n++
		body := m.GetData()
		if limit == 0 || n <= limit {
			c.st.consumed(body, len(body), time.Now())
		}
		if !c.cfg.AutoAck {
			if err := c.rcv.AcceptMessage(ctx, m); err != nil && ctx.Err() == nil {
				return fmt.Errorf("perf: amqp10 consumer: accept: %w", err)
			}
		}
	}
}

// amqp10Producer sends to the queue or the fan-out exchange.
type amqp10Producer struct {
	id  int
	cfg AMQPConfig
	st  *Stats
	snd *goamqp.Sender
}

func newAMQP10Producer(ctx context.Context, conns *amqp10Conns, cfg AMQPConfig, st *Stats, t topology, id int) (*amqp10Producer, error) {
	cn, err := conns.dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s, err := cn.NewSession(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("perf: producer %d session: %w", id, err)
	}
	addr := amqp10QueueAddress(cfg, t.queues[0])
	if t.exchange != "" {
		addr = amqp10ExchangeAddress(cfg, t.exchange)
	}
	var opts *goamqp.SenderOptions
	if cfg.ConfirmWindow == 0 {
		opts = &goamqp.SenderOptions{SettlementMode: goamqp.SenderSettleModeSettled.Ptr()}
	}
	snd, err := s.NewSender(ctx, addr, opts)
	if err != nil {
		return nil, fmt.Errorf("perf: producer %d to %s: %w", id, addr, err)
	}
	return &amqp10Producer{id: id, cfg: cfg, st: st, snd: snd}, nil
}

// amqp10Sent is a send awaiting its outcome.
type amqp10Sent struct {
	r  goamqp.SendReceipt
	at time.Time
}

// run sends until deadline or Count; with a window, a second goroutine
// waits for the outcomes in order.
func (p *amqp10Producer) run(ctx context.Context, deadline time.Time) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cfg := p.cfg
	var pending chan amqp10Sent
	waitErr := make(chan error, 1)
	if cfg.ConfirmWindow > 0 {
		pending = make(chan amqp10Sent, cfg.ConfirmWindow)
		go func() {
			waitErr <- p.await(ctx, pending)
		}()
	} else {
		waitErr <- nil
	}
	lim := NewLimiter(cfg.Rate)
	body := make([]byte, cfg.Size)
	seq := uint64(p.id) << 48
	var sent int64
	var sendErr error
	for cfg.Count == 0 || sent < int64(cfg.Count) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
		if _, err := lim.Acquire(ctx, 1); err != nil {
			break
		}
		now := time.Now()
		// go-amqp encodes the message before Send returns, so the body
		// can be reused.
		stamp(body, now, seq)
		seq++
		m := goamqp.NewMessage(body)
		if cfg.Persistent {
			m.Header = &goamqp.MessageHeader{Durable: true}
		}
		if pending != nil {
			r, err := p.snd.SendWithReceipt(ctx, m, nil)
			if err != nil {
				if ctx.Err() == nil {
					sendErr = fmt.Errorf("perf: producer %d: send after %d: %w", p.id, sent, err)
				}
				break
			}
			select {
			case pending <- amqp10Sent{r, now}:
			case <-ctx.Done():
			}
		} else if err := p.snd.Send(ctx, m, nil); err != nil {
			if ctx.Err() == nil {
				sendErr = fmt.Errorf("perf: producer %d: send after %d: %w", p.id, sent, err)
			}
			break
		}
		sent++
		p.st.Published.Add(1)
	}
	if pending != nil {
		close(pending)
	}
	if sendErr != nil {
		cancel(sendErr)
	}
	return errors.Join(sendErr, <-waitErr)
}

// await waits for each outcome in send order: accepted counts as
// confirmed, anything else fails the run.
func (p *amqp10Producer) await(ctx context.Context, pending <-chan amqp10Sent) error {
	for s := range pending {
		wctx, cancel := context.WithTimeout(ctx, p.cfg.StallTimeout)
		st, err := s.r.Wait(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: producer %d: no outcome: %v", ErrStall, p.id, err)
		}
		if _, ok := st.(*goamqp.StateAccepted); !ok {
			p.st.Nacked.Add(1)
			return fmt.Errorf("perf: producer %d: outcome %T: %w", p.id, st, ErrNacked)
		}
		p.st.confirmed(1, s.at, time.Now())
	}
	return nil
}
