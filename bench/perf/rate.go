package perf

import (
	"context"
	"time"
)

// Limiter paces one producer to a fixed rate. It is not safe for concurrent
// use: each producer owns one.
//
// The schedule is absolute (message i is due at start + i/rate), so sleeps
// that overshoot are made up by the next calls rather than lowering the
// rate; a producer that fell more than a second behind (a stalled broker)
// forgets the debt instead of bursting to catch up.
type Limiter struct {
	interval time.Duration // between two messages
	next     time.Time     // when the next message is due
}

// maxDebt is how far behind its schedule a Limiter may fall before it
// forgets the lost messages.
const maxDebt = time.Second

// NewLimiter returns a Limiter for rate messages per second, or nil (no
// limit) when rate <= 0. A nil *Limiter never waits.
func NewLimiter(rate float64) *Limiter {
	if rate <= 0 {
		return nil
	}
	return &Limiter{interval: time.Duration(float64(time.Second) / rate)}
}

// Acquire waits until at least one message is due and returns how many are
// due, at most n (n >= 1), and takes them. A nil Limiter returns n at once.
func (l *Limiter) Acquire(ctx context.Context, n int) (int, error) {
	if l == nil {
		return n, nil
	}
	now := time.Now()
	if l.next.IsZero() || now.Sub(l.next) > maxDebt {
		l.next = now
	}
	if wait := l.next.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, context.Cause(ctx)
		}
		now = time.Now()
	}
	due := 1 + int(now.Sub(l.next)/l.interval)
	due = min(due, n)
	l.next = l.next.Add(time.Duration(due) * l.interval)
	return due, nil
}
