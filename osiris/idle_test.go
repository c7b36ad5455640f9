package osiris

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warren-mq/warren/segment"
)

// Idle tests: an idle stream has no writer goroutine and no open file,
// and resumes where it stopped.

// writerRunning reports whether the writer role is held.
func writerRunning(s *Stream) bool {
	s.q.Lock()
	defer s.q.Unlock()
	return s.q.running
}

// openFiles counts this process's open files inside dir.
func openFiles(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// writerGoroutines counts the goroutines labelled as the writer of the
// stream in dir (see startWriter), from the goroutine profile.
func writerGoroutines(t testing.TB, dir string) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	label := `"osiris-writer":` + strconv.Quote(dir)
	// Blocks start with "<count> @ <pcs>"; labels follow on "# labels:".
	n, count := 0, 0
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if c, rest, ok := strings.Cut(line, " @ "); ok && rest != "" {
			count, _ = strconv.Atoi(c)
		} else if strings.HasPrefix(line, "# labels:") && strings.Contains(line, label) {
			n += count
		}
	}
	return n
}

// checkIdle fails unless s has no writer and no open file.
func checkIdle(t *testing.T, s *Stream, when string) {
	t.Helper()
	if writerRunning(s) {
		t.Fatalf("%s: the writer role is held", when)
	}
	if n := writerGoroutines(t, s.dir); n != 0 {
		t.Fatalf("%s: %d writer goroutines", when, n)
	}
	if n := openFiles(t, s.dir); n != 0 {
		t.Fatalf("%s: %d files open in the stream directory", when, n)
	}
}

// checkBusy fails unless s has its writer goroutine and the active
// segment's two files open.
func checkBusy(t *testing.T, s *Stream, when string) {
	t.Helper()
	if n := writerGoroutines(t, s.dir); n != 1 {
		t.Fatalf("%s: %d writer goroutines, want 1", when, n)
	}
	if n := openFiles(t, s.dir); n != 2 {
		t.Fatalf("%s: %d files open, want the active segment's 2", when, n)
	}
}

// Ensure a stream is idle when opened, runs its writer while written to,
// goes idle after IdleTimeout without losing its place, resumes without
// recovery, and reads back and reopens the same.
func TestIdleSuspendResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		opts := Options{IdleTimeout: time.Second, RetentionInterval: -1}
		s, err := Create(dir, Config{MaxSegmentSize: 8192}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		checkIdle(t, s, "after create")

		fill(t, s, "a", 40, 500) // rolls: several segments
		if s.Stats().Segments < 2 {
			t.Fatalf("%d segments, want several", s.Stats().Segments)
		}
		checkBusy(t, s, "after appends")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		checkBusy(t, s, "within IdleTimeout")
		time.Sleep(2 * time.Second) // idle for between 1 and 2 IdleTimeouts
		synctest.Wait()
		checkIdle(t, s, "after IdleTimeout")
		if got := s.idles.Load(); got != 1 {
			t.Fatalf("went idle %d times, want 1", got)
		}
		before := s.Stats()

		// Reading an idle stream opens what it reads and closes it after.
		if got := readAll(t, s, First(), ReaderOptions{}); len(got) != 40 {
			t.Fatalf("read %d records while idle, want 40", len(got))
		}
		checkIdle(t, s, "after reading")

		// Resume: the append goes on at the next offset (after the
		// snapshot of a new segment if it rolled).
		r := mustAppend(t, s, "p", Message{Entry: msg("b-0").Entry, PublishingID: 1})
		if rolled := s.Stats().Segments > before.Segments; r.LastOffset != before.NextOffset && (!rolled || r.LastOffset != before.NextOffset+1) {
			t.Fatalf("resumed append at %d, want %d (rolled %v)", r.LastOffset, before.NextOffset, rolled)
		}
		checkBusy(t, s, "after resume")
		fill(t, s, "c", 20, 500)
		if err := s.StoreOffset("consumer", 7); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		checkIdle(t, s, "second idle")

		// Deduplication state survived the idle period.
		if r := mustAppend(t, s, "p", Message{Entry: msg("dup").Entry, PublishingID: 1}); r.Duplicates != 1 {
			t.Fatalf("after idle: %+v, want the duplicate dropped", r)
		}
		want := bodies(readAll(t, s, First(), ReaderOptions{}))
		if len(want) != 61 {
			t.Fatalf("read %d records, want 61", len(want))
		}
		wantStats := s.Stats()
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if n := openFiles(t, dir); n != 0 {
			t.Fatalf("%d files open after Close", n)
		}

		s2, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		checkIdle(t, s2, "after open")
		if got := bodies(readAll(t, s2, First(), ReaderOptions{})); !slices.Equal(got, want) {
			t.Fatalf("after reopen: %d records, want %d", len(got), len(want))
		}
		if st := s2.Stats(); st.NextOffset != wantStats.NextOffset || st.Segments != wantStats.Segments {
			t.Fatalf("after reopen: %+v, want %+v", st, wantStats)
		}
		if o, ok := s2.QueryOffset("consumer"); !ok || o != 7 {
			t.Fatalf("QueryOffset after reopen = %d, %v", o, ok)
		}
		if seq := s2.PublisherSequence("p"); seq != 1 {
			t.Fatalf("PublisherSequence after reopen = %d", seq)
		}
	})
}

