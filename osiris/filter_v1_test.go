package osiris

import (
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/warren-mq/warren/segment"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the stream in testdata/v1stream")

// v1StreamDir holds a stream written by the code before chunk filters
// came from bits-and-blooms: segments of format version 1, with filtered,
// unfiltered and tracking chunks, in three segments.
const v1StreamDir = "testdata/v1stream"

// fm is a message with body and filter value ("" for none).
func fm(body, filter string) Message {
	m := msg(body)
	if filter != "" {
		m.Filter = []byte(filter)
	}
	return m
}

// writeV1Stream writes the stream of v1StreamDir into dir: one chunk per
// batch.
func writeV1Stream(t *testing.T, dir string) {
	clock := newFakeClock()
	s, err := Create(dir, Config{FilterSize: 16, MaxSegmentChunks: 3}, Options{Now: clock.Now, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	batches := [][]Message{
		{fm("red-1", "red"), fm("red-2", "red")},
		{fm("blue-1", "blue")},
		{fm("plain-1", "")},
		{fm("green-1", "green"), fm("plain-2", "")},
		{fm("mix-a", "a"), fm("mix-b", "b"), fm("mix-c", "c"), fm("mix-d", "d"), fm("mix-e", "e")},
		{fm("red-3", "red")},
	}
	for i, b := range batches {
		clock.Advance(1000)
		for j := range b {
			b[j].PublishingID = uint64(10*i + j + 1)
		}
		mustAppend(t, s, "pub", b...)
		if i == 3 {
			if err := s.StoreOffset("c1", 3); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// filterCase is a filtered read and the records of the chunks it must
// return (clients post-filter the records).
type filterCase struct {
	values     []string
	unfiltered bool
	want       []string
}

// readFiltered returns the records of the chunks a reader with values
// (and match-unfiltered) returns.
func readFiltered(t *testing.T, s *Stream, values []string, unfiltered bool) []string {
	t.Helper()
	var vs [][]byte
	for _, v := range values {
		vs = append(vs, []byte(v))
	}
	return bodies(readAll(t, s, First(), ReaderOptions{Filter: segment.NewMatcher(vs, unfiltered)}))
}

// v1Cases are the filtered reads of the stream in v1StreamDir.
var v1Cases = []filterCase{
	{[]string{"red"}, false, []string{"red-1", "red-2", "red-3"}},
	{[]string{"blue", "green"}, false, []string{"blue-1", "green-1", "plain-2"}},
	{[]string{"c"}, false, []string{"mix-a", "mix-b", "mix-c", "mix-d", "mix-e"}},
	{[]string{"blue"}, true, []string{"blue-1", "plain-1", "green-1", "plain-2"}},
	{[]string{"yellow"}, false, nil},
}

// Ensure a stream written before the filter change reads back filtered:
// its chunks' filters match their values and skip others.
func TestV1Stream(t *testing.T) {
	if *rewrite {
		if err := os.RemoveAll(v1StreamDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(v1StreamDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeV1Stream(t, v1StreamDir)
	}
	dir := copyDir(t, v1StreamDir)
	s := mustOpen(t, dir, Options{IdleTimeout: -1})
	if segs, err := listSegments(dir); err != nil || len(segs) != 3 {
		t.Fatalf("segments %v (%v), want 3", segs, err)
	}
	for _, tc := range v1Cases {
		if got := readFiltered(t, s, tc.values, tc.unfiltered); !slices.Equal(got, tc.want) {
			t.Errorf("filter %v unfiltered=%v: got %v, want %v", tc.values, tc.unfiltered, got, tc.want)
		}
	}
}
