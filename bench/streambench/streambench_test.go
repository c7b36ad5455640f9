package streambench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// Ensure a run against a real broker publishes, confirms and replays every
// message. It runs only when WARREN_BENCH_ADDR names a stream-protocol
// broker (host:port), so CI does not depend on one:
//
//	WARREN_BENCH_ADDR=127.0.0.1:15552 go test -short -run Smoke ./bench/streambench/
func TestSmoke(t *testing.T) {
	addr := os.Getenv("WARREN_BENCH_ADDR")
	if addr == "" {
		t.Skip("WARREN_BENCH_ADDR not set")
	}
	messages := 20_000
	if testing.Short() {
		messages = 2_000
	}
	cfg := Config{
		Addr:         addr,
		Stream:       fmt.Sprintf("streambench-smoke-%d", os.Getpid()),
		Messages:     messages,
		MessageSize:  64,
		Producers:    2,
		BatchSize:    50,
		SetupTimeout: 10 * time.Second,
		StallTimeout: 10 * time.Second,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() { deleteStream(t, cfg) })

	pub, err := RunPublish(ctx, cfg)
	if err != nil {
		t.Fatalf("RunPublish: %v (result %+v)", err, pub)
	}
	if pub.Count != messages || pub.Failed != 0 {
		t.Fatalf("publish confirmed %d, failed %d, want %d, 0", pub.Count, pub.Failed, messages)
	}
	if pub.Bytes != int64(messages*cfg.MessageSize) {
		t.Errorf("publish bytes %d, want %d", pub.Bytes, messages*cfg.MessageSize)
	}
	if pub.Elapsed <= 0 || pub.MsgsPerSec <= 0 || pub.LatencyP50 <= 0 || pub.LatencyMax < pub.LatencyP99 {
		t.Errorf("publish result not filled in: %+v", pub)
	}

	rep, err := RunReplay(ctx, cfg)
	if err != nil {
		t.Fatalf("RunReplay: %v (result %+v)", err, rep)
	}
	if rep.Count != messages || rep.Bytes != int64(messages*cfg.MessageSize) {
		t.Fatalf("replay got %d messages, %d bytes, want %d, %d", rep.Count, rep.Bytes, messages, messages*cfg.MessageSize)
	}
	t.Logf("publish %.0f msgs/s (confirm p50 %v), replay %.0f msgs/s", pub.MsgsPerSec, pub.LatencyP50, rep.MsgsPerSec)

	// A stream that does not exist is an error, not a hang.
	missing := cfg
	missing.Stream += "-missing"
	if _, err := RunReplay(ctx, missing); !errors.Is(err, ErrNoStream) {
		t.Errorf("RunReplay of a missing stream: %v, want ErrNoStream", err)
	}
}

