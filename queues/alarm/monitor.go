package alarm

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// RabbitMQ's defaults (deps/rabbit/Makefile): the memory high watermark
// at 0.6 of the memory, the free disk limit at 50 MB.
const (
	DefaultMemoryRelative   = 0.6
	DefaultDiskFreeAbsolute = 50_000_000
)

// unknownTotalMemory is what RabbitMQ assumes when it cannot read the
// total memory (MEMORY_SIZE_FOR_UNKNOWN_OS).
const unknownTotalMemory = 1 << 30

// Limits say where the alarms go off; zero fields take RabbitMQ's
// defaults.
type Limits struct {
	// MemoryRelative is vm_memory_high_watermark.relative: the fraction
	// of the total memory (the machine's, or its cgroup's limit when
	// lower) the process may use (default 0.6, at most 1).
	MemoryRelative float64
	// MemoryAbsolute is vm_memory_high_watermark.absolute in bytes; it
	// wins over MemoryRelative, and is capped at the total memory, as in
	// RabbitMQ.
	MemoryAbsolute uint64
	// DiskFreeAbsolute is disk_free_limit.absolute in bytes (default 50
	// MB); it wins over DiskFreeRelative.
	DiskFreeAbsolute uint64
	// DiskFreeRelative is disk_free_limit.relative: the limit as a
	// multiple of the total memory.
	DiskFreeRelative float64
}

// Config configures a Monitor. Zero fields take the defaults: the real
// readings of this process and of DataDir's file system.
type Config struct {
	Limits Limits
	// DataDir is the directory whose file system's free space is
	// watched.
	DataDir string
	// ReadMemory returns the memory the process uses (default: its
	// resident set, ResidentMemory).
	ReadMemory func() (uint64, error)
	// ReadDiskFree returns the free bytes on DataDir's file system
	// available to the process (default: statfs's Bavail).
	ReadDiskFree func() (uint64, error)
	// TotalMemory returns the memory relative limits are fractions of
	// (default: TotalMemory, the machine's or the cgroup's limit).
	TotalMemory func() (uint64, error)
	// MemoryInterval is how often memory is read (default 100 ms;
	// RabbitMQ reads every second, which lets a fast publisher add
	// hundreds of megabytes between two readings).
	MemoryInterval time.Duration
	// DiskMinInterval and DiskMaxInterval bound how often the free disk
	// space is read: the closer to the limit, the more often, as in
	// RabbitMQ's disk monitor (defaults 100 ms and 5 s).
	DiskMinInterval, DiskMaxInterval time.Duration
	// DiskFillRate is the write rate, in bytes per second, the disk
	// interval assumes: the free space is read again before a writer at
	// this rate could use half of what is left above the limit (default
	// 1 GB/s; RabbitMQ assumes 250 MB/s, which Warren's stream writes
	// can exceed).
	DiskFillRate float64
	// Reclaim, if set, is called when memory reads above the watermark,
	// at most once per ReclaimInterval (default 1 s), before the memory
	// is read again and the alarm decided: the daemon's returns garbage
	// to the OS (debug.FreeOSMemory), so that memory the collector has
	// not yet reclaimed neither raises the alarm nor holds it on.
	Reclaim         func()
	ReclaimInterval time.Duration
	Logger          *slog.Logger
}