// Ensure a reader waiting at the end of the log holds no file while the
// stream is idle and wakes on the next commit.
func TestIdleReaderWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Create(dir, Config{}, Options{IdleTimeout: time.Second, RetentionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		mustAppend(t, s, "", msg("m-0"))
		rd, err := s.NewReader(First(), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		got := make(chan string)
		go func() {
			defer close(got)
			var buf []byte
			for {
				c, err := rd.Next(context.Background())
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Next: %v", err)
					}
					return
				}
				if buf, err = c.ReadData(buf); err != nil {
					t.Errorf("ReadData: %v", err)
					return
				}
				got <- string(buf[4:])
			}
		}()
		if m := <-got; m != "m-0" {
			t.Fatalf("first = %q", m)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait() // the reader is blocked in Next, the writer gone
		checkIdle(t, s, "reader waiting")

		mustAppend(t, s, "", msg("m-1"))
		if m := <-got; m != "m-1" {
			t.Fatalf("after idle = %q", m)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		checkIdle(t, s, "reader waiting again")
		s.Close()
		if _, ok := <-got; ok {
			t.Fatal("reader got more")
		}
	})
}

// Ensure Park lets an idle stream's files go once the reader has read
// everything, and does nothing in the middle of the log.
func TestReaderPark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Create(dir, Config{}, Options{IdleTimeout: time.Second, RetentionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		mustAppend(t, s, "", msg("m-0"))
		mustAppend(t, s, "", msg("m-1"))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		rd, err := s.NewReader(First(), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		for i := range 2 {
			if _, ok, err := rd.TryNext(); !ok || err != nil {
				t.Fatalf("TryNext %d: %v, %v", i, ok, err)
			}
			rd.Park()
			if n := openFiles(t, dir); i == 0 && n != 2 {
				t.Fatalf("parked in the middle: %d files open, want 2", n)
			}
		}
		checkIdle(t, s, "parked at the end")
		mustAppend(t, s, "", msg("m-2"))
		if c, ok, err := rd.TryNext(); !ok || err != nil || c.Header.ChunkID != 2 {
			t.Fatalf("TryNext after park: %+v, %v, %v", c.Header, ok, err)
		}
	})
}