func deleteStream(t *testing.T, cfg Config) {
	cfg, err := prepare(cfg)
	if err != nil {
		return
	}
	env, err := connect(context.Background(), cfg)
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer func() { _ = env.Close() }()
	if ok, _ := env.StreamExists(cfg.Stream); ok {
		if err := env.DeleteStream(cfg.Stream); err != nil {
			t.Logf("cleanup: delete %q: %v", cfg.Stream, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{Addr: "127.0.0.1:5552"}.ensureDefaults()
	want := Config{
		Addr: "127.0.0.1:5552", User: "guest", Password: "guest", Vhost: "/", Stream: "streambench",
		Messages: DefaultMessages, MessageSize: DefaultMessageSize, Producers: 1,
		BatchSize: DefaultBatchSize, SubEntrySize: 1, MaxInFlight: DefaultMaxInFlight,
		SocketBuffer: DefaultSocketBuffer, InitialCredits: DefaultInitialCredits,
		SetupTimeout: 30 * time.Second, StallTimeout: 30 * time.Second,
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if err := got.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	// The window is never smaller than one batch.
	if c := (Config{Addr: "h:1", BatchSize: 500, MaxInFlight: 100}).ensureDefaults(); c.MaxInFlight != 500 {
		t.Errorf("MaxInFlight got %d, want 500", c.MaxInFlight)
	}
}

func TestConfigValidate(t *testing.T) {
	base := Config{Addr: "127.0.0.1:5552"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no addr", func(c *Config) { c.Addr = "" }},
		{"no port", func(c *Config) { c.Addr = "localhost" }},
		{"bad port", func(c *Config) { c.Addr = "localhost:99999" }},
		{"empty host", func(c *Config) { c.Addr = ":5552" }},
		{"tiny message", func(c *Config) { c.MessageSize = headerSize - 1 }},
		{"negative messages", func(c *Config) { c.Messages = -1 }},
		{"too many producers", func(c *Config) { c.Producers = 255 }},
		{"socket buffer", func(c *Config) { c.SocketBuffer = -2 }},
		{"credits", func(c *Config) { c.InitialCredits = 1 << 15 }},
	} {
		c := base
		tc.edit(&c)
		if err := c.ensureDefaults().validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", tc.name, err)
		}
	}
}

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets(" warren=127.0.0.1:5552, rabbit=127.0.0.1:15552,localhost:1 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{{"warren", "127.0.0.1:5552"}, {"rabbit", "127.0.0.1:15552"}, {"localhost:1", "localhost:1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", ",", "a=127.0.0.1:1,a=127.0.0.1:2", "=127.0.0.1:1", "a=nohost", "a=h:port"} {
		if _, err := ParseTargets(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseTargets(%q): got %v, want ErrConfig", bad, err)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tc.in...)
		if got := Median(in); got != tc.want {
			t.Errorf("Median(%v): got %v, want %v", tc.in, got, tc.want)
		}
		if fmt.Sprint(in) != fmt.Sprint(tc.in) {
			t.Errorf("Median(%v) reordered its input to %v", tc.in, in)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(i + 1)
	}
	for _, tc := range []struct {
		p    int
		want time.Duration
	}{{0, 1}, {1, 1}, {50, 50}, {99, 99}, {100, 100}} {
		if got := percentile(s, tc.p); got != tc.want {
			t.Errorf("percentile(1..100, %d): got %v, want %v", tc.p, got, tc.want)
		}
	}
	var r Result
	r.setLatencies([]time.Duration{3, 1, 2})
	if r.LatencyP50 != 2 || r.LatencyP99 != 3 || r.LatencyMax != 3 {
		t.Errorf("setLatencies: got p50 %v p99 %v max %v, want 2 3 3", r.LatencyP50, r.LatencyP99, r.LatencyMax)
	}
}

func TestResultRates(t *testing.T) {
	r := Result{Count: 1000, Bytes: 2_000_000, Elapsed: 2 * time.Second}
	r.finish()
	if r.MsgsPerSec != 500 || r.MBPerSec != 1 {
		t.Errorf("got %v msgs/s %v MB/s, want 500, 1", r.MsgsPerSec, r.MBPerSec)
	}
}

// Ensure the in-flight window blocks at its size, wakes on release and
// fails after the stall timeout without a release.
func TestWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWindow(10)
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
		if err := w.Acquire(ctx, 1, time.Second); !errors.Is(err, ErrTimeout) {
			t.Fatalf("acquire on a stalled window: got %v, want ErrTimeout", err)
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

// Ensure withTimeout gives up on a hung step and hands a late value to
// discard.
func TestWithTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		discarded := make(chan int, 1)
		_, err := withTimeout(t.Context(), time.Second, "step",
			func() (int, error) { <-release; return 7, nil },
			func(v int) { discarded <- v })
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("got %v, want ErrTimeout", err)
		}
		close(release)
		if v := <-discarded; v != 7 {
			t.Errorf("discarded %d, want 7", v)
		}

		v, err := withTimeout(t.Context(), time.Second, "step", func() (int, error) { return 3, nil }, nil)
		if v != 3 || err != nil {
			t.Errorf("got %d, %v, want 3, nil", v, err)
		}
	})
}
