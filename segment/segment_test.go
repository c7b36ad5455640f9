package segment

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// nRecords returns an entry list holding n records: one sub-batch for n > 1.
func nRecords(prefix string, n int) []testEntry {
	if n == 1 {
		return []testEntry{simple(prefix)}
	}
	var recs []string
	for i := range n {
		recs = append(recs, prefix+"-"+string(rune('a'+i)))
	}
	return []testEntry{subBatch(recs...)}
}

// Ensure Create writes both file headers and starts empty.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 42)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer s.Close()
	if s.Base() != 42 || s.Path() != filepath.Join(dir, "00000000000000000042.segment") {
		t.Fatalf("Base %d, Path %s", s.Base(), s.Path())
	}
	checkChunks(t, s, nil)
	if got := readFile(t, dir, SegmentFileName(42)); string(got) != "WRNS\x00\x00\x00\x02" {
		t.Errorf("segment file = %q, want magic WRNS and version 2", got)
	}
	if s.Version() != SegmentVersion || s.FilterFormat() != FilterV2 {
		t.Errorf("Version %d, FilterFormat %d; want %d, %d", s.Version(), s.FilterFormat(), SegmentVersion, FilterV2)
	}
	if got := readFile(t, dir, IndexFileName(42)); string(got) != "WRNI\x00\x00\x00\x01" {
		t.Errorf("index file = %q, want magic WRNI and version 1", got)
	}
	if err := s.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
}

// Ensure Create refuses to overwrite an existing segment or index, and
// leaves no file behind when it fails.
func TestCreateExisting(t *testing.T) {
	t.Run("segment exists", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, SegmentFileName(7), []byte("precious"))
		if _, err := Create(dir, 7); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("Create error %v, want fs.ErrExist", err)
		}
		if got := readFile(t, dir, SegmentFileName(7)); string(got) != "precious" {
			t.Fatalf("segment file changed to %q", got)
		}
		if _, err := os.Stat(filepath.Join(dir, IndexFileName(7))); !os.IsNotExist(err) {
			t.Fatalf("index file created: %v", err)
		}
	})
	t.Run("index exists", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, IndexFileName(7), []byte("precious"))
		if _, err := Create(dir, 7); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("Create error %v, want fs.ErrExist", err)
		}
		if got := readFile(t, dir, IndexFileName(7)); string(got) != "precious" {
			t.Fatalf("index file changed to %q", got)
		}
		if _, err := os.Stat(filepath.Join(dir, SegmentFileName(7))); !os.IsNotExist(err) {
			t.Fatalf("segment file left behind: %v", err)
		}
	})
}

// Ensure Open of a missing segment fails without creating files.
func TestOpenMissing(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Open(dir, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open error %v, want fs.ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Open created %d files", len(entries))
	}
}

// Ensure appended batches are readable through every accessor, and survive
// Close and Open unchanged.
func TestAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var all []storedChunk
	specs := mixedSpecs(12, 5000)
	for i, batch := range []int{1, 4, 2, 5} {
		got := appendChunks(t, s, specs[:batch]...)
		specs = specs[batch:]
		all = append(all, got...)
		checkChunks(t, s, all)
		if i == 0 && (all[0].pos != FileHeaderSize || all[0].hdr.ChunkID != 1000) {
			t.Fatalf("first chunk at %d with id %d, want %d and 1000", all[0].pos, all[0].hdr.ChunkID, FileHeaderSize)
		}
	}
	// Chunks are back to back and their ids follow on.
	for i := 1; i < len(all); i++ {
		if all[i].pos != all[i-1].end() || all[i].hdr.ChunkID != all[i-1].hdr.NextOffset() {
			t.Fatalf("chunk %d at %d id %d; previous ends at %d, next offset %d",
				i, all[i].pos, all[i].hdr.ChunkID, all[i-1].end(), all[i-1].hdr.NextOffset())
		}
	}
	// Records come back from every chunk.
	for i, c := range all {
		want := specRecords(mixedSpecs(12, 5000)[i].entries)
		if got := recordsOf(t, chunkData(c.bytes, &c.hdr)); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("chunk %d records %q, want %q", i, got, want)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	s, rec := mustOpen(t, dir, 1000)
	defer s.Close()
	if rec.Repaired() {
		t.Fatalf("Open of a clean segment repaired: %+v", rec)
	}
	checkChunks(t, s, all)
}

