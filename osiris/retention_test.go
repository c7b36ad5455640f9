package osiris

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// segmentFiles lists the .segment files in dir.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".segment") {
			out = append(out, e.Name())
		}
	}
	return out
}

// fill appends n single-message batches of size bytes each.
func fill(t *testing.T, s *Stream, prefix string, n, size int) {
	t.Helper()
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("%s-%d-", prefix, i)
		body += strings.Repeat("x", max(0, size-len(body)))
		mustAppend(t, s, "", msg(body))
	}
}

// Ensure max-length-bytes deletes whole segments, oldest first, on roll,
// keeps the active segment, and moves the first offset.
func TestRetentionBySize(t *testing.T) {
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{MaxSegmentSize: 8192, MaxLengthBytes: 20_000}, Options{RetentionInterval: -1})
	fill(t, s, "m", 200, 500) // ~110 KB: many segments
	st := s.Stats()
	if st.Bytes > 20_000+8192 {
		t.Fatalf("bytes %d after retention, limit 20000 (+1 segment)", st.Bytes)
	}
	if st.FirstOffset == 0 || st.Segments < 2 {
		t.Fatalf("stats %+v: retention did not run or deleted too much", st)
	}
	if n := len(segmentFiles(t, dir)); n != st.Segments {
		t.Fatalf("%d segment files, stats say %d", n, st.Segments)
	}
	// What is left is a contiguous suffix of what was written.
	got := readAll(t, s, First(), ReaderOptions{})
	if len(got) == 0 || got[len(got)-1].body[:6] != "m-199-" {
		t.Fatalf("last record %v", got[len(got)-1:])
	}
	for i := 1; i < len(got); i++ {
		var a, b int
		fmt.Sscanf(got[i-1].body, "m-%d-", &a)
		fmt.Sscanf(got[i].body, "m-%d-", &b)
		if b != a+1 {
			t.Fatalf("gap between %q and %q", got[i-1].body[:8], got[i].body[:8])
		}
	}
	// A reader asking for a deleted offset is clamped to the first.
	if r := readAll(t, s, AtOffset(0), ReaderOptions{}); r[0].offset < st.FirstOffset {
		t.Fatalf("read deleted offset %d (first %d)", r[0].offset, st.FirstOffset)
	}
}

// Ensure max-age deletes segments whose newest chunk is too old, never
// the active one, using the injected clock.
func TestRetentionByAge(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{MaxSegmentSize: 8192, MaxAge: time.Hour}, Options{Now: clk.Now, RetentionInterval: -1})
	fill(t, s, "old", 60, 500)
	clk.Advance(30 * time.Minute)
	fill(t, s, "new", 60, 500)
	before := s.Stats()
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Segments != before.Segments {
		t.Fatalf("nothing is an hour old yet, but segments went %d -> %d", before.Segments, st.Segments)
	}
	clk.Advance(45 * time.Minute) // "old" is 75 min old, "new" 45 min
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	got := bodies(readAll(t, s, First(), ReaderOptions{}))
	for _, b := range got {
		if strings.HasPrefix(b, "old-") && !strings.HasPrefix(got[len(got)-1], "new-") {
			t.Fatalf("unexpected layout %v", got)
		}
	}
	oldLeft := 0
	for _, b := range got {
		if strings.HasPrefix(b, "old-") {
			oldLeft++
		}
	}
	// Only a segment holding both old and new messages may keep old ones.
	if oldLeft > 20 {
		t.Fatalf("%d old messages survived max-age", oldLeft)
	}
	if !slices.Contains(got, "new-0-"+strings.Repeat("x", 494)) {
		t.Fatalf("new messages were deleted")
	}
	clk.Advance(24 * time.Hour) // everything is old: only the active segment stays
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Segments != 1 {
		t.Fatalf("%d segments left, want the active one", st.Segments)
	}
	if got := readAll(t, s, Last(), ReaderOptions{}); len(got) != 1 || !strings.HasPrefix(got[0].body, "new-59-") {
		t.Fatalf("last = %v", got)
	}
}

