package alarm

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Ensure the reasons and resource names are RabbitMQ's texts.
func TestTexts(t *testing.T) {
	for _, tc := range []struct {
		r              Resource
		reason, String string
	}{
		{Memory, "low on memory", "memory"},
		{Disk, "low on disk", "disk space"},
		{Memory | Disk, "low on memory & disk", "unknown"},
	} {
		if got := tc.r.BlockedReason(); got != tc.reason {
			t.Errorf("%d: reason %q, want %q", tc.r, got, tc.reason)
		}
		if got := tc.r.String(); got != tc.String {
			t.Errorf("%d: String %q, want %q", tc.r, got, tc.String)
		}
	}
}

// Ensure Set reports changes only, wakes Changed waiters on each, and
// Wait returns once every alarm has cleared or stop closes.
func TestSet(t *testing.T) {
	var s Set
	if s.Active() != 0 {
		t.Fatal("zero Set has an alarm")
	}
	ch := s.Changed()
	if !s.Set(Memory, true) || s.Set(Memory, true) {
		t.Fatal("Set reports no change, or a change twice")
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a change")
	}
	s.Set(Disk, true)
	if s.Active() != Memory|Disk {
		t.Fatalf("active %b", s.Active())
	}
	done := make(chan bool)
	go func() { done <- s.Wait(nil) }()
	s.Set(Memory, false)
	select {
	case <-done:
		t.Fatal("Wait returned with the disk alarm on")
	case <-time.After(20 * time.Millisecond):
	}
	s.Set(Disk, false)
	if !<-done {
		t.Fatal("Wait returned false")
	}
	s.Set(Disk, true)
	stop := make(chan struct{})
	close(stop)
	if s.Wait(stop) {
		t.Fatal("Wait returned true with an alarm on")
	}
}

// fake is an injectable reading.
type fake struct{ v atomic.Uint64 }

func (f *fake) read() (uint64, error) { return f.v.Load(), nil }