// Ensure requests on an idle stream (Flush, TruncateBefore, SetRetention,
// EnforceRetention) run without starting the writer, and that StoreOffset
// starts it.
func TestIdleRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Create(dir, Config{MaxSegmentSize: 8192}, Options{IdleTimeout: time.Second, RetentionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fill(t, s, "a", 60, 500)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		checkIdle(t, s, "idle")
		segs := s.Stats().Segments

		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		checkIdle(t, s, "after Flush")
		n, err := s.TruncateBefore(s.tail.Load().segs[2].base)
		if err != nil || n != 2 {
			t.Fatalf("TruncateBefore = %d, %v", n, err)
		}
		checkIdle(t, s, "after TruncateBefore")
		if err := s.SetRetention(12_000, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		checkIdle(t, s, "after SetRetention")
		if got := s.Stats().Segments; got >= segs-2 {
			t.Fatalf("%d segments after truncation and retention, had %d", got, segs)
		}
		if s.idles.Load() != 1 {
			t.Fatalf("idle %d times, want 1 (requests must not start the writer)", s.idles.Load())
		}

		if err := s.StoreOffset("c", 3); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		checkBusy(t, s, "after StoreOffset")
	})
}

// Ensure retention by age still runs for an idle stream from its timer,
// with no goroutine between ticks, and leaves the stream idle.
func TestIdleRetentionTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Create(dir, Config{MaxSegmentSize: 8192, MaxAge: time.Minute},
			Options{IdleTimeout: time.Second, RetentionInterval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fill(t, s, "m", 60, 500)
		segs := s.Stats().Segments
		time.Sleep(30 * time.Second) // several ticks with nothing to delete
		synctest.Wait()
		checkIdle(t, s, "ticks with nothing due")
		if got := s.Stats().Segments; got != segs {
			t.Fatalf("segments younger than max-age deleted: %d -> %d", segs, got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := s.Stats().Segments; got != 1 {
			t.Fatalf("after max-age the timer left %d segments", got)
		}
		checkIdle(t, s, "after retention")
		if got := len(readAll(t, s, First(), ReaderOptions{})); got > 16 {
			t.Fatalf("%d records left", got)
		}
	})
}

// Ensure Close of an idle stream under FsyncNone syncs the unsynced data
// the writer left when it went idle, and a stream that never went idle
// behaves as before with IdleTimeout disabled.
func TestIdleCloseAndDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Create(dir, Config{}, Options{IdleTimeout: time.Second, RetentionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s, "", msg("x"))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if !s.w.dirty {
			t.Fatal("FsyncNone: idle writer synced")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s.w.dirty || s.w.werr != nil {
			t.Fatalf("after Close: dirty %v, werr %v", s.w.dirty, s.w.werr)
		}
		if _, err := s.Append(context.Background(), "", msg("y")); !errors.Is(err, ErrClosed) {
			t.Fatalf("append after close: %v", err)
		}

		s2, err := Open(dir, Options{IdleTimeout: -1, RetentionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		synctest.Wait() // the writer goroutine has started
		checkBusy(t, s2, "disabled, after open")
		time.Sleep(time.Hour)
		synctest.Wait()
		checkBusy(t, s2, "disabled, an hour later")
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Ensure appenders, readers, stored offsets, truncation and idle
// transitions race safely: with a tiny IdleTimeout and pauses, every
// reader sees every record once and in order, and a reopen sees the same.
func TestIdleConcurrent(t *testing.T) {
	dir := t.TempDir()
	opts := Options{IdleTimeout: time.Millisecond, RetentionInterval: -1}
	s, err := Create(dir, Config{MaxSegmentSize: 8192}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const (
		appenders = 4
		batches   = 400
		readers   = 3
	)
	total := appenders * batches * 3

	var gate sync.RWMutex // the pauser stops all appenders, so the writer goes idle
	done := make(chan struct{})
	var pauses sync.WaitGroup
	pauses.Go(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(rng.IntN(3000)) * time.Microsecond):
			}
			gate.Lock()
			time.Sleep(time.Duration(2+rng.IntN(3)) * time.Millisecond)
			gate.Unlock()
		}
	})

	// Readers follow from the start; truncation stays below the slowest.
	var pos [readers]atomic.Uint64
	var rwg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range readers {
		rwg.Go(func() {
			rd, err := s.NewReader(First(), ReaderOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			defer rd.Close()
			next := map[string]int{}
			var buf, scratch []byte
			for seen := 0; seen < total; {
				c, err := rd.Next(ctx)
				if err != nil {
					t.Errorf("reader %d after %d records: %v", i, seen, err)
					return
				}
				if buf, err = c.ReadData(buf); err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				ok := true
				scratch, err = segment.Records(buf, scratch, func(rec []byte) bool {
					seen++
					p, k, _ := strings.Cut(string(rec), "-")
					if want := strconv.Itoa(next[p]); k != want {
						t.Errorf("reader %d: %s-%s, want %s-%s", i, p, k, p, want)
						ok = false
						return false
					}
					next[p]++
					return true
				})
				if err != nil || !ok {
					t.Errorf("reader %d: records: %v", i, err)
					return
				}
				pos[i].Store(rd.NextOffset())
				if i == 0 && seen%7 == 0 {
					rd.Park()
				}
			}
		})
	}

	var awg sync.WaitGroup
	for a := range appenders {
		awg.Go(func() {
			p := fmt.Sprintf("p%d", a)
			for b := range batches {
				gate.RLock()
				r, err := s.Append(context.Background(), "",
					msg(fmt.Sprintf("%s-%d", p, 3*b)), msg(fmt.Sprintf("%s-%d", p, 3*b+1)), msg(fmt.Sprintf("%s-%d", p, 3*b+2)))
				if err == nil && b%10 == 0 {
					err = s.StoreOffset("c-"+p, r.LastOffset)
				}
				if err == nil && a == 0 && b%25 == 0 {
					low := pos[0].Load()
					for i := range readers {
						low = min(low, pos[i].Load())
					}
					_, err = s.TruncateBefore(low)
				}
				gate.RUnlock()
				if err != nil {
					t.Errorf("%s batch %d: %v", p, b, err)
					return
				}
			}
		})
	}
	awg.Wait()
	rwg.Wait()
	close(done)
	pauses.Wait()
	if t.Failed() {
		return
	}
	idles := s.idles.Load()
	t.Logf("%d records, %d segments, writer went idle %d times", total, s.Stats().Segments, idles)
	if idles < 3 {
		t.Errorf("the writer went idle %d times; the test wants idle transitions", idles)
	}
	want := readAll(t, s, First(), ReaderOptions{})
	st := s.Stats()
	offsets := map[string]uint64{}
	for a := range appenders {
		if o, ok := s.QueryOffset(fmt.Sprintf("c-p%d", a)); ok {
			offsets[fmt.Sprintf("c-p%d", a)] = o
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, dir, opts)
	if got := readAll(t, s2, First(), ReaderOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %d records, want %d", len(got), len(want))
	}
	if st2 := s2.Stats(); st2 != st {
		t.Fatalf("after reopen: %+v, want %+v", st2, st)
	}
	for a := range appenders {
		ref := fmt.Sprintf("c-p%d", a)
		o, ok := s2.QueryOffset(ref)
		if wo, wok := offsets[ref]; o != wo || ok != wok {
			// (An offset below the first retained one is forgotten at a roll.)
			t.Fatalf("after reopen QueryOffset(%s) = %d, %v; want %d, %v", ref, o, ok, wo, wok)
		}
	}
}

// Ensure many idle streams cost no goroutine and no open file each.
func TestIdleManyStreams(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		streams := openStreams(t, root, n, time.Second)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, s := range streams {
			checkIdle(t, s, s.dir)
		}
		if got := openFiles(t, root); got != 0 {
			t.Fatalf("%d files open under %d idle streams", got, n)
		}
	})
}

// openStreams creates n streams under root with IdleTimeout idle and
// appends one message to each. They close with the test.
func openStreams(t testing.TB, root string, n int, idle time.Duration) []*Stream {
	t.Helper()
	streams := make([]*Stream, n)
	for i := range streams {
		s, err := Create(filepath.Join(root, strconv.Itoa(i)), Config{}, Options{IdleTimeout: idle, RetentionInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Append(context.Background(), "", msg("m")); err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	return streams
}
