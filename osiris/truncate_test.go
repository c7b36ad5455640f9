package osiris

import (
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"
)

// Ensure TruncateBefore deletes exactly the segments wholly below the
// offset, never the active one, moves the first offset, and leaves a
// reader positioned in a deleted segment able to finish reading it.
func TestTruncateBefore(t *testing.T) {
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{MaxSegmentSize: 8192}, Options{RetentionInterval: -1})
	fill(t, s, "m", 100, 500) // ~55 KB: several segments
	bases, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) < 4 {
		t.Fatalf("only %d segments", len(bases))
	}
	if s.CanTruncateBefore(bases[1] - 1) {
		t.Fatalf("CanTruncateBefore(%d) with the second segment at %d", bases[1]-1, bases[1])
	}
	if n, err := s.TruncateBefore(bases[1] - 1); err != nil || n != 0 {
		t.Fatalf("TruncateBefore just below the second segment: %d, %v", n, err)
	}

	// A reader in the first segment keeps it alive.
	r, err := s.NewReader(First(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok, err := r.TryNext(); !ok || err != nil {
		t.Fatalf("TryNext: %v %v", ok, err)
	}

	if !s.CanTruncateBefore(bases[2]) {
		t.Fatalf("CanTruncateBefore(%d) = false", bases[2])
	}
	n, err := s.TruncateBefore(bases[2])
	if err != nil || n != 2 {
		t.Fatalf("TruncateBefore(%d) = %d, %v; want 2 segments", bases[2], n, err)
	}
	if got := s.Stats().FirstOffset; got != bases[2] {
		t.Fatalf("first offset %d, want %d", got, bases[2])
	}
	if files := segmentFiles(t, dir); len(files) != len(bases)-2 {
		t.Fatalf("%d segment files left, want %d", len(files), len(bases)-2)
	}
	// The old reader reads on through the deleted segments into the live ones.
	var last uint64
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatalf("reader after truncation: %v", err)
		}
		if !ok {
			break
		}
		last = c.Header.ChunkID
	}
	if last < bases[len(bases)-1] {
		t.Fatalf("reader stopped at %d before the active segment %d", last, bases[len(bases)-1])
	}

	// Everything below the end: all but the active segment go.
	next := s.Stats().NextOffset
	if _, err := s.TruncateBefore(next); err != nil {
		t.Fatal(err)
	}
	if files := segmentFiles(t, dir); len(files) != 1 || files[0] != segment.SegmentFileName(bases[len(bases)-1]) {
		t.Fatalf("files %v, want only the active segment %d", files, bases[len(bases)-1])
	}
	if s.CanTruncateBefore(next + 1000) {
		t.Fatal("CanTruncateBefore true with only the active segment")
	}
	// Appends and reads go on.
	fill(t, s, "after", 3, 100)
	got := readAll(t, s, First(), ReaderOptions{})
	if len(got) == 0 || !strings.HasPrefix(got[len(got)-1].body, "after-2-") {
		t.Fatalf("read after truncation: %v", got[len(got)-1:])
	}

	// A reopened stream starts at the surviving segment.
	s.Close()
	s2 := mustOpen(t, dir, Options{RetentionInterval: -1})
	if got := s2.Stats().FirstOffset; got != bases[len(bases)-1] {
		t.Fatalf("reopened first offset %d, want %d", got, bases[len(bases)-1])
	}
	s2.Close()
	if _, err := s.TruncateBefore(1); err == nil {
		t.Fatal("TruncateBefore on a closed stream succeeded")
	}
}

// Ensure RetentionFloor answers what retention with those limits would
// keep, by size and by age, without deleting anything itself.
func TestRetentionFloor(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{MaxSegmentSize: 8192}, Options{Now: clk.Now, RetentionInterval: -1})
	if got, err := s.RetentionFloor(1, time.Second); err != nil || got != 0 {
		t.Fatalf("empty log: floor %d, %v; want 0", got, err)
	}
	fill(t, s, "old", 60, 500)
	clk.Advance(time.Hour)
	fill(t, s, "new", 60, 500)
	bases, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		maxBytes int64
		maxAge   time.Duration
		want     uint64
	}{
		{"no limits", 0, 0, bases[0]},
		{"everything fits", 1 << 30, 0, bases[0]},
		{"one byte: only the active segment", 1, 0, bases[len(bases)-1]},
		{"age: nothing old yet", 0, 2 * time.Hour, bases[0]},
	} {
		got, err := s.RetentionFloor(tc.maxBytes, tc.maxAge)
		if err != nil || got != tc.want {
			t.Errorf("%s: floor %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	// Age: the "old" half goes (all but a segment holding both halves).
	got, err := s.RetentionFloor(0, 30*time.Minute)
	if err != nil || got <= bases[0] || got > 60 {
		t.Fatalf("age 30m: floor %d, %v; want past the first segment, at most 60", got, err)
	}
	// Size: what is kept from the floor on fits (but for the active segment).
	got, err = s.RetentionFloor(20_000, 0)
	if err != nil || got <= bases[0] {
		t.Fatalf("size: floor %d, %v", got, err)
	}
	clk.Advance(2 * time.Hour) // everything is old: all but the active segment
	if got, err := s.RetentionFloor(0, time.Hour); err != nil || got != bases[len(bases)-1] {
		t.Fatalf("age: everything old: floor %d, %v; want %d", got, err, bases[len(bases)-1])
	}
	if n := len(segmentFiles(t, dir)); n != len(bases) {
		t.Fatalf("RetentionFloor deleted segments: %d -> %d", len(bases), n)
	}
}
