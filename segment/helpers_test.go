package segment

import (
	"bytes"
	"fmt"
	"github.com/warren-mq/warren/internal/testutil"
	"os"
	"path/filepath"
	"testing"
)

// TestMain fails the run if a test leaves a goroutine of this package or of
// a codec it uses behind (the zstd and lz4 decoders can start goroutines
// when misconfigured).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := leakedGoroutines(); leaks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of goroutines running code of this
// package or its codecs, giving exiting goroutines a bounded number of
// chances to finish.
func leakedGoroutines() string {
	return testutil.LeakedGoroutines("warren/segment.", "klauspost/compress", "pierrec/lz4")
}

// testEntry is one entry of a test chunk and the records it holds.
type testEntry struct {
	raw     []byte   // encoded entry
	records [][]byte // records it holds, in order
	filter  []byte   // filter value; nil for none
}

// simple returns a simple entry holding rec.
func simple(rec string) testEntry {
	return testEntry{raw: AppendSimpleEntry(nil, []byte(rec)), records: [][]byte{[]byte(rec)}}
}

// filtered returns a simple entry holding rec with filter value f.
func filtered(rec, f string) testEntry {
	e := simple(rec)
	e.filter = []byte(f)
	return e
}

// subBatch returns an uncompressed sub-batch entry holding recs.
func subBatch(recs ...string) testEntry {
	var rs [][]byte
	for _, r := range recs {
		rs = append(rs, []byte(r))
	}
	return testEntry{raw: AppendSubBatch(nil, rs), records: rs}
}

// chunkSpec describes a chunk to build.
type chunkSpec struct {
	typ       ChunkType
	ts        int64
	epoch     uint64
	bloomSize int
	entries   []testEntry
	trailer   []byte
}

// buildChunk appends the chunk described by spec, with id as its chunk id,
// to buf.
func buildChunk(tb testing.TB, buf []byte, id uint64, spec chunkSpec) ([]byte, Header) {
	tb.Helper()
	var b Builder
	b.Begin(buf, spec.typ, id, spec.bloomSize)
	for i, e := range spec.entries {
		if err := b.AddEntry(e.raw, uint32(len(e.records)), e.filter); err != nil {
			tb.Fatalf("AddEntry %d: %v", i, err)
		}
	}
	return b.Finish(spec.ts, spec.epoch, spec.trailer)
}

// storedChunk is a chunk as written to a segment.
type storedChunk struct {
	hdr   Header
	pos   int64  // position in the segment file
	bytes []byte // the whole chunk
}

// bloom returns the chunk's Bloom bytes.
func (c *storedChunk) bloom() []byte { return c.bytes[HeaderSize:c.hdr.DataOffset()] }

// record returns the chunk's index record.
func (c *storedChunk) record() IndexRecord { return RecordFor(&c.hdr, c.pos) }

// end is the position after the chunk.
func (c *storedChunk) end() int64 { return c.pos + c.hdr.Size() }

// appendChunks builds specs as consecutive chunks (ids following on from the
// segment's last chunk or its base) and appends them to s with one Append.
func appendChunks(tb testing.TB, s *Segment, specs ...chunkSpec) []storedChunk {
	tb.Helper()
	id := s.Base()
	if _, h, ok := s.Last(); ok {
		id = h.NextOffset()
	}
	var buf []byte
	var hdrs []Header
	var out []storedChunk
	pos := s.Size()
	for _, spec := range specs {
		start := len(buf)
		var h Header
		buf, h = buildChunk(tb, buf, id, spec)
		hdrs = append(hdrs, h)
		out = append(out, storedChunk{hdr: h, pos: pos + int64(start)})
		id = h.NextOffset()
	}
	for i := range out {
		start := out[i].pos - pos
		out[i].bytes = bytes.Clone(buf[start : start+out[i].hdr.Size()])
	}
	if err := s.Append(buf, hdrs); err != nil {
		tb.Fatalf("Append: %v", err)
	}
	return out
}

// mixedSpecs returns n chunk specs of varied shape: plain, with Bloom bytes,
// with a trailer, with sub-batches, and of each chunk type. Timestamps
// increase by 10 from ts0.
func mixedSpecs(n int, ts0 int64) []chunkSpec {
	var specs []chunkSpec
	for i := range n {
		s := chunkSpec{typ: ChunkUser, ts: ts0 + int64(i)*10, epoch: 1 + uint64(i/4)}
		switch i % 4 {
		case 0:
			s.entries = []testEntry{simple(fmt.Sprintf("msg-%d-a", i)), simple(fmt.Sprintf("msg-%d-b", i))}
		case 1:
			s.bloomSize = 16
			s.entries = []testEntry{
				filtered(fmt.Sprintf("msg-%d-eu", i), "eu"),
				simple(fmt.Sprintf("msg-%d-none", i)),
				subBatch(fmt.Sprintf("msg-%d-s0", i), fmt.Sprintf("msg-%d-s1", i)),
			}
			s.trailer = []byte{0, 3, 'p', 'u', 'b', 0, 0, 0, 0, 0, 0, 0, byte(i)}
		case 2:
			s.typ = ChunkTrackingDelta
			s.entries = []testEntry{simple(fmt.Sprintf("\x01\x03ref%08d", i))}
		case 3:
			s.bloomSize = 32
			s.entries = []testEntry{
				simple(fmt.Sprintf("msg-%d-x", i)),
				filtered(fmt.Sprintf("msg-%d-us", i), "us"),
			}
			s.trailer = []byte("trailer")
		}
		specs = append(specs, s)
	}
	return specs
}

