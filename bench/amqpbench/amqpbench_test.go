package amqpbench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure every scenario runs to completion against a real broker: every
// message confirmed and delivered to every queue. It runs only when
// AMQPBENCH_URL names an AMQP 0-9-1 broker, so CI does not depend on one:
//
//	AMQPBENCH_URL=amqp://guest:guest@127.0.0.1:15673/ go test -short -run Smoke -v ./bench/amqpbench/
//
// A broker that refuses quorum queues passes (the refusal must wrap
// ErrDeclare). Callers that start a broker themselves can call SmokeConfigs
// and RunScenario the same way.
func TestSmoke(t *testing.T) {
	url := os.Getenv("AMQPBENCH_URL")
	if url == "" {
		t.Skip("AMQPBENCH_URL not set")
	}
	count := 20_000
	if testing.Short() {
		count = 2_000
	}
	for _, cfg := range SmokeConfigs(url, count) {
		t.Run(cfg.Scenario, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			res, err := RunScenario(ctx, cfg)
			if cfg.Scenario == ScenarioQuorum1p1c && errors.Is(err, ErrDeclare) {
				t.Skipf("broker refuses quorum queues: %v", err)
			}
			if err != nil {
				t.Fatalf("RunScenario: %v (result %+v)", err, res)
			}
			if err := CheckComplete(res, count); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: publish %.0f msgs/s, delivered %.0f msgs/s, latency p50 %v p99 %v",
				cfg.Scenario, res.PublishMsgsPerSec, res.DeliveredMsgsPerSec, res.LatencyP50, res.LatencyP99)
		})
	}
}