// Ensure retention also runs on its timer, without a roll, so an idle
// stream still shrinks (RabbitMQ evaluates mostly on roll).
func TestRetentionTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := Create(dir, Config{MaxSegmentSize: 8192, MaxAge: time.Minute}, Options{RetentionInterval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fill(t, s, "m", 60, 500)
		segs := s.Stats().Segments
		if segs < 3 {
			t.Fatalf("%d segments", segs)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := s.Stats().Segments; got != segs {
			t.Fatalf("segments younger than max-age deleted: %d -> %d", segs, got)
		}
		time.Sleep(2 * time.Minute) // the timer fires; no append, no roll
		synctest.Wait()
		if got := s.Stats().Segments; got != 1 {
			t.Fatalf("after max-age the timer left %d segments", got)
		}
	})
}

// Ensure SetRetention persists and applies at once.
func TestSetRetention(t *testing.T) {
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{MaxSegmentSize: 8192}, Options{RetentionInterval: -1})
	fill(t, s, "m", 100, 500)
	if s.Stats().Segments < 4 {
		t.Fatal("expected several segments")
	}
	if err := s.SetRetention(1, 0); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Segments != 1 {
		t.Fatalf("segments %d", st.Segments)
	}
	s.Close()
	s = mustOpen(t, dir, Options{})
	if c := s.Config(); c.MaxLengthBytes != 1 {
		t.Fatalf("config after reopen %+v", c)
	}
}

// Ensure a reader inside a segment that retention deletes finishes that
// segment from its open file and then continues with what is left.
func TestReaderSurvivesRetention(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{MaxSegmentSize: 8192}, Options{RetentionInterval: -1})
	fill(t, s, "m", 100, 500)
	r, err := s.NewReader(First(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, ok, err := r.TryNext()
	if err != nil || !ok || c.Header.ChunkID != 0 {
		t.Fatalf("first chunk %+v %v %v", c.Header, ok, err)
	}
	if err := s.SetRetention(1, 0); err != nil {
		t.Fatal(err)
	}
	first := s.Stats().FirstOffset
	var ids []uint64
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatalf("TryNext after retention: %v", err)
		}
		if !ok {
			break
		}
		if _, err := c.ReadData(nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.Header.ChunkID)
	}
	if len(ids) == 0 || ids[len(ids)-1] != s.Stats().NextOffset-1 {
		t.Fatalf("reader did not reach the end: %v", ids)
	}
	// It read the rest of its first segment, then jumped to the survivors.
	if !slices.IsSorted(ids) || !slices.Contains(ids, first+1) {
		t.Fatalf("ids %v, first %d", ids, first)
	}
}

// Ensure retention and truncation publish a tail without a segment
// before they remove its files: a reader that finds its segment removed
// looks at the tail again (a few times) and must find only segments that
// are kept. Removing first left a CPU-starved stream consumer finding the
// removed segment in every tail it looked at, and its delivery ended.
func TestSegmentsLeaveTheTailBeforeTheirFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(*Stream) error
	}{
		{"retention", func(s *Stream) error { return s.SetRetention(1, 0) }},
		{"truncation", func(s *Stream) error { _, err := s.TruncateBefore(s.Stats().NextOffset); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCreate(t, t.TempDir(), Config{MaxSegmentSize: 8192}, Options{RetentionInterval: -1})
			fill(t, s, "m", 100, 500)
			var removed, listed []uint64
			s.removeHook = func(base uint64) { // on the writer goroutine
				removed = append(removed, base)
				for _, r := range s.tail.Load().segs {
					if r.base == base {
						listed = append(listed, base)
					}
				}
			}
			before := s.Stats().Segments
			if err := tc.drop(s); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(); err != nil { // the writer has done the drop
				t.Fatal(err)
			}
			if len(removed) == 0 || len(removed) != before-s.Stats().Segments {
				t.Fatalf("removed %v; segments %d -> %d", removed, before, s.Stats().Segments)
			}
			if len(listed) != 0 {
				t.Fatalf("segments %v were still in the published tail when their files went", listed)
			}
		})
	}
}
