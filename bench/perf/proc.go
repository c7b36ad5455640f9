package perf

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's HZ.
const userHZ = 100

// procSample is a process's CPU time and storage writes at one moment.
type procSample struct {
	// CPU is the time the process's threads ran: the sum over
	// /proc/PID/task/*/schedstat (nanoseconds), or, where that cannot be
	// read, utime+stime from /proc/PID/stat (10 ms ticks).
	CPU time.Duration
	// WriteBytes is write_bytes from /proc/PID/io: bytes the process caused
	// to be sent to the storage layer (counted when pages are dirtied).
	// Valid only when HaveIO.
	WriteBytes int64
	// HaveIO is false when /proc/PID/io could not be read (it needs root or
	// the process's own user).
	HaveIO bool
}

// readProc samples process pid. Only a failure to read /proc/PID/stat is
// an error; an unreadable /proc/PID/io leaves HaveIO false.
func readProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("perf: broker pid %d: %w", pid, err)
	}
	if s.CPU, err = parseStatCPU(stat); err != nil {
		return s, fmt.Errorf("perf: /proc/%d/stat: %w", pid, err)
	}
	if cpu, ok := threadsCPU(pid); ok {
		s.CPU = cpu
	}
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		if wb, err := parseIOWriteBytes(io); err == nil {
			s.WriteBytes, s.HaveIO = wb, true
		}
	}
	return s, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/PID/stat. The
// second field, the command in parentheses, may hold spaces and ')', so the
// fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' in stat")
	}
	// After ')': state (field 3), ppid, ..., utime (field 14), stime (15).
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the command, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(string(f[11]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(string(f[12]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// threadsCPU sums the run time of pid's threads from
// /proc/PID/task/*/schedstat, whose first field is nanoseconds on the
// CPU. utime+stime in /proc/PID/stat come in 10 ms ticks, which a run of
// a second or two of a broker's CPU cannot afford. Threads that exited
// are not in the sum (stat counts them), so a run must not span thread
// exits: Go's and the BEAM's threads live as long as the process. ok is
// false when the threads cannot be read.
func threadsCPU(pid int) (cpu time.Duration, ok bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread exited meanwhile
			}
			return 0, false
		}
		ns, err := parseSchedstat(b)
		if err != nil {
			return 0, false
		}
		cpu += ns
	}
	return cpu, true
}

// parseSchedstat returns the first field of a schedstat file: the time
// on the CPU in nanoseconds.
func parseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", b)
	}
	ns, err := strconv.ParseUint(string(f[0]), 10, 63)
	if err != nil {
		return 0, fmt.Errorf("schedstat: %w", err)
	}
	return time.Duration(ns), nil
}

// parseIOWriteBytes returns write_bytes from the contents of /proc/PID/io.
func parseIOWriteBytes(io []byte) (int64, error) {
	for line := range bytes.Lines(io) {
		v, ok := bytes.CutPrefix(line, []byte("write_bytes:"))
		if !ok {
			continue
		}
		return strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
	}
	return 0, errors.New("no write_bytes line")
}

// readPIDFile reads a process id from a pid file (such as RabbitMQ's
// rabbit.pid).
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid < 1 {
		return 0, fmt.Errorf("%s: no process id in %q", path, bytes.TrimSpace(b))
	}
	return pid, nil
}
