package perf

import (
	"os"
	"testing"
	"time"
)

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
	if ns, err := parseSchedstat([]byte("221639909 13688066 516\n")); err != nil || ns != 221639909 {
		t.Errorf("parseSchedstat = %v, %v; want 221639909ns", ns, err)
	}
	if _, err := parseSchedstat([]byte("12\n")); err == nil {
		t.Error("short schedstat parsed")
	}
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatalf("readProc(self): %v", err)
	}
	if s.CPU < 0 {
		t.Errorf("own CPU %v", s.CPU)
	}
	if _, err := readProc(1 << 30); err == nil {
		t.Error("readProc of a missing pid succeeded")
	}
}

func TestResolvePID(t *testing.T) {
	dir := t.TempDir()
	good, bad := dir+"/good.pid", dir+"/bad.pid"
	if err := os.WriteFile(good, []byte("1234\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("nope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"42", 42, false},
		{good, 1234, false},
		{bad, 0, true},
		{dir + "/missing.pid", 0, true},
	} {
		got, err := ResolvePID(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ResolvePID(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
