package streambench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// ErrNoStream marks a replay of a stream that does not exist.
var ErrNoStream = errors.New("streambench: stream does not exist")

// RunReplay reads cfg.Stream from offset "first" with one consumer until
// cfg.Messages messages have arrived. The stream must hold at least that
// many (run RunPublish with the same Config first).
func RunReplay(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := prepare(cfg)
	res := Result{Mode: "replay", Addr: cfg.Addr, Messages: cfg.Messages, MessageSize: cfg.MessageSize}
	if err != nil {
		return res, err
	}
	env, err := connect(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Close() }()

	exists, err := env.StreamExists(cfg.Stream)
	if err != nil {
		return res, fmt.Errorf("streambench: stream %q exists: %w", cfg.Stream, err)
	}
	if !exists {
		return res, fmt.Errorf("streambench: replay %q on %s: %w", cfg.Stream, cfg.Addr, ErrNoStream)
	}

	target := int64(cfg.Messages)
	if target == 0 {
		return res, nil
	}
	var (
		start    time.Time // set before the subscribe that starts the handler
		count    atomic.Int64
		bytes    atomic.Int64
		elapsed  atomic.Int64 // start to the message that completed the run
		done     = make(chan struct{})
		doneOnce sync.Once
	)
	handler := func(_ stream.ConsumerContext, m *amqp.Message) {
		n := count.Add(1)
		if n > target {
			return
		}
		bytes.Add(int64(len(m.GetData())))
		if n == target {
			elapsed.Store(int64(time.Since(start)))
			doneOnce.Do(func() { close(done) })
		}
	}
	opts := stream.NewConsumerOptions().
		SetClientProvidedName("streambench-consumer").
		SetOffset(stream.OffsetSpecification{}.First()).
		SetCRCCheck(!cfg.SkipCRC).
		SetInitialCredits(int16(cfg.InitialCredits))

	start = time.Now()
	what := fmt.Sprintf("consumer on stream %q", cfg.Stream)
	consumer, err := withTimeout(ctx, cfg.SetupTimeout, what,
		func() (*stream.Consumer, error) { return env.NewConsumer(cfg.Stream, handler, opts) },
		func(c *stream.Consumer) { _ = c.Close() })
	if err != nil {
		if errors.Is(err, ErrTimeout) {
			return res, fmt.Errorf("streambench: %w%s", err, setupHint(env, cfg))
		}
		return res, fmt.Errorf("streambench: %s: %w", what, err)
	}
	defer func() { _ = consumer.Close() }()
	closed := consumer.NotifyClose()

	stall := time.NewTicker(cfg.StallTimeout)
	defer stall.Stop()
	var seen int64
	var runErr error
wait:
	for {
		select {
		case <-done:
			break wait
		case ev := <-closed:
			runErr = fmt.Errorf("streambench: consumer closed after %d of %d messages: %s %v",
				count.Load(), target, ev.Reason, ev.Err)
			break wait
		case <-stall.C:
			n := count.Load()
			if n == seen {
				runErr = fmt.Errorf("streambench: consumer: no message for %v after %d of %d: %w",
					cfg.StallTimeout, n, target, ErrTimeout)
				break wait
			}
			seen = n
		case <-ctx.Done():
			runErr = fmt.Errorf("streambench: consumer after %d of %d messages: %w", count.Load(), target, ctx.Err())
			break wait
		}
	}

	res.Count = int(min(count.Load(), target))
	res.Bytes = bytes.Load()
	res.Elapsed = time.Duration(elapsed.Load())
	if runErr != nil {
		res.Elapsed = time.Since(start)
	}
	res.finish()
	return res, runErr
}