// Ensure Append of no headers is a no-op, and a batch whose headers do not
// describe its bytes is refused without writing anything or failing later
// appends.
func TestAppendInvalidBatch(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 1, mixedSpecs(2, 0))
	defer s.Close()
	if err := s.Append(nil, nil); err != nil {
		t.Fatalf("Append(nil, nil): %v", err)
	}
	buf, h := buildChunk(t, nil, chunks[1].hdr.NextOffset(), mixedSpecs(1, 100)[0])
	if err := s.Append(buf[:len(buf)-1], []Header{h}); err == nil {
		t.Fatal("Append of a short chunk: no error")
	}
	if err := s.Append(append(buf, 0), []Header{h}); err == nil {
		t.Fatal("Append with an extra byte: no error")
	}
	checkChunks(t, s, chunks)
	if st, err := os.Stat(s.Path()); err != nil || st.Size() != chunks[1].end() {
		t.Fatalf("segment file size %v, %v; want %d", st.Size(), err, chunks[1].end())
	}
	chunks = append(chunks, appendChunks(t, s, mixedSpecs(1, 100)...)...)
	checkChunks(t, s, chunks)
}

// Ensure Append refuses to grow a segment past what an index record can
// address.
func TestAppendSizeLimit(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 1, mixedSpecs(1, 0))
	defer s.Close()
	buf, h := buildChunk(t, nil, chunks[0].hdr.NextOffset(), mixedSpecs(1, 100)[0])
	saved := s.size
	s.size = MaxSegmentPos - int64(len(buf)) + 1 // pretend the file is almost 4 GiB
	err := s.Append(buf, []Header{h})
	s.size = saved
	if err == nil || !strings.Contains(err.Error(), "4 GiB") {
		t.Fatalf("Append past 4 GiB: error %v", err)
	}
	checkChunks(t, s, chunks)
	if st, _ := os.Stat(s.Path()); st.Size() != saved {
		t.Fatalf("segment file is %d bytes, want %d", st.Size(), saved)
	}
	if err := s.Append(buf, []Header{h}); err != nil {
		t.Fatalf("Append after the refused one: %v", err)
	}
	if s.Count() != 2 {
		t.Fatalf("Count = %d, want 2", s.Count())
	}
}

// Ensure a failed segment write makes every later Append and Sync fail with
// the same error.
func TestStickyWriteError(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 2, mixedSpecs(2, 0))
	if err := s.File().Close(); err != nil { // the file goes away under the writer
		t.Fatal(err)
	}
	buf, h := buildChunk(t, nil, chunks[1].hdr.NextOffset(), mixedSpecs(1, 100)[0])
	err := s.Append(buf, []Header{h})
	if !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Append on a closed file: error %v, want os.ErrClosed", err)
	}
	for i := range 3 {
		if err2 := s.Append(buf, []Header{h}); err2 != err {
			t.Fatalf("Append %d after the failure: error %v, want the first error %v", i, err2, err)
		}
	}
	if err2 := s.Sync(); err2 != err {
		t.Fatalf("Sync after the failure: error %v, want %v", err2, err)
	}
	if s.Count() != 2 || s.Size() != chunks[1].end() {
		t.Fatalf("Count %d, Size %d after the failure; want 2, %d", s.Count(), s.Size(), chunks[1].end())
	}
	s.Close()
}

// Ensure a failed index write is sticky too, and that the chunk written
// before it is recovered by the next Open.
func TestStickyIndexWriteError(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 2, mixedSpecs(2, 0))
	if err := s.idx.Close(); err != nil {
		t.Fatal(err)
	}
	extra := appendOrErr(t, s, chunks[1].hdr.NextOffset(), mixedSpecs(3, 100)[2])
	if !errors.Is(extra.err, os.ErrClosed) {
		t.Fatalf("Append with a closed index: error %v, want os.ErrClosed", extra.err)
	}
	if err := s.Append(extra.buf, []Header{extra.hdr}); err != extra.err {
		t.Fatalf("second Append: error %v, want %v", err, extra.err)
	}
	if s.Count() != 2 {
		t.Fatalf("Count = %d after the failed Append, want 2", s.Count())
	}
	s.Close()

	s, rec := mustOpen(t, dir, 0)
	defer s.Close()
	if rec != (Recovery{AddedRecords: 1}) {
		t.Fatalf("Recovery = %+v, want one record added", rec)
	}
	checkChunks(t, s, append(chunks, storedChunk{hdr: extra.hdr, pos: chunks[1].end(), bytes: extra.buf}))
}