// Ensure a duration-bounded run stops publishing and still delivers
// everything it published.
func TestSmokeDuration(t *testing.T) {
	url := os.Getenv("AMQPBENCH_URL")
	if url == "" {
		t.Skip("AMQPBENCH_URL not set")
	}
	cfg := Config{URL: url, Scenario: ScenarioClassic1p1c, Duration: 300 * time.Millisecond, Prefix: "amqpbench-smoke",
		SetupTimeout: 10 * time.Second, StallTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := RunScenario(ctx, cfg)
	if err != nil {
		t.Fatalf("RunScenario: %v", err)
	}
	if res.Published == 0 {
		t.Fatal("published nothing in 300ms")
	}
	if err := CheckComplete(res, res.Published); err != nil {
		t.Fatal(err)
	}
	if res.PublishElapsed > 10*time.Second {
		t.Errorf("publish took %v, want about 300ms", res.PublishElapsed)
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	c := Config{URL: "amqp://guest:guest@127.0.0.1:5672/", Scenario: ScenarioFanout}.ensureDefaults()
	if c.Count != DefaultCount || c.Queues != DefaultQueues || c.QueueType != QueueTypeClassic ||
		c.MaxInFlight != DefaultMaxInFlight || c.Prefetch != DefaultPrefetch || c.AckEvery != DefaultAckEvery {
		t.Errorf("fanout defaults: %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Errorf("validate defaults: %v", err)
	}
	q := Config{URL: "amqp://127.0.0.1/", Scenario: ScenarioQuorum1p1c, Duration: time.Second}.ensureDefaults()
	if q.QueueType != QueueTypeQuorum || q.Queues != 1 || q.Count != 0 {
		t.Errorf("quorum-1p1c with a duration: %+v", q)
	}
	if a := (Config{Prefetch: 50, AckEvery: 100}).ensureDefaults(); a.AckEvery != 50 {
		t.Errorf("AckEvery %d, want lowered to Prefetch 50", a.AckEvery)
	}
	bad := []Config{
		{URL: "http://x/", Scenario: ScenarioFanout},
		{URL: "amqp://x/", Scenario: "nope"},
		{URL: "amqp://x/", Scenario: ScenarioClassic1p1c, QueueType: QueueTypeQuorum},
		{URL: "amqp://x/", Scenario: ScenarioClassic1p1c, Queues: 3},
		{URL: "amqp://x/", Scenario: ScenarioFanout, QueueType: "stream"},
		{URL: "amqp://x/", Scenario: ScenarioFanout, Prefetch: 70000},
		{URL: "amqp://x/", Scenario: ScenarioFanout, Count: -1},
	}
	for _, b := range bad {
		if err := b.ensureDefaults().validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("validate(%+v) = %v, want ErrConfig", b, err)
		}
	}
	if _, err := RunScenario(t.Context(), bad[1]); !errors.Is(err, ErrConfig) {
		t.Errorf("RunScenario with a bad config: %v, want ErrConfig", err)
	}
}

func TestParseTargets(t *testing.T) {
	ts, err := ParseTargets("warren=amqp://guest:guest@127.0.0.1:5672/, rabbitmq=amqp://guest:secret@127.0.0.1:15673/vh,amqp://localhost")
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "warren", URL: "amqp://guest:guest@127.0.0.1:5672/", Redacted: "amqp://guest:xxxxx@127.0.0.1:5672/"},
		{Name: "rabbitmq", URL: "amqp://guest:secret@127.0.0.1:15673/vh", Redacted: "amqp://guest:xxxxx@127.0.0.1:15673/vh"},
		{Name: "localhost:5672", URL: "amqp://localhost", Redacted: "amqp://localhost"},
	}
	if len(ts) != len(want) {
		t.Fatalf("got %+v", ts)
	}
	for i := range want {
		if ts[i] != want[i] {
			t.Errorf("target %d = %+v, want %+v", i, ts[i], want[i])
		}
	}
	for _, s := range []string{"", "a=amqp://x/,a=amqp://y/", "a=http://x/", "a=127.0.0.1:5672"} {
		if _, err := ParseTargets(s); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseTargets(%q) = %v, want ErrConfig", s, err)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "x.pid")
	if err := os.WriteFile(pidFile, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ParsePIDs("warren=123, rabbitmq=" + pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["warren"] != 123 || got["rabbitmq"] != 4242 {
		t.Errorf("ParsePIDs = %v", got)
	}
	for _, s := range []string{"warren", "warren=0", "a=1,a=2", "a=/nonexistent/pid"} {
		if _, err := ParsePIDs(s); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePIDs(%q) = %v, want ErrConfig", s, err)
		}
	}
}

func TestProcParsing(t *testing.T) {
	stat := []byte("11029 (beam.smp) x) S 1 11029 11029 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 30 0 100 0 0\n")
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 3250*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 3.25s", cpu, err)
	}
	if _, err := parseStatCPU([]byte("1 (x) S 1 2")); err == nil {
		t.Error("short stat parsed")
	}
	io := []byte("rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n")
	if wb, err := parseIOWriteBytes(io); err != nil || wb != 8192 {
		t.Errorf("parseIOWriteBytes = %d, %v", wb, err)
	}
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatalf("ReadProc(self): %v", err)
	}
	if s.CPU < 0 {
		t.Errorf("own CPU %v", s.CPU)
	}
	if _, err := ReadProc(1 << 30); err == nil {
		t.Error("ReadProc of a missing pid succeeded")
	}
}

func TestPercentilesAndMedian(t *testing.T) {
	var xs []time.Duration
	for i := 100; i >= 1; i-- {
		xs = append(xs, time.Duration(i))
	}
	p50, p99, mx := percentiles(xs)
	if p50 != 50 || p99 != 99 || mx != 100 {
		t.Errorf("percentiles = %v %v %v", p50, p99, mx)
	}
	if a, b, c := percentiles(nil); a != 0 || b != 0 || c != 0 {
		t.Error("percentiles(nil) not zero")
	}
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("Median odd = %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("Median even = %v", m)
	}
	r := Result{MessageSize: 10, Published: 100, Confirmed: 100, Delivered: 1000,
		PublishElapsed: time.Second, DeliverElapsed: 2 * time.Second, ConsumeElapsed: time.Second,
		BrokerStats: true, BrokerCPU: time.Second, BrokerIO: true, BrokerWriteBytes: 3000}
	r.finish()
	if r.PublishMsgsPerSec != 100 || r.EndToEndMsgsPerSec != 50 || r.DeliveredMsgsPerSec != 500 ||
		r.ConsumeMsgsPerSec != 1000 || r.BrokerCPUPerMsg != 10*time.Millisecond || r.WritePerPublishedByte != 3 {
		t.Errorf("finish: %+v", r)
	}
	if err := CheckComplete(r, 100); err == nil || !strings.Contains(err.Error(), "delivered") {
		t.Errorf("CheckComplete of 1000 deliveries for 10 B x 100 x 0 queues: %v", err)
	}
}
