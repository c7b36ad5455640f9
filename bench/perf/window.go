package perf

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// confirmWindow bounds a producer's unconfirmed messages. One goroutine
// acquires, another releases.
type confirmWindow struct {
	mu struct {
		sync.Mutex
		free int
	}
	signal chan struct{} // 1-buffered: "free grew"
}

// newConfirmWindow returns a confirmWindow with size free slots.
func newConfirmWindow(size int) *confirmWindow {
	w := &confirmWindow{signal: make(chan struct{}, 1)}
	w.mu.free = size
	return w
}

// Acquire takes n slots, waiting until they are free, stall passes with no
// release (an error wrapping ErrStall), or ctx ends.
func (w *confirmWindow) Acquire(ctx context.Context, n int, stall time.Duration) error {
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
			return fmt.Errorf("%w: no confirm for %v", ErrStall, stall)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release returns n slots.
func (w *confirmWindow) Release(n int) {
	w.mu.Lock()
	w.mu.free += n
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}
