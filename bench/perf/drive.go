package perf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

var (
	// ErrIncomplete marks a run whose consumers did not get every
	// confirmed message in time.
	ErrIncomplete = errors.New("perf: consumers did not get every message")
	// ErrStall marks a run in which confirms or deliveries stopped.
	ErrStall = errors.New("perf: no progress")
	// ErrNacked marks a run in which the broker rejected a message.
	ErrNacked = errors.New("perf: message not confirmed")
)

// idleEnd is how long consumers must be quiet to end a run whose expected
// count is unknown (such as a consumer starting at "last").
const idleEnd = time.Second

// workload is what drive needs from a mode.
type workload struct {
	common Common
	stats  *Stats
	// producers each publish until deadline (zero: none) or their count,
	// then wait for their confirms; an error ends the run.
	producers []func(ctx context.Context, deadline time.Time) error
	// expected returns the deliveries the consumers must reach once the
	// producers are done, or -1 when unknown.
	expected func() int64
	progress func(Progress)
	interval time.Duration
}

// drive runs w and fills the timing of sum; it returns when the consumers
// have what they expect, or on the first failure.
func drive(ctx context.Context, w workload, sum *Summary) error {
	c := w.common
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	sum.Start = start
	repCtx, stopReport := context.WithCancel(ctx)
	var repWG sync.WaitGroup
	repWG.Go(func() { w.stats.report(repCtx, start, w.interval, w.progress) })
	defer func() { stopReport(); repWG.Wait() }()

	var deadline time.Time
	if c.Duration > 0 {
		deadline = start.Add(c.Duration)
	}
	var wg sync.WaitGroup
	for _, p := range w.producers {
		wg.Go(func() {
			if err := p(ctx, deadline); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if c.Consumers == 0 {
		return nil
	}
	want := w.expected()
	if len(w.producers) == 0 && want < 0 && c.Duration > 0 {
		// A consumer-only run bounded by time.
		select {
		case <-time.After(time.Until(deadline)):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return waitConsumers(ctx, w.stats, want, c)
}

// waitConsumers waits until want deliveries have arrived (want < 0:
// until consumers are quiet for idleEnd), failing after a stall or the
// drain timeout.
func waitConsumers(ctx context.Context, st *Stats, want int64, c Common) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	drainEnd := time.Now().Add(c.DrainTimeout)
	last, lastChange := st.Consumed.Load(), time.Now()
	for {
		n := st.Consumed.Load()
		now := time.Now()
		if n != last {
			last, lastChange = n, now
		}
		switch {
		case want >= 0 && n >= want:
			return nil
		case want < 0 && now.Sub(lastChange) >= idleEnd:
			return nil
		case now.Sub(lastChange) > c.StallTimeout:
			return fmt.Errorf("%w: no delivery for %v, %d of %d", ErrStall, c.StallTimeout, n, want)
		case now.After(drainEnd):
			return fmt.Errorf("%w: %d of %d after draining for %v", ErrIncomplete, n, want, c.DrainTimeout)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// retry calls f until it succeeds or, when wait is positive, until wait
// has passed (every 100 ms); with wait <= 0 it calls f once.
func retry[T any](ctx context.Context, wait time.Duration, f func() (T, error)) (T, error) {
	end := time.Now().Add(wait)
	for {
		v, err := f()
		if err == nil || wait <= 0 || time.Now().After(end) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, errors.Join(err, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// finishSummary fills sum's counters, rates, latencies, broker usage and
// time to first delivery at the end of a run.
func finishSummary(st *Stats, sum *Summary, c Common, size int, probe *brokerProbe, confirms bool) {
	st.summarize(sum, time.Now())
	if !confirms {
		// Without confirms the publish rate is what was handed to the
		// socket over the whole run.
		sum.PublishRate = rate(sum.Published, sum.Elapsed)
	}
	defer func() { sum.Metrics = sum.Record().Metrics }()
	sum.Broker = probe.finish(sum.Published, sum.Consumed, size)
	if !sum.FirstConsume.IsZero() {
		t0 := c.T0
		if t0.IsZero() {
			t0 = sum.Start
		}
		sum.TimeToFirst = sum.FirstConsume.Sub(t0)
	}
}