func (c Config) ensureDefaults() Config {
	if c.Limits.MemoryRelative == 0 {
		c.Limits.MemoryRelative = DefaultMemoryRelative
	}
	if c.Limits.DiskFreeAbsolute == 0 && c.Limits.DiskFreeRelative == 0 {
		c.Limits.DiskFreeAbsolute = DefaultDiskFreeAbsolute
	}
	if c.ReadMemory == nil {
		c.ReadMemory = ResidentMemory
	}
	if c.ReadDiskFree == nil {
		dir := c.DataDir
		c.ReadDiskFree = func() (uint64, error) { return DiskFree(dir) }
	}
	if c.TotalMemory == nil {
		c.TotalMemory = TotalMemory
	}
	if c.MemoryInterval <= 0 {
		c.MemoryInterval = 100 * time.Millisecond
	}
	if c.DiskMinInterval <= 0 {
		c.DiskMinInterval = 100 * time.Millisecond
	}
	if c.DiskMaxInterval <= 0 {
		c.DiskMaxInterval = 5 * time.Second
	}
	if c.DiskFillRate <= 0 {
		c.DiskFillRate = 1e9
	}
	if c.ReclaimInterval <= 0 {
		c.ReclaimInterval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Monitor reads memory and free disk space and sets a Set's alarms.
type Monitor struct {
	set                 *Set
	cfg                 Config
	memLimit, diskLimit uint64
	stop                chan struct{}
	done                chan struct{}
	kick                chan struct{} // Check ran: re-arm the disk timer
	mu                  sync.Mutex    // serialises checks (the loop and Check)
	lastReclaim         time.Time     // under mu
}

// Start computes the limits, takes a first reading and starts
// monitoring; Stop ends it. The error is about the limits: a relative
// one out of range.
func Start(s *Set, cfg Config) (*Monitor, error) {
	cfg = cfg.ensureDefaults()
	m := &Monitor{set: s, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	l := cfg.Limits
	if l.MemoryRelative < 0 || l.MemoryRelative > 1 || l.DiskFreeRelative < 0 {
		return nil, fmt.Errorf("alarm: relative limits out of range: memory %g (0-1), disk %g (≥ 0)", l.MemoryRelative, l.DiskFreeRelative)
	}
	total, err := cfg.TotalMemory()
	if err != nil {
		// As RabbitMQ on an OS whose memory it cannot read: assume
		// 1 GiB and say so.
		total = unknownTotalMemory
		cfg.Logger.Warn("cannot read the total memory: assuming 1 GiB; set vm_memory_high_watermark.absolute", "err", err)
	}
	m.memLimit = uint64(l.MemoryRelative * float64(total))
	if l.MemoryAbsolute > 0 {
		m.memLimit = min(l.MemoryAbsolute, total)
	}
	m.diskLimit = l.DiskFreeAbsolute
	if m.diskLimit == 0 {
		m.diskLimit = uint64(l.DiskFreeRelative*float64(total) + 0.5)
	}
	s.memLimit.Store(m.memLimit)
	s.diskLimit.Store(m.diskLimit)
	cfg.Logger.Info("memory high watermark set", "limit_bytes", m.memLimit, "total_bytes", total)
	cfg.Logger.Info("disk free limit set", "limit_bytes", m.diskLimit, "dir", cfg.DataDir)
	m.checkMemory()
	diskWait := m.checkDisk()
	go m.loop(diskWait)
	return m, nil
}

// MemoryLimit and DiskFreeLimit return the limits in bytes.
func (m *Monitor) MemoryLimit() uint64   { return m.memLimit }
func (m *Monitor) DiskFreeLimit() uint64 { return m.diskLimit }

// Check reads memory and disk now and sets the alarms, as the next
// tick would (for tests with injected readings, and after a change that
// should not wait for the interval).
func (m *Monitor) Check() {
	m.checkMemory()
	m.checkDisk()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Stop ends the monitoring and waits for it; the alarms stay as they
// are. It is idempotent.
func (m *Monitor) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

func (m *Monitor) loop(diskWait time.Duration) {
	defer close(m.done)
	memT := time.NewTicker(m.cfg.MemoryInterval)
	defer memT.Stop()
	diskT := time.NewTimer(diskWait)
	defer diskT.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-memT.C:
			m.checkMemory()
		case <-diskT.C:
			diskT.Reset(m.checkDisk())
		case <-m.kick:
			diskT.Reset(m.diskInterval(m.set.diskFree.Load()))
		}
	}
}

// checkMemory sets the memory alarm when the process uses more than the
// watermark (vm_memory_monitor:internal_update) and clears it at or
// below.
func (m *Monitor) checkMemory() {
	m.mu.Lock()
	defer m.mu.Unlock()
	used, err := m.cfg.ReadMemory()
	if err == nil && used > m.memLimit && m.cfg.Reclaim != nil && time.Since(m.lastReclaim) >= m.cfg.ReclaimInterval {
		m.lastReclaim = time.Now()
		m.cfg.Reclaim()
		used, err = m.cfg.ReadMemory()
	}
	if err != nil {
		m.cfg.Logger.Warn("memory monitor: cannot read the memory in use", "err", err)
		return
	}
	m.set.memUsed.Store(used)
	on := used > m.memLimit
	if m.set.Set(Memory, on) {
		if on {
			m.cfg.Logger.Warn("memory resource limit alarm set: publishers are blocked", "used_bytes", used, "limit_bytes", m.memLimit)
		} else {
			m.cfg.Logger.Info("memory resource limit alarm cleared", "used_bytes", used, "limit_bytes", m.memLimit)
		}
	}
}

// checkDisk sets the disk alarm when the free space is below the limit
// (rabbit_disk_monitor:internal_update) and returns when to read again.
// A failed reading raises no alarm, as in RabbitMQ.
func (m *Monitor) checkDisk() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	free, err := m.cfg.ReadDiskFree()
	if err != nil {
		m.cfg.Logger.Warn("disk monitor: cannot read the free disk space", "dir", m.cfg.DataDir, "err", err)
		return m.cfg.DiskMaxInterval
	}
	m.set.diskFree.Store(free)
	on := free < m.diskLimit
	if m.set.Set(Disk, on) {
		if on {
			m.cfg.Logger.Warn("disk resource limit alarm set: publishers are blocked", "free_bytes", free, "limit_bytes", m.diskLimit)
		} else {
			m.cfg.Logger.Info("disk resource limit alarm cleared", "free_bytes", free, "limit_bytes", m.diskLimit)
		}
	}
	return m.diskInterval(free)
}

// diskInterval is RabbitMQ's: long enough for a writer at the assumed
// rate to use half the space left above the limit, within the bounds.
// Unlike RabbitMQ (its maximum, 10 s, while alarmed), it applies below
// the limit too, so the alarm clears soon after space is freed.
func (m *Monitor) diskInterval(free uint64) time.Duration {
	var gap float64
	if free > m.diskLimit {
		gap = float64(free - m.diskLimit)
	} else {
		gap = float64(m.diskLimit - free)
	}
	d := time.Duration(gap / 2 / m.cfg.DiskFillRate * float64(time.Second))
	return max(m.cfg.DiskMinInterval, min(m.cfg.DiskMaxInterval, d))
}

// DiskFree returns the bytes of dir's file system available to
// unprivileged writers.
func DiskFree(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
