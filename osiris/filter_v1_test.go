package osiris

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
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
// its chunks' filters match their values and skip others. Appending to it
// rolls to a new segment of the current format, leaving the old ones as
// they were, and a reader over old and new chunks filters each by its
// own segment's format, also after a reopen.
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
	checkFilterCases(t, s, v1Cases)

	for i, b := range [][]Message{
		{fm("red-4", "red"), fm("blue-2", "blue")},
		{fm("yellow-1", "yellow"), fm("plain-3", "")},
	} {
		for j := range b {
			b[j].PublishingID = uint64(10*(6+i) + j + 1)
		}
		if r := mustAppend(t, s, "pub", b...); r.Written != 2 {
			t.Fatalf("append after the upgrade: %+v", r)
		}
	}
	segs, err := listSegments(dir)
	if err != nil || len(segs) != 4 {
		t.Fatalf("segments after appending %v (%v), want a fourth", segs, err)
	}
	for _, base := range segs[:3] {
		for _, name := range []string{segment.SegmentFileName(base), segment.IndexFileName(base)} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(v1StreamDir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("old %s changed by appending", name)
			}
		}
	}
	hdr, err := os.ReadFile(filepath.Join(dir, segment.SegmentFileName(segs[3])))
	if err != nil || string(hdr[:8]) != "WRNS\x00\x00\x00\x02" {
		t.Fatalf("new segment header %q (%v), want version 2", hdr[:min(8, len(hdr))], err)
	}
	mixed := []filterCase{
		{[]string{"red"}, false, []string{"red-1", "red-2", "red-3", "red-4", "blue-2"}},
		{[]string{"blue"}, false, []string{"blue-1", "red-4", "blue-2"}},
		{[]string{"yellow"}, false, []string{"yellow-1", "plain-3"}},
		{[]string{"yellow"}, true, []string{"plain-1", "green-1", "plain-2", "yellow-1", "plain-3"}},
		{[]string{"purple"}, false, nil},
	}
	checkFilterCases(t, s, mixed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, Options{IdleTimeout: -1})
	checkFilterCases(t, s, mixed)
	if got := s.PublisherSequence("pub"); got != 72 {
		t.Errorf("publisher sequence after reopen %d, want 72", got)
	}
	if o, ok := s.QueryOffset("c1"); !ok || o != 3 {
		t.Errorf("stored offset after reopen %d %v, want 3", o, ok)
	}
}

// checkFilterCases runs the filtered reads of cases on s.
func checkFilterCases(t *testing.T, s *Stream, cases []filterCase) {
	t.Helper()
	for _, tc := range cases {
		if got := readFiltered(t, s, tc.values, tc.unfiltered); !slices.Equal(got, tc.want) {
			t.Errorf("filter %v unfiltered=%v: got %v, want %v", tc.values, tc.unfiltered, got, tc.want)
		}
	}
}

// Ensure an empty active segment of the older format (a stream created by
// the code before the filter change and never written) takes the current
// format when the stream opens, and filters after writes.
func TestEmptyV1ActiveSegment(t *testing.T) {
	for _, base := range []uint64{0, 40} {
		dir := t.TempDir()
		cfg, err := Config{FilterSize: 16}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if err := writeConfig(dir, cfg); err != nil {
			t.Fatal(err)
		}
		for name, hdr := range map[string]string{
			segment.SegmentFileName(base): "WRNS\x00\x00\x00\x01",
			segment.IndexFileName(base):   "WRNI\x00\x00\x00\x01",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(hdr), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s := mustOpen(t, dir, Options{IdleTimeout: -1})
		hdr, err := os.ReadFile(filepath.Join(dir, segment.SegmentFileName(base)))
		if err != nil || string(hdr) != "WRNS\x00\x00\x00\x02" {
			t.Fatalf("base %d: segment file after open %q (%v), want the version-2 header", base, hdr, err)
		}
		if r := mustAppend(t, s, "", fm("red-1", "red"), fm("plain-1", "")); r.LastOffset != base+1 {
			t.Fatalf("base %d: last offset %d", base, r.LastOffset)
		}
		mustAppend(t, s, "", fm("blue-1", "blue"))
		if segs, _ := listSegments(dir); len(segs) != 1 {
			t.Fatalf("base %d: segments %v, want one", base, segs)
		}
		checkFilterCases(t, s, []filterCase{
			{[]string{"red"}, false, []string{"red-1", "plain-1"}},
			{[]string{"blue"}, false, []string{"blue-1"}},
			{[]string{"green"}, true, []string{"red-1", "plain-1"}},
		})
	}
}