type appendResult struct {
	buf []byte
	hdr Header
	err error
}

// appendOrErr builds one chunk and appends it, returning the error.
func appendOrErr(tb testing.TB, s *Segment, id uint64, spec chunkSpec) appendResult {
	buf, h := buildChunk(tb, nil, id, spec)
	return appendResult{buf: buf, hdr: h, err: s.Append(buf, []Header{h})}
}

// Ensure writes to a closed segment fail with ErrClosed, and Remove
// deletes both files.
func TestCloseAndRemove(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 2, mixedSpecs(2, 0))
	mustClose(t, s)
	if r := appendOrErr(t, s, chunks[1].hdr.NextOffset(), mixedSpecs(1, 0)[0]); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Append after Close: error %v, want ErrClosed", r.err)
	}
	if err := s.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: error %v, want ErrClosed", err)
	}

	s, _ = mustOpen(t, dir, 0)
	if err := s.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("%d files left after Remove", len(entries))
	}
	if r := appendOrErr(t, s, chunks[1].hdr.NextOffset(), mixedSpecs(1, 0)[0]); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Append after Remove: error %v, want ErrClosed", r.err)
	}
}

// Ensure SearchOffset finds the chunk holding an offset: the last chunk
// whose id is at most the offset.
func TestSearchOffset(t *testing.T) {
	// Chunks hold 3, 1, 5 and 2 records: ids 100, 103, 104, 109; next 111.
	var specs []chunkSpec
	for i, n := range []int{3, 1, 5, 2} {
		specs = append(specs, chunkSpec{ts: int64(i), epoch: 1, entries: nRecords("r", n)})
	}
	s, chunks := createSegment(t, t.TempDir(), 100, 2, specs)
	defer s.Close()
	for i, want := range []uint64{100, 103, 104, 109} {
		if chunks[i].hdr.ChunkID != want {
			t.Fatalf("test setup: chunk %d id %d, want %d", i, chunks[i].hdr.ChunkID, want)
		}
	}
	tests := []struct {
		n    int
		off  uint64
		want int
	}{
		{4, 0, -1},
		{4, 99, -1},
		{4, 100, 0},
		{4, 102, 0},
		{4, 103, 1},
		{4, 104, 2},
		{4, 108, 2},
		{4, 109, 3},
		{4, 110, 3},
		{4, 111, 3}, // past the end: the last chunk
		{4, math.MaxUint64, 3},
		{2, 109, 1}, // only the first two chunks are visible
		{1, 103, 0},
		{0, 100, -1},
	}
	for _, tt := range tests {
		got, err := s.SearchOffset(tt.n, tt.off)
		if err != nil {
			t.Fatalf("SearchOffset(%d, %d): %v", tt.n, tt.off, err)
		}
		if got != tt.want {
			t.Errorf("SearchOffset(%d, %d) = %d, want %d", tt.n, tt.off, got, tt.want)
		}
	}
}

// Ensure SearchTimestamp finds the first chunk with a timestamp at or after
// the one given.
func TestSearchTimestamp(t *testing.T) {
	var specs []chunkSpec
	for _, ts := range []int64{10, 20, 20, 20, 30, 40} {
		specs = append(specs, chunkSpec{ts: ts, epoch: 1, entries: nRecords("r", 1)})
	}
	s, _ := createSegment(t, t.TempDir(), 0, 3, specs)
	defer s.Close()
	tests := []struct {
		n    int
		ts   int64
		want int
	}{
		{6, math.MinInt64, 0},
		{6, 5, 0}, // older than all: the first chunk
		{6, 10, 0},
		{6, 11, 1},
		{6, 20, 1}, // equal timestamps: the first of them
		{6, 21, 4},
		{6, 30, 4},
		{6, 40, 5},
		{6, 41, 6}, // newer than all: n
		{6, math.MaxInt64, 6},
		{3, 25, 3},
		{0, 0, 0},
	}
	for _, tt := range tests {
		got, err := s.SearchTimestamp(tt.n, tt.ts)
		if err != nil {
			t.Fatalf("SearchTimestamp(%d, %d): %v", tt.n, tt.ts, err)
		}
		if got != tt.want {
			t.Errorf("SearchTimestamp(%d, %d) = %d, want %d", tt.n, tt.ts, got, tt.want)
		}
	}
}

