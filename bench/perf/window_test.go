package perf

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Ensure the confirm window blocks at its size, wakes on release and
// fails with ErrStall after the stall timeout without a release.
func TestConfirmWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newConfirmWindow(10)
		ctx := t.Context()
		if err := w.Acquire(ctx, 10, time.Second); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { got <- w.Acquire(ctx, 4, time.Second) }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("acquire on a full window returned %v", err)
		default:
		}
		w.Release(3) // not enough yet
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("acquire of 4 with 3 free returned %v", err)
		default:
		}
		w.Release(1)
		if err := <-got; err != nil {
			t.Fatalf("acquire after release: %v", err)
		}

		start := time.Now()
		if err := w.Acquire(ctx, 1, time.Second); !errors.Is(err, ErrStall) {
			t.Fatalf("acquire on a stalled window: got %v, want ErrStall", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("stall detected after %v, want 1s", d)
		}

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := w.Acquire(cctx, 1, time.Second); !errors.Is(err, context.Canceled) {
			t.Errorf("acquire with a cancelled context: got %v, want context.Canceled", err)
		}
	})
}
