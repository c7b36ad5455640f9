package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure the daemon serves on its listener, refuses a second start on the
// same data directory, and stops cleanly when its context ends.
func TestRunLockAndShutdown(t *testing.T) {
	dir := t.TempDir()
	cfg := defaults()
	cfg.DataDir = dir
	cfg.StreamListen = "127.0.0.1:0"
	cfg.AMQPListen = "127.0.0.1:0"
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan readyAddrs, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, logger, ready) }()
	var addrs readyAddrs
	select {
	case addrs = <-ready:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	for _, addr := range []net.Addr{addrs.Stream, addrs.AMQP} {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatalf("dial %v: %v", addr, err)
		}
		c.Close()
	}

	err := run(context.Background(), cfg, logger, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another Warren") {
		t.Fatalf("second run on the same data dir: %v", err)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no clean shutdown")
	}
	if _, err := net.Dial("tcp", addrs.AMQP.String()); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

// Ensure a config file supplies values and explicit flags override it.
func TestParseFlagsConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warren.json")
	os.WriteFile(path, []byte(`{"data_dir":"/from/file","stream_listen":":6000","heartbeat":5}`), 0o644)
	cfg, err := parseFlags([]string{"-config", path, "-stream-listen", ":7000"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/file" || cfg.StreamListen != ":7000" || cfg.Heartbeat != 5 || cfg.AMQPListen != ":5672" {
		t.Fatalf("config %+v", cfg)
	}
	cfg, err = parseFlags(nil)
	if err != nil || cfg.DataDir != "warren-data" || cfg.StreamListen != ":5552" {
		t.Fatalf("defaults %+v %v", cfg, err)
	}
	if _, err := parseFlags([]string{"-config", "/does/not/exist"}); err == nil {
		t.Fatal("missing config file accepted")
	}
}
