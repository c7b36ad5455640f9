package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// v1FilterDir holds a segment written by the code before chunk filters
// came from bits-and-blooms (segment format version 1, FilterV1), with
// chunks of every filter shape, so that the filters of chunks already on
// disk stay readable. It was written from v1FilterChunks by that code and
// cannot be written again.
const v1FilterDir = "testdata/v1filters"

// filterChunk is one chunk of the filter test segments: its filter size,
// its entries' filter values ("" for an unfiltered entry) and probes that
// are in no entry.
type filterChunk struct {
	size    int
	values  []string
	trailer []byte
}

// v1FilterChunks describes the chunks of v1FilterDir.
func v1FilterChunks() []filterChunk {
	many := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s-%d", prefix, i))
		}
		return out
	}
	return []filterChunk{
		{size: 16, values: []string{"eu", "eu"}},
		{size: 16, values: []string{"us", "", "eu"}, trailer: []byte{0, 3, 'p', 'u', 'b', 0, 0, 0, 0, 0, 0, 0, 9}},
		{size: 16, values: []string{"", ""}}, // no filtered entry: no Bloom bytes
		{size: 16, values: many("five", 5), trailer: []byte("trailer")},
		{size: 16, values: many("twenty", 20)},
		{size: 64, values: many("twenty", 20)},
		{size: 255, values: append(many("fifty", 50), "")},
		{size: 32, values: []string{"solo", ""}},
	}
}

// specs returns the chunk specs of chunks, timestamps from ts0.
func filterSpecs(chunks []filterChunk, ts0 int64) []chunkSpec {
	var specs []chunkSpec
	for i, c := range chunks {
		s := chunkSpec{typ: ChunkUser, ts: ts0 + int64(i), epoch: 1, bloomSize: c.size, trailer: c.trailer}
		for j, v := range c.values {
			e := simple(fmt.Sprintf("chunk-%d-msg-%d", i, j))
			if v != "" {
				e.filter = []byte(v)
			}
			s.entries = append(s.entries, e)
		}
		specs = append(specs, s)
	}
	return specs
}

// absentProbes are filter values in no chunk of the filter test segments.
func absentProbes() [][]byte { return filterValues("absent", 20) }

// Ensure the segment written before the filter change opens as it was, as
// a format-version-1 segment, and its chunks verify and filter by their
// FilterV1 filters.
func TestV1FilterSegment(t *testing.T) {
	dir := t.TempDir()
	copySegment(t, v1FilterDir, dir, 0)
	s, rec := mustOpen(t, dir, 0)
	defer s.Close()
	if rec.Repaired() {
		t.Fatalf("Open repaired: %+v", rec)
	}
	if s.Version() != 1 || s.FilterFormat() != FilterV1 {
		t.Fatalf("Version %d, FilterFormat %d; want 1, FilterV1", s.Version(), s.FilterFormat())
	}
	verifyAll(t, s)
	checkFilters(t, s, v1FilterChunks())
}

// Ensure the same chunks written now go to a format-version-2 segment and
// filter by their FilterV2 filters.
func TestV2FilterSegment(t *testing.T) {
	s, _ := createSegment(t, t.TempDir(), 0, 3, filterSpecs(v1FilterChunks(), 1_700_000_000_000))
	defer s.Close()
	if s.Version() != SegmentVersion || s.FilterFormat() != FilterV2 {
		t.Fatalf("Version %d, FilterFormat %d; want %d, FilterV2", s.Version(), s.FilterFormat(), SegmentVersion)
	}
	verifyAll(t, s)
	checkFilters(t, s, v1FilterChunks())
}

// Ensure one Matcher reading old chunks and then new ones (a stream
// written before the change and appended to after it: the old segment,
// then new segments) tests each chunk by its own segment's format, and
// that reading either segment's filters in the other's format would not
// do (so the format really comes from the segment).
func TestFilterOldThenNew(t *testing.T) {
	dir := t.TempDir()
	copySegment(t, v1FilterDir, dir, 0)
	old, _ := mustOpen(t, dir, 0)
	defer old.Close()
	cur, _ := createSegment(t, dir, uint64(1000), 3, filterSpecs(v1FilterChunks(), 1_800_000_000_000))
	defer cur.Close()
	m := NewMatcher(vals("five-3"), false) // in chunk 3 only
	var got []bool
	misread := 0
	for _, s := range []*Segment{old, cur} {
		for i := range s.Count() {
			r, _ := s.Record(i)
			_, bloom, err := s.ReadHeader(int64(r.Pos), s.Size(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m.Match(s.FilterFormat(), bloom))
			other := FilterV1 + FilterV2 - s.FilterFormat()
			if i == 3 && !m.Match(other, bloom) {
				misread++
			}
		}
	}
	want := []bool{false, false, false, true, false, false, false, false}
	want = append(want, want...)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("chunk %d (%d old, then new): matches %v, want %v", i, old.Count(), got, want)
		}
	}
	if misread == 0 {
		t.Error("the other format's reading matches chunk 3 in both segments: the test shows nothing")
	}
}