// Ensure LastOfType finds the last chunk of a type among the first n,
// across the 256-record blocks it reads.
func TestLastOfType(t *testing.T) {
	deltas := map[int]bool{3: true, 87: true, 88: true, 343: true, 344: true}
	snapshots := map[int]bool{0: true, 300: true}
	var specs []chunkSpec
	for i := range 600 {
		typ := ChunkUser
		switch {
		case deltas[i]:
			typ = ChunkTrackingDelta
		case snapshots[i]:
			typ = ChunkTrackingSnapshot
		}
		specs = append(specs, chunkSpec{typ: typ, ts: int64(i), epoch: 1, entries: nRecords("r", 1)})
	}
	s, _ := createSegment(t, t.TempDir(), 0, 100, specs)
	defer s.Close()
	tests := []struct {
		n    int
		typ  ChunkType
		want int
	}{
		{600, ChunkTrackingDelta, 344},
		{344, ChunkTrackingDelta, 343},
		{343, ChunkTrackingDelta, 88},
		{88, ChunkTrackingDelta, 87},
		{87, ChunkTrackingDelta, 3},
		{3, ChunkTrackingDelta, -1},
		{600, ChunkTrackingSnapshot, 300},
		{300, ChunkTrackingSnapshot, 0},
		{600, ChunkUser, 599},
		{1, ChunkUser, -1},
		{0, ChunkUser, -1},
		{600, ChunkType(7), -1},
	}
	for _, tt := range tests {
		got, err := s.LastOfType(tt.n, tt.typ)
		if err != nil {
			t.Fatalf("LastOfType(%d, %v): %v", tt.n, tt.typ, err)
		}
		if got != tt.want {
			t.Errorf("LastOfType(%d, %v) = %d, want %d", tt.n, tt.typ, got, tt.want)
		}
	}
}

// Ensure ReadHeader returns the header and Bloom bytes of a chunk and
// refuses chunks that pass the limit.
func TestReadHeader(t *testing.T) {
	dir := t.TempDir()
	specs := mixedSpecs(4, 0)
	specs[3].bloomSize = MaxBloomSize
	s, chunks := createSegment(t, dir, 0, 4, specs)
	defer s.Close()
	c := chunks[3]
	if c.hdr.BloomSize != MaxBloomSize {
		t.Fatalf("test setup: Bloom size %d", c.hdr.BloomSize)
	}

	// The Bloom bytes alias a buffer that is big enough.
	buf := make([]byte, 0, HeaderSize+MaxBloomSize)
	h, bloom, err := s.ReadHeader(c.pos, c.end(), buf)
	if err != nil {
		t.Fatalf("ReadHeader at the exact limit: %v", err)
	}
	if h != c.hdr || !bytes.Equal(bloom, c.bloom()) {
		t.Fatalf("ReadHeader = %+v, % x; want %+v, % x", h, bloom, c.hdr, c.bloom())
	}
	if &bloom[0] != &buf[:HeaderSize+1][HeaderSize] {
		t.Errorf("Bloom bytes do not alias the buffer")
	}
	// Small or nil buffers are replaced.
	for _, b := range [][]byte{nil, make([]byte, 10)} {
		h, bloom, err := s.ReadHeader(c.pos, c.end(), b)
		if err != nil || h != c.hdr || !bytes.Equal(bloom, c.bloom()) {
			t.Fatalf("ReadHeader with a %d-byte buffer: %+v, %v", cap(b), h, err)
		}
	}
	// A chunk without Bloom bytes near the end of the file.
	h, bloom, err = s.ReadHeader(chunks[0].pos, chunks[0].end(), nil)
	if err != nil || h != chunks[0].hdr || len(bloom) != 0 {
		t.Fatalf("ReadHeader(chunk 0) = %+v, % x, %v", h, bloom, err)
	}

	for _, limit := range []int64{c.end() - 1, c.pos + HeaderSize + MaxBloomSize, c.pos + HeaderSize, c.pos + HeaderSize - 1, c.pos, c.pos - 1} {
		if _, _, err := s.ReadHeader(c.pos, limit, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("limit %d for a chunk ending at %d: error %v, want ErrCorrupt", limit, c.end(), err)
		}
	}
	// Not at a chunk boundary.
	if _, _, err := s.ReadHeader(c.pos+1, c.end(), nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadHeader inside a chunk: error %v, want ErrCorrupt", err)
	}

	// The limit says the chunk is there but the file is shorter: the Bloom
	// bytes are cut.
	if err := os.Truncate(s.Path(), c.pos+HeaderSize+10); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadHeader(c.pos, c.end(), nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadHeader of a cut chunk: error %v, want ErrCorrupt", err)
	}
	if _, _, err := s.ReadHeader(c.pos, c.end()+100, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadHeader of a cut chunk, limit past it: error %v, want ErrCorrupt", err)
	}
}