// Ensure a Monitor computes its limits as RabbitMQ does, raises the
// memory alarm above the watermark and the disk alarm below the limit,
// and clears both when the readings come back.
func TestMonitor(t *testing.T) {
	var mem, disk fake
	total := func() (uint64, error) { return 1000 << 20, nil }
	mem.v.Store(100 << 20)
	disk.v.Store(1 << 30)
	var s Set
	m, err := Start(&s, Config{ReadMemory: mem.read, ReadDiskFree: disk.read, TotalMemory: total, MemoryInterval: time.Hour, DiskMaxInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if m.MemoryLimit() != 600<<20 || m.DiskFreeLimit() != 50_000_000 {
		t.Fatalf("default limits %d, %d", m.MemoryLimit(), m.DiskFreeLimit())
	}
	if s.Active() != 0 {
		t.Fatalf("alarm %b at start", s.Active())
	}
	mem.v.Store(600<<20 + 1)
	m.Check()
	if s.Active() != Memory {
		t.Fatalf("above the watermark: %b", s.Active())
	}
	disk.v.Store(50_000_000 - 1)
	m.Check()
	if s.Active() != Memory|Disk {
		t.Fatalf("below the disk limit: %b", s.Active())
	}
	if r := s.Readings(); r != (Readings{MemUsed: 600<<20 + 1, MemLimit: 600 << 20, DiskFree: 50_000_000 - 1, DiskLimit: 50_000_000}) {
		t.Fatalf("readings %+v", r)
	}
	mem.v.Store(600 << 20) // at the watermark: not above
	disk.v.Store(50_000_000)
	m.Check()
	if s.Active() != 0 {
		t.Fatalf("back at the limits: %b", s.Active())
	}

	for _, tc := range []struct {
		l                Limits
		memLimit, diskLt uint64
	}{
		{Limits{MemoryAbsolute: 2 << 30}, 1000 << 20, 50_000_000}, // capped at the total
		{Limits{MemoryAbsolute: 64 << 20, MemoryRelative: 0.9}, 64 << 20, 50_000_000},
		{Limits{MemoryRelative: 0.4, DiskFreeRelative: 1.5}, 400 << 20, 1500 << 20},
		{Limits{DiskFreeAbsolute: 1 << 30, DiskFreeRelative: 2}, 600 << 20, 1 << 30},
	} {
		m, err := Start(&Set{}, Config{Limits: tc.l, ReadMemory: mem.read, ReadDiskFree: disk.read, TotalMemory: total})
		if err != nil {
			t.Fatal(err)
		}
		m.Stop()
		if m.MemoryLimit() != tc.memLimit || m.DiskFreeLimit() != tc.diskLt {
			t.Errorf("%+v: limits %d, %d; want %d, %d", tc.l, m.MemoryLimit(), m.DiskFreeLimit(), tc.memLimit, tc.diskLt)
		}
	}
	if _, err := Start(&Set{}, Config{Limits: Limits{MemoryRelative: 1.5}, TotalMemory: total}); err == nil {
		t.Error("relative 1.5 accepted")
	}
	// An unreadable total memory is taken as 1 GiB, as RabbitMQ does.
	m, err = Start(&Set{}, Config{ReadMemory: mem.read, ReadDiskFree: disk.read, TotalMemory: func() (uint64, error) { return 0, errors.New("no") }})
	if err != nil {
		t.Fatal(err)
	}
	m.Stop()
	if m.MemoryLimit() != 644_245_094 { // 0.6 GiB
		t.Errorf("limit with an unknown total: %d", m.MemoryLimit())
	}
}

// Ensure the monitor's own loop raises and clears alarms from changed
// readings, without Check.
func TestMonitorLoop(t *testing.T) {
	var mem, disk fake
	disk.v.Store(1 << 40)
	var s Set
	m, err := Start(&s, Config{Limits: Limits{MemoryAbsolute: 1000}, ReadMemory: mem.read, ReadDiskFree: disk.read,
		TotalMemory: func() (uint64, error) { return 1 << 30, nil }, MemoryInterval: time.Millisecond, DiskMinInterval: time.Millisecond, DiskMaxInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	waitFor := func(want Resource) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for s.Active() != want {
			if time.Now().After(deadline) {
				t.Fatalf("alarms %b, want %b", s.Active(), want)
			}
			<-time.After(time.Millisecond)
		}
	}
	mem.v.Store(1001)
	waitFor(Memory)
	disk.v.Store(0)
	waitFor(Memory | Disk)
	mem.v.Store(0)
	disk.v.Store(1 << 40)
	waitFor(0)
}

// Ensure the disk is read more often the closer it is to the limit,
// within the bounds.
func TestDiskInterval(t *testing.T) {
	m := &Monitor{cfg: Config{}.ensureDefaults(), diskLimit: 50_000_000}
	for _, tc := range []struct {
		free uint64
		want time.Duration
	}{
		{1 << 40, 5 * time.Second},                 // far: the maximum
		{50_000_000 + 2e9, time.Second},            // 2 GB above at 1 GB/s: half of 2 s
		{50_000_000 + 1e6, 100 * time.Millisecond}, // close: the minimum
		{0, 100 * time.Millisecond},
	} {
		if got := m.diskInterval(tc.free); got != tc.want {
			t.Errorf("free %d: interval %v, want %v", tc.free, got, tc.want)
		}
	}
}

// Ensure the total memory is the cgroup's limit when lower than the
// machine's, for cgroup v2 (the process's cgroup or a parent) and v1,
// and the machine's when the cgroup has none.
func TestTotalMemory(t *testing.T) {
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, selfCgroup string
		files            map[string]string
		want             uint64
	}{
		{"no cgroup files", "0::/a\n", nil, 8 << 30},
		{"v2 unlimited", "0::/a\n", map[string]string{"a/memory.max": "max\n"}, 8 << 30},
		{"v2 own", "0::/a/b\n", map[string]string{"a/b/memory.max": "1073741824\n", "a/memory.max": "max\n"}, 1 << 30},
		{"v2 parent", "0::/a/b\n", map[string]string{"a/b/memory.max": "max\n", "a/memory.max": "2147483648\n"}, 2 << 30},
		{"v2 above machine", "0::/a\n", map[string]string{"a/memory.max": "17179869184\n"}, 8 << 30},
		{"v2 namespaced root", "0::/\n", map[string]string{"memory.max": "536870912\n"}, 512 << 20},
		{"v1", "4:memory:/x/y\n1:cpu:/\n0::/\n", map[string]string{"memory/x/y/memory.limit_in_bytes": "3221225472\n"}, 3 << 30},
		{"v1 unlimited", "4:cpuacct,memory:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "9223372036854771712\n"}, 8 << 30},
		{"v1 container root", "4:memory:/docker/abc\n", map[string]string{"memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup")
			write(filepath.Join(proc, "meminfo"), "MemFree:  1 kB\nMemTotal:       8388608 kB\n")
			write(filepath.Join(proc, "self", "cgroup"), tc.selfCgroup)
			for p, d := range tc.files {
				write(filepath.Join(cg, p), d)
			}
			got, err := totalMemory(proc, cg)
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if n, err := TotalMemory(); err != nil || n == 0 {
		t.Fatalf("this machine: %d, %v", n, err)
	}
	if n, err := ResidentMemory(); err != nil || n == 0 {
		t.Fatalf("resident memory: %d, %v", n, err)
	}
}

// Ensure a reading above the watermark first reclaims and reads again,
// so memory the reclaim frees raises no alarm, and that reclaims are
// rate-limited while memory stays above.
func TestMonitorReclaim(t *testing.T) {
	var mem fake
	reclaims := 0
	var freed uint64
	var s Set
	m, err := Start(&s, Config{Limits: Limits{MemoryAbsolute: 1000}, ReadMemory: mem.read, ReadDiskFree: func() (uint64, error) { return 1 << 40, nil },
		TotalMemory: func() (uint64, error) { return 1 << 30, nil }, MemoryInterval: time.Hour, DiskMaxInterval: time.Hour,
		Reclaim: func() { reclaims++; mem.v.Add(^(freed - 1)) }, ReclaimInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	mem.v.Store(1500)
	freed = 600 // garbage: the reclaim brings it under the watermark
	m.Check()
	if s.Active() != 0 || reclaims != 1 || s.Readings().MemUsed != 900 {
		t.Fatalf("alarm %b after %d reclaims, used %d", s.Active(), reclaims, s.Readings().MemUsed)
	}
	mem.v.Store(1500)
	m.Check() // within the reclaim interval: no reclaim, the alarm goes on
	if s.Active() != Memory || reclaims != 1 {
		t.Fatalf("alarm %b after %d reclaims", s.Active(), reclaims)
	}
}
