package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ensure the CLI rejects bad usage with status 2 and reports from files.
func TestRunUsageAndReport(t *testing.T) {
	var out, errb bytes.Buffer
	if got := run(nil, &out, &errb); got != 2 {
		t.Errorf("no mode: status %d, want 2", got)
	}
	if got := run([]string{"bogus"}, &out, &errb); got != 2 {
		t.Errorf("unknown mode: status %d, want 2", got)
	}
	if got := run([]string{"stream", "-no-such-flag"}, &out, &errb); got != 2 {
		t.Errorf("unknown flag: status %d, want 2", got)
	}
	if got := run([]string{"stream", "-producers", "0", "-consumers", "0", "-count", "1"}, &out, &errb); got != 1 ||
		!strings.Contains(errb.String(), "no producers and no consumers") {
		t.Errorf("invalid config: status %d, stderr %q", got, errb.String())
	}
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	if got := run([]string{"stream", "-cpuprofile", prof, "-producers", "0", "-consumers", "0"}, &out, &errb); got != 1 {
		t.Errorf("invalid config with -cpuprofile: status %d, want 1", got)
	}
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("-cpuprofile wrote %d bytes (err %v), want a gzipped profile", len(b), err)
	}
	if got := run([]string{"stream", "-cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir")}, &out, &errb); got != 1 {
		t.Errorf("-cpuprofile into a missing directory: status %d, want 1", got)
	}
	f := filepath.Join(t.TempDir(), "r.jsonl")
	lines := `{"labels":{"scenario":"s","target":"warren"},"metrics":{"publish_rate":10}}
{"labels":{"scenario":"s","target":"rabbitmq"},"metrics":{"publish_rate":5}}
{"labels":{"scenario":"s","target":"rabbitmq"},"metrics":{"publish_rate":1},"error":"failed runs are left out"}
`
	if err := os.WriteFile(f, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if got := run([]string{"report", f}, &out, &errb); got != 0 {
		t.Fatalf("report: status %d, stderr %q", got, errb.String())
	}
	if !strings.Contains(out.String(), "| publish_rate | 10.0 (n=1) | 5 (n=1) | 2.00x |") {
		t.Errorf("report:\n%s", out.String())
	}
}