// Ensure recovery of a format-version-1 segment: a torn last chunk is cut,
// a lost index is rebuilt, the version stays 1 and what is kept filters as
// before; appending is refused, as is an Upgrade with chunks.
func TestV1Recovery(t *testing.T) {
	seg := readFile(t, v1FilterDir, SegmentFileName(0))
	idx := readFile(t, v1FilterDir, IndexFileName(0))
	n := len(v1FilterChunks())
	lastPos := int64(binary.BigEndian.Uint32(idx[len(idx)-IndexRecordSize+24:]))
	tests := []struct {
		name string
		seg  []byte
		idx  []byte
		rec  Recovery
		kept int
	}{
		{"torn last chunk", seg[:len(seg)-3], idx, Recovery{TruncatedBytes: int64(len(seg)-3) - lastPos, DroppedRecords: 1}, n - 1},
		{"no index", seg, nil, Recovery{IndexRebuilt: true, AddedRecords: n}, n},
		{"index short of the last record", seg, idx[:len(idx)-IndexRecordSize], Recovery{AddedRecords: 1}, n},
		{"damaged check of the last chunk", flipByte(seg, int(lastPos)+46), idx, Recovery{TruncatedBytes: int64(len(seg)) - lastPos, DroppedRecords: 1}, n - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, SegmentFileName(0), tt.seg)
			if tt.idx != nil {
				writeFile(t, dir, IndexFileName(0), tt.idx)
			}
			s, rec := mustOpen(t, dir, 0)
			defer s.Close()
			if rec != tt.rec {
				t.Fatalf("Recovery %+v, want %+v", rec, tt.rec)
			}
			if s.Version() != 1 {
				t.Fatalf("Version %d after recovery, want 1", s.Version())
			}
			if got := readFile(t, dir, SegmentFileName(0))[:FileHeaderSize]; string(got) != "WRNS\x00\x00\x00\x01" {
				t.Fatalf("file header %q after recovery", got)
			}
			verifyAll(t, s)
			checkFilters(t, s, v1FilterChunks()[:tt.kept])
			chunk, h := buildChunk(t, nil, 5000, chunkSpec{ts: 1, epoch: 1, entries: []testEntry{simple("x")}})
			if err := s.Append(chunk, []Header{h}); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("Append to a version-1 segment: %v, want ErrReadOnly", err)
			}
			if err := s.Upgrade(); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("Upgrade of a version-1 segment with chunks: %v, want ErrReadOnly", err)
			}
			if s.Version() != 1 {
				t.Fatalf("Version %d after refused writes, want 1", s.Version())
			}
		})
	}
}

// Ensure an empty format-version-1 segment (created, nothing written yet)
// is upgraded in place and then takes appends, across a reopen.
func TestUpgradeEmptyV1(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, SegmentFileName(7), []byte("WRNS\x00\x00\x00\x01"))
	writeFile(t, dir, IndexFileName(7), []byte("WRNI\x00\x00\x00\x01"))
	s, rec := mustOpen(t, dir, 7)
	if rec.Repaired() || s.Version() != 1 {
		t.Fatalf("Open: Recovery %+v, Version %d", rec, s.Version())
	}
	if err := s.Upgrade(); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if got := readFile(t, dir, SegmentFileName(7)); string(got) != "WRNS\x00\x00\x00\x02" {
		t.Fatalf("segment file after Upgrade = %q", got)
	}
	chunks := appendChunks(t, s, filterSpecs(v1FilterChunks()[:2], 1)...)
	mustClose(t, s)
	s, rec = mustOpen(t, dir, 7)
	defer s.Close()
	if rec.Repaired() || s.FilterFormat() != FilterV2 {
		t.Fatalf("reopen: Recovery %+v, FilterFormat %d", rec, s.FilterFormat())
	}
	checkChunks(t, s, chunks)
	checkFilters(t, s, v1FilterChunks()[:2])
}

// flipByte returns a copy of b with byte i inverted.
func flipByte(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0xff
	return b
}

// verifyAll checks that every chunk of s passes Verify (header check and
// data CRC).
func verifyAll(t *testing.T, s *Segment) {
	t.Helper()
	for i := range s.Count() {
		r, err := s.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := s.ReadHeader(int64(r.Pos), s.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, h.Size())
		if err := s.ReadAt(chunk, int64(r.Pos)); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(chunk); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
}

// checkFilters checks each chunk of s against its description, through
// the Matcher with the segment's filter format: every value it holds
// matches, alone and with match-unfiltered; an unfiltered entry matches
// for match-unfiltered readers; and in chunks of at most 5 values every
// absent probe is skipped.
func checkFilters(t *testing.T, s *Segment, chunks []filterChunk) {
	t.Helper()
	if s.Count() != len(chunks) {
		t.Fatalf("%d chunks, want %d", s.Count(), len(chunks))
	}
	format := s.FilterFormat()
	for i, c := range chunks {
		r, err := s.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		_, bloom, err := s.ReadHeader(int64(r.Pos), s.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		bloom = bytes.Clone(bloom)
		unfiltered, filtered := false, 0
		for _, v := range c.values {
			if v == "" {
				unfiltered = true
				continue
			}
			filtered++
			for _, mu := range []bool{false, true} {
				if !NewMatcher(vals(v), mu).Match(format, bloom) {
					t.Errorf("chunk %d: no match for its value %q (match unfiltered %v)", i, v, mu)
				}
			}
		}
		if got := NewMatcher(vals("absent"), true).Match(format, bloom); unfiltered && !got {
			t.Errorf("chunk %d holds unfiltered entries: no match for match-unfiltered", i)
		}
		if filtered > 5 {
			continue
		}
		for _, p := range absentProbes() {
			if NewMatcher([][]byte{p}, false).Match(format, bloom) {
				t.Errorf("chunk %d (%d values): absent %q matches", i, filtered, p)
			}
		}
		if !unfiltered && NewMatcher(vals("absent"), true).Match(format, bloom) {
			t.Errorf("chunk %d holds no unfiltered entry: match-unfiltered matches", i)
		}
	}
}