// Ensure ReadAt returns file bytes and fails past the end.
func TestReadAt(t *testing.T) {
	s, chunks := createSegment(t, t.TempDir(), 0, 3, mixedSpecs(3, 0))
	defer s.Close()
	for i, c := range chunks {
		got := make([]byte, c.hdr.Size())
		if err := s.ReadAt(got, c.pos); err != nil || !bytes.Equal(got, c.bytes) {
			t.Fatalf("ReadAt(chunk %d): %v, bytes equal %v", i, err, bytes.Equal(got, c.bytes))
		}
	}
	hdr := make([]byte, FileHeaderSize)
	if err := s.ReadAt(hdr, 0); err != nil || string(hdr) != "WRNS\x00\x00\x00\x02" {
		t.Fatalf("ReadAt(file header) = %q, %v", hdr, err)
	}
	if err := s.ReadAt(make([]byte, 2), s.Size()-1); !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt past the end: error %v, want io.EOF", err)
	}
}

// Ensure segment file names carry the zero-padded base and parse back.
func TestSegmentFileName(t *testing.T) {
	for _, base := range []uint64{0, 1, 12345, 1<<63 + 7, math.MaxUint64} {
		name := SegmentFileName(base)
		if len(name) != 20+len(SegmentExt) {
			t.Errorf("SegmentFileName(%d) = %q: not 20 digits", base, name)
		}
		got, ok := ParseSegmentFileName(name)
		if !ok || got != base {
			t.Errorf("ParseSegmentFileName(%q) = %d, %v; want %d, true", name, got, ok, base)
		}
		if idx := IndexFileName(base); strings.TrimSuffix(idx, IndexExt) != strings.TrimSuffix(name, SegmentExt) {
			t.Errorf("IndexFileName(%d) = %q, SegmentFileName %q", base, idx, name)
		}
	}
	if got := SegmentFileName(42); got != "00000000000000000042.segment" {
		t.Errorf("SegmentFileName(42) = %q", got)
	}
	if got := IndexFileName(42); got != "00000000000000000042.index" {
		t.Errorf("IndexFileName(42) = %q", got)
	}
	for _, name := range []string{
		"",
		".segment",
		"42.segment",
		"0000000000000000042.segment",   // 19 digits
		"000000000000000000042.segment", // 21 digits
		"00000000000000000042.index",
		"00000000000000000042.segment.tmp",
		"0000000000000000004x.segment",
		"+0000000000000000042.segment",
		"-0000000000000000042.segment",
		"99999999999999999999.segment", // overflows uint64
	} {
		if got, ok := ParseSegmentFileName(name); ok {
			t.Errorf("ParseSegmentFileName(%q) = %d, true; want false", name, got)
		}
	}
}

