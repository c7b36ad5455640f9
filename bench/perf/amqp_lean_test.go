package perf

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// runLean runs an AMQP workload with the lean client against url.
func runLean(t *testing.T, cfg AMQPConfig) Summary {
	t.Helper()
	cfg.Client = ClientLean
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := RunAMQP(ctx, cfg, nil, 0)
	if err != nil {
		t.Fatalf("run: %v (summary %+v)", err, s)
	}
	if got := s.Config.(AMQPConfig).Client; got != ClientLean {
		t.Errorf("summary config client %q", got)
	}
	return s
}

func leanCommon() Common {
	return Common{Producers: 1, Consumers: 1, Count: 3000, SetupTimeout: 10 * time.Second,
		StallTimeout: 10 * time.Second, DrainTimeout: 20 * time.Second}
}

// The lean client runs the workloads of TestSmokeAgainstWarren's amqp
// cases with the same exact counts.
func TestLeanAMQPAgainstWarren(t *testing.T) {
	_, url := startWarren(t)
	const n = 3000
	t.Run("classic", func(t *testing.T) {
		c := leanCommon()
		c.ConfirmWindow = 200
		s := runLean(t, AMQPConfig{Common: c, URL: url, Persistent: true, Prefetch: 100, MultiAckEvery: 10})
		checkComplete(t, s, n)
	})
	t.Run("fanout", func(t *testing.T) {
		c := leanCommon()
		c.ConfirmWindow = 200
		s := runLean(t, AMQPConfig{Common: c, URL: url, Queues: 3, AutoAck: true})
		checkComplete(t, s, n)
		if s.ExpectedConsumed != 3*n {
			t.Errorf("expected %d, want %d", s.ExpectedConsumed, 3*n)
		}
	})
	t.Run("two-producers-window-below-batch", func(t *testing.T) {
		c := leanCommon()
		c.Producers, c.Consumers, c.Count = 2, 2, 1000
		c.ConfirmWindow = 7
		s := runLean(t, AMQPConfig{Common: c, URL: url, Prefetch: 50, MultiAckEvery: 1})
		checkComplete(t, s, 2000)
	})
	t.Run("no-confirms-rate", func(t *testing.T) {
		c := leanCommon()
		c.Count, c.Rate, c.Duration = 0, 2000, 500*time.Millisecond
		s := runLean(t, AMQPConfig{Common: c, URL: url})
		if s.Published < 800 || s.Published > 1100 {
			t.Errorf("published %d in 0.5s at 2000/s, want about 1000", s.Published)
		}
		if s.Confirmed != 0 || s.Consumed != s.Published || s.Latency.Count == 0 {
			t.Errorf("confirmed %d, consumed %d of %d, latency count %d", s.Confirmed, s.Consumed, s.Published, s.Latency.Count)
		}
	})
	t.Run("stream-queue", func(t *testing.T) {
		c := leanCommon()
		c.Consumers, c.Count, c.ConfirmWindow = 2, 1000, 100
		s := runLean(t, AMQPConfig{Common: c, URL: url, QueueType: QueueStream, Prefetch: 100, MultiAckEvery: 10})
		checkComplete(t, s, 1000)
		if s.ExpectedConsumed != 2000 {
			t.Errorf("expected %d, want 2000 (each consumer reads the stream)", s.ExpectedConsumed)
		}
	})
	t.Run("publish-then-consume-only", func(t *testing.T) {
		c := leanCommon()
		c.Consumers, c.Keep, c.ConfirmWindow, c.Count = 0, true, 100, 500
		checkComplete(t, runLean(t, AMQPConfig{Common: c, URL: url, Queue: "lean-replay"}), 500)
		c.Producers, c.Consumers, c.Keep = 0, 1, false
		s := runLean(t, AMQPConfig{Common: c, URL: url, Queue: "lean-replay", MultiAckEvery: 30})
		if s.Consumed != 500 {
			t.Errorf("consumed %d, want 500", s.Consumed)
		}
	})
}

func TestLeanAMQPValidate(t *testing.T) {
	base := AMQPConfig{Common: leanCommon(), URL: "amqp://guest:guest@127.0.0.1:5672/", Client: ClientLean}
	if err := base.ensureDefaults().validate(); err != nil {
		t.Fatalf("lean config refused: %v", err)
	}
	if got := (AMQPConfig{}).ensureDefaults().Client; got != ClientGo {
		t.Errorf("default client %q, want %q", got, ClientGo)
	}
	for name, tc := range map[string]struct {
		mod  func(*AMQPConfig)
		want string
	}{
		"unknown client": {func(c *AMQPConfig) { c.Client = "java" }, `client "java"`},
	} {
		c := base
		tc.mod(&c)
		err := c.ensureDefaults().validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrConfig with %q", name, err, tc.want)
		}
	}
	// Both clients take amqps.
	for _, client := range []string{ClientGo, ClientLean} {
		c := base
		c.Client, c.URL = client, "amqps://h/"
		if err := c.ensureDefaults().validate(); err != nil {
			t.Errorf("%s client with amqps: %v", client, err)
		}
	}
}

func TestLeanAMQPFlag(t *testing.T) {
	for args, want := range map[string]string{"": ClientGo, "-client lean": ClientLean} {
		var c AMQPConfig
		fs := flag.NewFlagSet("amqp", flag.ContinueOnError)
		BindAMQPFlags(fs, &c)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		if c.Client != want {
			t.Errorf("%q: client %q, want %q", args, c.Client, want)
		}
	}
}
