package perf

import (
	"fmt"
	"strconv"
	"time"
)

// BrokerUsage is what the broker process spent during a run, from
// /proc/PID/task/*/schedstat, /proc/PID/stat and /proc/PID/io (see readProc).
type BrokerUsage struct {
	PID int           `json:"pid"`
	CPU time.Duration `json:"cpu_ns"`
	// CPUPerMessage is CPU per published message, or per consumed
	// message in a consume-only run (a replay).
	CPUPerMessage time.Duration `json:"cpu_per_msg_ns"`
	WriteBytes    int64         `json:"write_bytes"`
	// WriteBytesPerByte is WriteBytes per published body byte (for a
	// fan-out, all queues' copies against one published byte).
	WriteBytesPerByte float64 `json:"write_bytes_per_byte"`
	HaveIO            bool    `json:"have_io"`
}

// ResolvePID returns the process id in s, which is a number or the path of
// a pid file (such as RabbitMQ's rabbit.pid); "" gives 0.
func ResolvePID(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
		return pid, nil
	}
	pid, err := readPIDFile(s)
	if err != nil {
		return 0, fmt.Errorf("perf: broker pid %q: %w", s, err)
	}
	return pid, nil
}

// brokerProbe samples a broker process before and after a run.
type brokerProbe struct {
	pid    int
	before procSample
}

// startProbe samples pid (0: no probe, nil result).
func startProbe(pid int) (*brokerProbe, error) {
	if pid <= 0 {
		return nil, nil
	}
	s, err := readProc(pid)
	if err != nil {
		return nil, err
	}
	return &brokerProbe{pid: pid, before: s}, nil
}

// finish samples again and returns the usage for published messages of
// size bytes (consumed ones when none were published), or nil when the
// process can no longer be read.
func (p *brokerProbe) finish(published, consumed int64, size int) *BrokerUsage {
	if p == nil {
		return nil
	}
	after, err := readProc(p.pid)
	if err != nil {
		return nil
	}
	u := &BrokerUsage{PID: p.pid, CPU: after.CPU - p.before.CPU}
	switch {
	case published > 0:
		u.CPUPerMessage = u.CPU / time.Duration(published)
	case consumed > 0:
		u.CPUPerMessage = u.CPU / time.Duration(consumed)
	}
	if p.before.HaveIO && after.HaveIO {
		u.HaveIO = true
		u.WriteBytes = after.WriteBytes - p.before.WriteBytes
		if published > 0 && size > 0 {
			u.WriteBytesPerByte = float64(u.WriteBytes) / float64(published*int64(size))
		}
	}
	return u
}
