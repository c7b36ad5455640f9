package segment

import (
	"bytes"
	"fmt"
	"testing"
)

// v1FilterDir holds a segment written by the code before chunk filters
// came from bits-and-blooms (segment format version 1), with chunks of
// every filter shape, so that the filters of chunks already on disk stay
// readable.
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

// Ensure the v1 testdata is what this code writes (-rewrite writes it),
// and that its filters match their own values and skip absent ones.
func TestV1FilterTestdata(t *testing.T) {
	dir := t.TempDir()
	s, _ := createSegment(t, dir, 0, 3, filterSpecs(v1FilterChunks(), 1_700_000_000_000))
	mustClose(t, s)
	for _, name := range []string{SegmentFileName(0), IndexFileName(0)} {
		got := readFile(t, dir, name)
		if *rewrite {
			writeFile(t, v1FilterDir, name, got)
			continue
		}
		if want := readFile(t, v1FilterDir, name); !bytes.Equal(got, want) {
			t.Fatalf("%s differs from %s", name, v1FilterDir)
		}
	}
	g, rec := mustOpen(t, v1FilterDir, 0)
	defer g.Close()
	if rec.Repaired() {
		t.Fatalf("Open repaired: %+v", rec)
	}
	checkFilters(t, g, v1FilterChunks())
}

// checkFilters checks each chunk of s against its description: every
// value it holds matches, alone and with match-unfiltered; an unfiltered
// entry matches for match-unfiltered readers; and in chunks of at most 5
// values every absent probe is skipped.
func checkFilters(t *testing.T, s *Segment, chunks []filterChunk) {
	t.Helper()
	if s.Count() != len(chunks) {
		t.Fatalf("%d chunks, want %d", s.Count(), len(chunks))
	}
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
			if !NewMatcher(vals(v), false).Match(bloom) {
				t.Errorf("chunk %d: no match for its value %q", i, v)
			}
		}
		if got := NewMatcher(vals("absent"), true).Match(bloom); unfiltered && !got {
			t.Errorf("chunk %d holds unfiltered entries: no match for match-unfiltered", i)
		}
		if filtered > 5 {
			continue
		}
		for _, p := range absentProbes() {
			if NewMatcher([][]byte{p}, false).Match(bloom) {
				t.Errorf("chunk %d (%d values): absent %q matches", i, filtered, p)
			}
		}
		if !unfiltered && NewMatcher(vals("absent"), true).Match(bloom) {
			t.Errorf("chunk %d holds no unfiltered entry: match-unfiltered matches", i)
		}
	}
}
