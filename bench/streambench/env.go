package streambench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// ErrTimeout marks a set-up step or a run that made no progress in time.
var ErrTimeout = errors.New("streambench: timeout")

// prepare defaults and validates cfg.
func prepare(cfg Config) (Config, error) {
	cfg = cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// connect opens a client environment on cfg.Addr.
func connect(ctx context.Context, cfg Config) (*stream.Environment, error) {
	env, err := withTimeout(ctx, cfg.SetupTimeout, "connect "+cfg.Addr,
		func() (*stream.Environment, error) { return stream.NewEnvironment(cfg.environmentOptions()) },
		func(env *stream.Environment) { _ = env.Close() })
	if err != nil {
		return nil, fmt.Errorf("streambench: connect %s: %w", cfg.Addr, err)
	}
	return env, nil
}

// withTimeout runs f and returns its result, or gives up after d or when
// ctx ends. f keeps running after a give-up (the client offers no way to
// cancel it); if it later succeeds, discard gets the late value.
func withTimeout[T any](ctx context.Context, d time.Duration, what string, f func() (T, error), discard func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var zero T
	var err error
	select {
	case r := <-ch:
		return r.v, r.err
	case <-timer.C:
		err = fmt.Errorf("%s: no answer in %v: %w", what, d, ErrTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("%s: %w", what, ctx.Err())
	}
	go func() {
		if r := <-ch; r.err == nil && discard != nil {
			discard(r.v)
		}
	}()
	return zero, err
}

// setupHint explains the usual reason why creating a producer or consumer
// hangs, with the leader the broker reports for the stream.
func setupHint(env *stream.Environment, cfg Config) string {
	md, err := env.StreamMetaData(cfg.Stream)
	if err != nil || md == nil || md.Leader == nil {
		return ""
	}
	return fmt.Sprintf(" (the client loops until the advertised host:port in the broker's open response"+
		" equals the stream leader in its metadata, here %s:%s; connecting to %s)",
		md.Leader.Host, md.Leader.Port, cfg.Addr)
}

// Window bounds a producer's unconfirmed messages. One goroutine acquires,
// another releases. Other harnesses (bench/perf) share it.
type Window struct {
	mu struct {
		sync.Mutex
		free int
	}
	signal chan struct{} // 1-buffered: "free grew"
}

// NewWindow returns a Window with size free slots.
func NewWindow(size int) *Window {
	w := &Window{signal: make(chan struct{}, 1)}
	w.mu.free = size
	return w
}

// Acquire takes n slots, waiting until they are free, stall passes with no
// release, or ctx ends.
func (w *Window) Acquire(ctx context.Context, n int, stall time.Duration) error {
	var timer *time.Timer
	for {
		w.mu.Lock()
		if w.mu.free >= n {
			w.mu.free -= n
			w.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		w.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(stall)
			defer timer.Stop()
		}
		select {
		case <-w.signal:
			timer.Reset(stall)
		case <-timer.C:
			return fmt.Errorf("no confirm for %v: %w", stall, ErrTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release returns n slots.
func (w *Window) Release(n int) {
	w.mu.Lock()
	w.mu.free += n
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}
