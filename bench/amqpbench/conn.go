package amqpbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrTimeout marks a set-up step that got no answer in time.
var ErrTimeout = errors.New("amqpbench: timeout")

// conn is a client connection plus its socket. The client's RPCs (declare,
// qos, consume, ...) have no timeout of their own; closing the socket makes
// every pending call on the connection return, which is how guard bounds
// them.
type conn struct {
	name string
	c    *amqp.Connection

	mu  sync.Mutex
	raw net.Conn
}

// dial opens a connection named name (the connection_name client property)
// to cfg.URL.
func dial(ctx context.Context, cfg Config, name string) (*conn, error) {
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	cn := &conn{name: name}
	base := amqp.DefaultDial(cfg.SetupTimeout)
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	acfg := amqp.Config{
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			nc, err := base(network, addr)
			if err == nil {
				cn.mu.Lock()
				cn.raw = nc
				cn.mu.Unlock()
			}
			return nc, err
		},
	}
	// DefaultDial bounds the TCP connect and the handshake by
	// cfg.SetupTimeout; ctx is honoured by aborting the socket.
	stop := context.AfterFunc(ctx, cn.abort)
	c, err := amqp.DialConfig(cfg.URL, acfg)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", context.Cause(ctx), err)
		}
		return nil, fmt.Errorf("amqpbench: dial %s as %s: %w", RedactURL(cfg.URL), name, err)
	}
	cn.c = c
	return cn, nil
}

// abort closes the socket: every pending and later call on the connection
// fails.
func (cn *conn) abort() {
	cn.mu.Lock()
	raw := cn.raw
	cn.mu.Unlock()
	if raw != nil {
		_ = raw.Close()
	}
}

// close closes the connection politely, waiting at most d for the broker's
// close-ok, then closes the socket whatever happened.
func (cn *conn) close(d time.Duration) {
	if cn == nil {
		return
	}
	if cn.c != nil && !cn.c.IsClosed() {
		_ = cn.c.CloseDeadline(time.Now().Add(d))
	}
	cn.abort()
}

// guard runs f, a call on cn, and aborts cn if f has not returned after d or
// when ctx ends; the error then says so.
func guard(ctx context.Context, d time.Duration, cn *conn, what string, f func() error) error {
	var fired atomic.Bool
	var cause atomic.Value
	t := time.AfterFunc(d, func() {
		cause.Store(fmt.Errorf("%s: no answer in %v: %w", what, d, ErrTimeout))
		fired.Store(true)
		cn.abort()
	})
	stop := context.AfterFunc(ctx, func() {
		cause.Store(fmt.Errorf("%s: %w", what, context.Cause(ctx)))
		fired.Store(true)
		cn.abort()
	})
	err := f()
	t.Stop()
	stop()
	if fired.Load() {
		if c, ok := cause.Load().(error); ok {
			return c
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// closeReason returns the error a channel or connection was closed with, if
// one is waiting in ch, for messages.
func closeReason(ch <-chan *amqp.Error) string {
	select {
	case e, ok := <-ch:
		if ok && e != nil {
			return ": " + e.Error()
		}
	default:
	}
	return ""
}