// Ensure readers can read published chunks while the writer appends (run
// with -race).
func TestConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const batches = 50
	tails := make([]chan Tail, 3)
	var wg sync.WaitGroup
	for r := range tails {
		tails[r] = make(chan Tail, batches)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, HeaderSize+MaxBloomSize)
			read := 0
			var next uint64
			for tail := range tails[r] {
				for ; read < tail.Count; read++ {
					rec, err := s.Record(read)
					if err != nil {
						t.Errorf("reader %d: Record(%d): %v", r, read, err)
						return
					}
					h, _, err := s.ReadHeader(int64(rec.Pos), tail.Size, buf)
					if err != nil {
						t.Errorf("reader %d: ReadHeader(%d): %v", r, rec.Pos, err)
						return
					}
					chunk := make([]byte, h.Size())
					if err := s.ReadAt(chunk, int64(rec.Pos)); err != nil {
						t.Errorf("reader %d: ReadAt: %v", r, err)
						return
					}
					if _, err := Verify(chunk); err != nil || h.ChunkID != next {
						t.Errorf("reader %d: chunk %d: id %d, want %d; %v", r, read, h.ChunkID, next, err)
						return
					}
					next = h.NextOffset()
				}
			}
		}()
	}
	for i := range batches {
		appendChunks(t, s, mixedSpecs(1+i%5, int64(i)*100)...)
		for _, ch := range tails {
			ch <- s.Tail()
		}
	}
	for _, ch := range tails {
		close(ch)
	}
	wg.Wait()
}

// goldenDir holds a segment written by this package, to catch any change of
// the file format: new code must write the same bytes and read them back.
const goldenDir = "testdata/golden"

// Ensure the segment and index files for fixed chunks are byte-identical to
// the checked-in golden files, and that Open reads those files. Run with
// -rewrite after an intended format change (with a new SegmentVersion or
// IndexVersion).
func TestGoldenFiles(t *testing.T) {
	dir := t.TempDir()
	specs := mixedSpecs(6, 1_700_000_000_000)
	specs = append(specs, chunkSpec{typ: ChunkTrackingSnapshot, ts: 1_700_000_000_100, epoch: 3,
		entries: []testEntry{subBatch("snapshot")}})
	s, chunks := createSegment(t, dir, 500, 3, specs)
	mustClose(t, s)
	for _, name := range []string{SegmentFileName(500), IndexFileName(500)} {
		got := readFile(t, dir, name)
		if *rewrite {
			if err := os.MkdirAll(goldenDir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, goldenDir, name, got)
			continue
		}
		want := readFile(t, goldenDir, name)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s:\n got % x\nwant % x", name, goldenDir, got, want)
		}
	}
	gdir := t.TempDir()
	copySegment(t, goldenDir, gdir, 500)
	g, rec := mustOpen(t, gdir, 500)
	defer g.Close()
	if rec.Repaired() {
		t.Fatalf("Open of the golden files repaired: %+v", rec)
	}
	checkChunks(t, g, chunks)
}

// Ensure TruncateTo keeps exactly the first n chunks, in memory and on
// disk, and that appends continue from there.
func TestTruncateTo(t *testing.T) {
	dir := t.TempDir()
	seg, err := Create(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	var b Builder
	var sizes []int64
	for i := range 5 {
		b.Begin(nil, ChunkUser, uint64(i), 0)
		if err := b.AddEntry(AppendSimpleEntry(nil, []byte("x")), 1, nil); err != nil {
			t.Fatal(err)
		}
		buf, h := b.Finish(int64(i), 1, nil)
		if err := seg.Append(buf, []Header{h}); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, seg.Size())
	}
	if err := seg.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if got, want := seg.Tail(), (Tail{Size: sizes[1], Count: 2}); got != want {
		t.Fatalf("tail %+v, want %+v", got, want)
	}
	if rec, h, ok := seg.Last(); !ok || rec.ChunkID != 1 || h.ChunkID != 1 {
		t.Fatalf("last %+v %+v %v, want chunk 1", rec, h, ok)
	}
	seg.Close()
	seg, _, err = Recover(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seg.Tail(), (Tail{Size: sizes[1], Count: 2}); got != want {
		t.Fatalf("reopened tail %+v, want %+v", got, want)
	}
	if err := seg.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	if got, want := seg.Tail(), (Tail{Size: FileHeaderSize, Count: 0}); got != want {
		t.Fatalf("tail %+v, want %+v", got, want)
	}
}
