package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/testutil"
)

const (
	watermarkDirEnv   = "WARREN_WATERMARK_DIR"   // the child's data directory
	watermarkLimitEnv = "WARREN_WATERMARK_LIMIT" // its vm_memory_high_watermark.absolute
)

// TestWatermarkChild is the broker TestMemoryWatermark measures: the
// daemon's run with a small absolute memory high watermark, serving
// AMQP on a free loopback port; it prints "ready <addr>" and runs until
// killed.
func TestWatermarkChild(t *testing.T) {
	dir := os.Getenv(watermarkDirEnv)
	if dir == "" {
		t.Skip("helper process of TestMemoryWatermark")
	}
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) }) // never outlive the parent by much
	limit, err := strconv.ParseUint(os.Getenv(watermarkLimitEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaults()
	cfg.DataDir = dir
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.StreamListen, cfg.HTTPListen, cfg.PrometheusListen = "", "", ""
	cfg.Alarms.MemoryAbsolute = limit
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ready := make(chan readyAddrs, 1)
	go func() { fmt.Printf("ready %s\n", (<-ready).AMQP) }()
	if err := run(context.Background(), cfg, logger, ready); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
}

// rss reads a process's resident set size.
func rss(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// Ensure, and measure, that the daemon's memory stays at its high
// watermark under publishers that never stop: transient messages to a
// queue nobody consumes, four publishers as fast as the broker reads
// them, for WARREN_WATERMARK_SECONDS (default 3). The broker is a child
// process, so its resident memory is its own; the peak and the last
// second's average are logged next to the limit
// (go test -v -run MemoryWatermark ./tools/warren).
func TestMemoryWatermark(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory for seconds")
	}
	seconds := 3
	if s := os.Getenv("WARREN_WATERMARK_SECONDS"); s != "" {
		seconds, _ = strconv.Atoi(s)
	}
	const limit = 96 << 20
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatermarkChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), watermarkDirEnv+"="+dir, watermarkLimitEnv+"="+strconv.Itoa(limit))
	stderr := &testutil.LockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		t.Fatalf("broker did not start: %q %v\n%s", line, err, stderr.String())
	}
	pid := cmd.Process.Pid
	idle := rss(pid)

	url := "amqp://guest:guest@" + addr + "/"
	setup, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	sch, err := setup.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sch.QueueDeclare("backlog", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var published, blockedEvents atomic.Int64
	stop := make(chan struct{})
	body := make([]byte, 16<<10)
	for range 4 {
		c, err := amqp091.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		blocked := c.NotifyBlocked(make(chan amqp091.Blocking, 16))
		go func() {
			for b := range blocked {
				if b.Active {
					blockedEvents.Add(1)
				}
			}
		}()
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ch.PublishWithContext(context.Background(), "", "backlog", false, false, amqp091.Publishing{Body: body}) != nil {
					return
				}
				published.Add(1)
			}
		}()
	}
	var peak, sum, n uint64
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	lastSecond := end.Add(-time.Second)
	for now := time.Now(); now.Before(end); now = time.Now() {
		r := rss(pid)
		peak = max(peak, r)
		if now.After(lastSecond) {
			sum += r
			n++
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	// The publishers may be blocked: end the broker before the clients,
	// whose close would wait for it to read them.
	cmd.Process.Kill()
	cmd.Wait()
	plateau := sum / max(n, 1)
	mib := func(v uint64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
	t.Logf("watermark %s: idle RSS %s; under 4 publishers of 16 KiB transient messages for %d s (%d published, %.0f MB/s): peak RSS %s, last second %s; connection.blocked %d times",
		mib(limit), mib(idle), seconds, published.Load(), float64(published.Load())*float64(len(body))/float64(seconds)/1e6, mib(peak), mib(plateau), blockedEvents.Load())
	if peak > limit*3/2 {
		t.Errorf("peak RSS %s, more than 1.5 times the watermark %s", mib(peak), mib(limit))
	}
}