// createSegment creates a segment at base in dir holding the chunks of specs,
// appended in batches of batch chunks. It returns the open segment.
func createSegment(tb testing.TB, dir string, base uint64, batch int, specs []chunkSpec) (*Segment, []storedChunk) {
	tb.Helper()
	s, err := Create(dir, base)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	var chunks []storedChunk
	for len(specs) > 0 {
		n := min(batch, len(specs))
		chunks = append(chunks, appendChunks(tb, s, specs[:n]...)...)
		specs = specs[n:]
	}
	return s, chunks
}

// checkChunks checks that s holds exactly want: count, extent, index
// records, headers, Bloom bytes and chunk bytes.
func checkChunks(tb testing.TB, s *Segment, want []storedChunk) {
	tb.Helper()
	if got := s.Count(); got != len(want) {
		tb.Fatalf("Count = %d, want %d", got, len(want))
	}
	wantSize := int64(FileHeaderSize)
	if len(want) > 0 {
		wantSize = want[len(want)-1].end()
	}
	if got := s.Size(); got != wantSize {
		tb.Fatalf("Size = %d, want %d", got, wantSize)
	}
	if got := s.Tail(); got != (Tail{Size: wantSize, Count: len(want)}) {
		tb.Fatalf("Tail = %+v, want {Size:%d Count:%d}", got, wantSize, len(want))
	}
	first, ok := s.First()
	if ok != (len(want) > 0) {
		tb.Fatalf("First ok = %v with %d chunks", ok, len(want))
	}
	last, lastH, ok := s.Last()
	if ok != (len(want) > 0) {
		tb.Fatalf("Last ok = %v with %d chunks", ok, len(want))
	}
	if len(want) > 0 {
		if w := want[0].record(); first != w {
			tb.Fatalf("First = %+v, want %+v", first, w)
		}
		if w := want[len(want)-1]; last != w.record() || lastH != w.hdr {
			tb.Fatalf("Last = %+v, %+v; want %+v, %+v", last, lastH, w.record(), w.hdr)
		}
	}
	hbuf := make([]byte, HeaderSize+MaxBloomSize)
	for i, c := range want {
		r, err := s.Record(i)
		if err != nil {
			tb.Fatalf("Record(%d): %v", i, err)
		}
		if r != c.record() {
			tb.Fatalf("Record(%d) = %+v, want %+v", i, r, c.record())
		}
		h, bloom, err := s.ReadHeader(c.pos, wantSize, hbuf)
		if err != nil {
			tb.Fatalf("ReadHeader(chunk %d at %d): %v", i, c.pos, err)
		}
		if h != c.hdr {
			tb.Fatalf("ReadHeader(chunk %d) = %+v, want %+v", i, h, c.hdr)
		}
		if !bytes.Equal(bloom, c.bloom()) {
			tb.Fatalf("chunk %d Bloom = %x, want %x", i, bloom, c.bloom())
		}
		got := make([]byte, c.hdr.Size())
		if err := s.ReadAt(got, c.pos); err != nil {
			tb.Fatalf("ReadAt(chunk %d): %v", i, err)
		}
		if !bytes.Equal(got, c.bytes) {
			tb.Fatalf("chunk %d bytes differ:\n got %x\nwant %x", i, got, c.bytes)
		}
	}
	if _, err := s.Record(len(want)); err == nil {
		tb.Fatalf("Record(%d) past the end: no error", len(want))
	}
}

// copySegment copies the files of the segment at base from src to dst.
// A missing file is not copied.
func copySegment(tb testing.TB, src, dst string, base uint64) {
	tb.Helper()
	for _, name := range []string{SegmentFileName(base), IndexFileName(base)} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// readFile returns the contents of dir/name.
func readFile(tb testing.TB, dir, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writeFile replaces dir/name with b.
func writeFile(tb testing.TB, dir, name string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// mustOpen opens the segment at base in dir.
func mustOpen(tb testing.TB, dir string, base uint64) (*Segment, Recovery) {
	tb.Helper()
	s, rec, err := Open(dir, base)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return s, rec
}

// mustClose closes s.
func mustClose(tb testing.TB, s *Segment) {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
}

// recordsOf returns all records of a chunk's entry data.
func recordsOf(tb testing.TB, data []byte) []string {
	tb.Helper()
	var got []string
	if _, err := Records(data, nil, func(r []byte) bool {
		got = append(got, string(r))
		return true
	}); err != nil {
		tb.Fatalf("Records: %v", err)
	}
	return got
}

// chunkData returns the entry data of a whole chunk.
func chunkData(chunk []byte, h *Header) []byte {
	start := h.DataOffset()
	return chunk[start : start+int64(h.DataLen)]
}

// specRecords returns the records of specs' entries, in order.
func specRecords(entries []testEntry) []string {
	var out []string
	for _, e := range entries {
		for _, r := range e.records {
			out = append(out, string(r))
		}
	}
	return out
}
