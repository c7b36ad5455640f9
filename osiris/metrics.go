package osiris

import (
	"sync/atomic"
	"time"
)

// Metrics are process-wide counters of every stream and queue log, for
// the Prometheus endpoint's warren_ metrics. The writer goroutines count
// once per write, sync or segment deletion (never per message, bar the
// rare duplicate), so counting costs a few atomic adds per batch.
var Metrics LogMetrics

// ChunkSizeBuckets are the upper bounds of the chunk size histogram,
// bytes (a chunk's data, without its header).
var ChunkSizeBuckets = [...]float64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}

// SyncBuckets are the upper bounds of the fsync latency histogram,
// seconds.
var SyncBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// LogMetrics are the counters behind Metrics.
type LogMetrics struct {
	BytesWritten  atomic.Uint64 // chunk headers and data appended to segment files
	ChunksWritten atomic.Uint64
	// ChunkSizes counts chunks by ChunkSizeBuckets (the last slot is
	// above them all); ChunkBytes is the sum of their data lengths.
	ChunkSizes [len(ChunkSizeBuckets) + 1]atomic.Uint64
	ChunkBytes atomic.Uint64

	// Syncs counts fsyncs of segment files by SyncBuckets; SyncNanos is
	// their total time.
	Syncs     [len(SyncBuckets) + 1]atomic.Uint64
	SyncNanos atomic.Uint64

	RetentionSegments atomic.Uint64 // segments deleted by retention
	RetentionBytes    atomic.Uint64 // their bytes
	Duplicates        atomic.Uint64 // publishes dropped by deduplication
}

func (m *LogMetrics) chunk(dataLen uint32) {
	i := 0
	for i < len(ChunkSizeBuckets) && float64(dataLen) > ChunkSizeBuckets[i] {
		i++
	}
	m.ChunkSizes[i].Add(1)
	m.ChunkBytes.Add(uint64(dataLen))
}

func (m *LogMetrics) synced(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(SyncBuckets) && s > SyncBuckets[i] {
		i++
	}
	m.Syncs[i].Add(1)
	m.SyncNanos.Add(uint64(d))
}
