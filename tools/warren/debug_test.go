package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Ensure the debug listener serves the profile index and a goroutine
// profile, 404s anything else, and stops accepting when stopped.
func TestServeDebug(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveDebug(ln, slog.New(slog.DiscardHandler))
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get("/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("index: %d %.200q", code, body)
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile: total") {
		t.Fatalf("goroutine profile: %d %.200q", code, body)
	}
	if code, _ := get("/metrics"); code != 404 {
		t.Fatalf("/metrics: %d, want 404", code)
	}
	stop()
	http.DefaultClient.CloseIdleConnections()
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("still accepting after stop")
	}
}
