package osiris

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"
)

// benchWindow is how many batches one appender keeps in flight, so that
// the writer always finds work queued and group commit has batches to
// take together.
const benchWindow = 64

// BenchmarkStreamAppend measures appending through Submit. An op is one
// message.
func BenchmarkStreamAppend(b *testing.B) {
	type params struct {
		size, batch, appenders int
		fsync                  FsyncPolicy
		window                 int // batches in flight per appender
	}
	var cases []params
	for _, size := range []int{100, 1 << 10} {
		for _, batch := range []int{1, 100, 1000} {
			for _, appenders := range []int{1, 8} {
				cases = append(cases, params{size, batch, appenders, FsyncNone, benchWindow})
			}
		}
	}
	// Group commit amortising fsync: many batches share each sync. With
	// one batch in flight every batch pays for its own sync.
	cases = append(cases,
		params{1 << 10, 100, 8, FsyncAlways, benchWindow},
		params{1 << 10, 100, 1, FsyncAlways, 1})
	for _, p := range cases {
		name := fmt.Sprintf("size=%d/batch=%d/appenders=%d/fsync=%s", p.size, p.batch, p.appenders, p.fsync)
		if p.window != benchWindow {
			name += fmt.Sprintf("/window=%d", p.window)
		}
		b.Run(name, func(b *testing.B) { benchAppend(b, p.size, p.batch, p.appenders, p.window, p.fsync) })
	}
}

// benchAppend appends b.N messages of size bytes in batches of batch from
// appenders goroutines, each with window batches in flight.
func benchAppend(b *testing.B, size, batch, appenders, window int, fsync FsyncPolicy) {
	s, err := Create(b.TempDir(), Config{Fsync: fsync}, Options{RetentionInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	entry := segment.AppendSimpleEntry(nil, bytes.Repeat([]byte{'m'}, size))
	msgs := make([]Message, batch)
	for i := range msgs {
		msgs[i] = Message{Entry: entry}
	}
	var remaining atomic.Int64 // messages not yet submitted
	remaining.Store(int64(b.N))
	take := func() int {
		for {
			r := remaining.Load()
			if r <= 0 {
				return 0
			}
			n := min(r, int64(batch))
			if remaining.CompareAndSwap(r, r-n) {
				return int(n)
			}
		}
	}
	var failure atomic.Pointer[error]
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range appenders {
		wg.Go(func() {
			slots := make(chan struct{}, window)
			var inflight sync.WaitGroup
			for n := take(); n > 0; n = take() {
				slots <- struct{}{}
				inflight.Add(1)
				err := s.Submit(&Batch{Messages: msgs[:n], Done: func(r Result) {
					if r.Err != nil {
						failure.CompareAndSwap(nil, &r.Err)
					}
					<-slots
					inflight.Done()
				}})
				if err != nil {
					failure.CompareAndSwap(nil, &err)
					inflight.Done()
					break
				}
			}
			inflight.Wait()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failure.Load(); err != nil {
		b.Fatal(*err)
	}
	// No tracking, so no roll wrote a tracking snapshot (as Osiris): the
	// offsets are the messages'.
	if st := s.Stats(); st.NextOffset != uint64(b.N) {
		b.Fatalf("next offset %d after %d messages in %d segments", st.NextOffset, b.N, st.Segments)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/float64(batch)/elapsed.Seconds(), "batches/s")
}

// BenchmarkStreamRead measures a sequential read of the whole stream
// through Reader.TryNext and Chunk.ReadData. An op is one pass over
// the stream's chunks.
func BenchmarkStreamRead(b *testing.B) {
	const chunks, perChunk = 1000, 100
	for _, bc := range []struct {
		size      int
		readAhead bool
	}{{100, false}, {100, true}, {1 << 10, false}, {1 << 10, true}} {
		size := bc.size
		b.Run(fmt.Sprintf("chunks=%d/records=%d/size=%d/readahead=%v", chunks, perChunk, size, bc.readAhead), func(b *testing.B) {
			s, err := Create(b.TempDir(), Config{}, Options{RetentionInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			msgs := make([]Message, perChunk)
			for i := range msgs {
				msgs[i] = Message{Entry: segment.AppendSimpleEntry(nil, bytes.Repeat([]byte{'r'}, size))}
			}
			for range chunks {
				// One Append is one writer cycle: one chunk.
				if _, err := s.Append(context.Background(), "", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			if st := s.Stats(); st.LastChunkID != (chunks-1)*perChunk {
				b.Fatalf("stats %+v: want %d chunks of %d records", st, chunks, perChunk)
			}
			var buf []byte
			b.SetBytes(int64(chunks * perChunk * (4 + size)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := s.NewReader(First(), ReaderOptions{ReadAhead: bc.readAhead})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					c, ok, err := r.TryNext()
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
					if buf, err = c.ReadData(buf); err != nil {
						b.Fatal(err)
					}
					n += int(c.Header.NumRecords)
				}
				r.Close()
				// The writer may cut an append into two chunks.
				if n != chunks*perChunk {
					b.Fatalf("read %d records, want %d", n, chunks*perChunk)
				}
			}
			b.ReportMetric(float64(b.N*chunks)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}

// BenchmarkIdleStreams opens idleStreams streams, appends one message to
// each, waits past the idle timeout and reports what an idle stream costs
// (goroutines, open files and heap per stream) and what the first append
// after the idle period costs (resume-µs: restarting the writer and
// reopening the active segment), beside an append to a running writer
// (hot-µs). It makes the same measurement whatever b.N is.
func BenchmarkIdleStreams(b *testing.B) {
	const (
		idleStreams = 2000
		idle        = 200 * time.Millisecond
	)
	for b.Loop() {
		root := b.TempDir()
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		g0, f0 := runtime.NumGoroutine(), processFiles(b)
		streams := openStreams(b, root, idleStreams, idle)
		deadline := time.Now().Add(10 * time.Second)
		for _, s := range streams {
			for writerRunning(s) {
				if time.Now().After(deadline) {
					b.Fatalf("stream %s still running", s.dir)
				}
				time.Sleep(idle / 4)
			}
		}
		time.Sleep(10 * time.Millisecond) // exiting writers return
		runtime.GC()
		runtime.ReadMemStats(&m1)
		g1, f1 := runtime.NumGoroutine(), processFiles(b)
		b.ReportMetric(float64(g1-g0)/idleStreams, "goroutines/stream")
		b.ReportMetric(float64(f1-f0)/idleStreams, "fds/stream")
		b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/idleStreams, "heap-B/stream")

		resume := make([]time.Duration, idleStreams)
		hot := make([]time.Duration, idleStreams)
		for i, s := range streams {
			for j, d := range []*time.Duration{&resume[i], &hot[i]} {
				start := time.Now()
				if _, err := s.Append(context.Background(), "", msg(fmt.Sprint("after-", j))); err != nil {
					b.Fatal(err)
				}
				*d = time.Since(start)
			}
		}
		slices.Sort(resume)
		slices.Sort(hot)
		mean := func(ds []time.Duration) float64 {
			var sum time.Duration
			for _, d := range ds {
				sum += d
			}
			return float64(sum.Microseconds()) / float64(len(ds))
		}
		b.ReportMetric(mean(resume), "resume-µs")
		b.ReportMetric(float64(resume[len(resume)*99/100].Microseconds()), "resume-p99-µs")
		b.ReportMetric(mean(hot), "hot-µs")
		for _, s := range streams {
			s.Close()
		}
	}
}

// processFiles counts this process's open file descriptors.
func processFiles(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}
