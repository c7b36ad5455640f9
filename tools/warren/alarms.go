package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
)

// startAlarms starts the memory and disk monitors on the broker's
// alarms (vm_memory_high_watermark.*, disk_free_limit.*).
//
// Garbage the collector has not reclaimed yet should not block
// publishers: above the watermark the monitor first has the runtime
// collect and return freed memory to the OS (debug.FreeOSMemory, at most
// once a second), and, unless GOMEMLIMIT is set, the runtime's soft
// memory limit is 90% of the watermark (the rest for the binary's own
// pages, which the limit does not count), so the collector works harder
// as the heap nears the watermark. Far below it this changes nothing.
// stop ends the monitors and restores the limit.
func startAlarms(b *queues.Broker, cfg Config, logger *slog.Logger) (stop func(), err error) {
	m, err := alarm.Start(b.Alarms(), alarm.Config{Limits: cfg.Alarms, DataDir: cfg.DataDir, Logger: logger, Reclaim: debug.FreeOSMemory})
	if err != nil {
		return nil, err
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return m.Stop, nil
	}
	prev := debug.SetMemoryLimit(int64(m.MemoryLimit() / 10 * 9))
	return func() {
		m.Stop()
		debug.SetMemoryLimit(prev)
	}, nil
}
