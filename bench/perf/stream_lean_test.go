package perf

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// Ensure lean-client runs against an in-process Warren publish, confirm
// and consume every message with latencies, including a replay with a
// count and a start offset.
func TestLeanStreamAgainstWarren(t *testing.T) {
	streamAddr, _ := startWarren(t)
	const n = 5000
	common := Common{Producers: 2, Consumers: 2, Count: n, ConfirmWindow: 500, SetupTimeout: 10 * time.Second,
		StallTimeout: 10 * time.Second, DrainTimeout: 20 * time.Second}
	run := func(t *testing.T, cfg StreamConfig, progress func(Progress)) Summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cfg.Client = ClientLean
		s, err := RunStream(ctx, cfg, progress, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("run: %v (summary %+v)", err, s)
		}
		return s
	}
	t.Run("publish-consume", func(t *testing.T) {
		var ticks int
		s := run(t, StreamConfig{Common: common, Addr: streamAddr, Stream: "lean-1", Recreate: true, BatchSize: 50},
			func(Progress) { ticks++ })
		checkComplete(t, s, 2*n)
		if s.ExpectedConsumed != 4*n || s.Consumed != 4*n || s.ConsumedBytes != 4*n*100 {
			t.Errorf("consumed %d (%d bytes), expected %d; want %d", s.Consumed, s.ConsumedBytes, s.ExpectedConsumed, 4*n)
		}
		if cfg := s.Config.(StreamConfig); cfg.Client != ClientLean {
			t.Errorf("summary config client %q", cfg.Client)
		}
	})
	t.Run("publish-then-replay", func(t *testing.T) {
		c := common
		c.Producers, c.Consumers, c.Keep = 1, 0, true
		checkComplete(t, run(t, StreamConfig{Common: c, Addr: streamAddr, Stream: "lean-replay", Recreate: true}, nil), n)
		c.Producers, c.Consumers, c.Keep, c.Count = 0, 1, false, 1000
		s := run(t, StreamConfig{Common: c, Addr: streamAddr, Stream: "lean-replay", Offset: "offset:4000"}, nil)
		if s.Consumed != 1000 || s.ExpectedConsumed != 1000 {
			t.Errorf("replay from offset 4000 consumed %d, expected %d; want 1000", s.Consumed, s.ExpectedConsumed)
		}
		s = run(t, StreamConfig{Common: c, Addr: streamAddr, Stream: "lean-replay", Offset: "first"}, nil)
		if s.Consumed != 1000 || s.ExpectedConsumed != 1000 || s.TimeToFirst <= 0 || s.Latency.Count != 1000 {
			t.Errorf("replay consumed %d (expected %d), time to first %v, latencies %d",
				s.Consumed, s.ExpectedConsumed, s.TimeToFirst, s.Latency.Count)
		}
	})
	t.Run("rate", func(t *testing.T) {
		c := common
		c.Producers, c.Consumers, c.Count, c.Rate, c.Duration = 1, 1, 0, 2000, 500*time.Millisecond
		s := run(t, StreamConfig{Common: c, Addr: streamAddr, Stream: "lean-rate", Recreate: true, BatchSize: 10}, nil)
		checkComplete(t, s, s.Published)
		if s.Published < 800 || s.Published > 1100 {
			t.Errorf("published %d in 0.5s at 2000/s, want about 1000", s.Published)
		}
	})
	t.Run("missing-stream", func(t *testing.T) {
		c := common
		c.Producers, c.Consumers = 0, 1
		_, err := RunStream(t.Context(), StreamConfig{Common: c, Addr: streamAddr, Stream: "lean-missing",
			Client: ClientLean}, nil, 0)
		if err == nil || !strings.Contains(err.Error(), "stream does not exist") {
			t.Errorf("consumer on a missing stream: %v", err)
		}
	})
}

// Ensure -client parses and validate refuses what the lean client lacks.
func TestLeanValidation(t *testing.T) {
	var sc StreamConfig
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindStreamFlags(fs, &sc)
	if err := fs.Parse(strings.Fields("-client lean -count 10")); err != nil {
		t.Fatal(err)
	}
	c := sc.ensureDefaults()
	if c.Client != ClientLean {
		t.Fatalf("client %q", c.Client)
	}
	if err := c.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if d := (StreamConfig{}).ensureDefaults(); d.Client != ClientGo {
		t.Errorf("default client %q", d.Client)
	}
	bad := map[string]func(*StreamConfig){
		"super streams":    func(c *StreamConfig) { c.SuperStream = true },
		"filtering":        func(c *StreamConfig) { c.FilterValues = []string{"a"} },
		"consumer filter":  func(c *StreamConfig) { c.ConsumerFilter = []string{"a"}; c.Producers = 0 },
		"named producers":  func(c *StreamConfig) { c.ProducerName = "p" },
		"sub-entries":      func(c *StreamConfig) { c.SubEntrySize = 10 },
		"unknown client":   func(c *StreamConfig) { c.Client = "java" },
		"unknown client 2": func(c *StreamConfig) { c.Client = "LEAN" },
	}
	for name, f := range bad {
		b := c
		f(&b)
		err := b.ensureDefaults().validate()
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: accepted (%v)", name, err)
			continue
		}
		want := name
		if strings.HasPrefix(name, "unknown client") {
			want = "client"
		} else if name == "consumer filter" {
			want = "filtering"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: message %q does not say %q", name, err, want)
		}
		b.Client = ClientGo
		if name != "unknown client" && name != "unknown client 2" && name != "consumer filter" {
			if err := b.ensureDefaults().validate(); err != nil && name != "sub-entries" {
				t.Errorf("%s with the Go client: %v", name, err)
			}
		}
	}
}
