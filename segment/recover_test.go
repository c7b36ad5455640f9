package segment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// crashFixture is a closed segment to damage: its chunks and file bytes.
type crashFixture struct {
	base   uint64
	chunks []storedChunk
	seg    []byte // the segment file
	idx    []byte // the index file
	// idxAfter[k] is the index file as it was after the first k chunks were
	// appended: a crash between a chunk write and its index write.
	idxAfter [][]byte
}

// newCrashFixture writes a segment of n mixed chunks (Bloom bytes and
// trailers in some, the last one with both and a sub-batch), one chunk per
// Append.
func newCrashFixture(t *testing.T, n int) *crashFixture {
	t.Helper()
	dir := t.TempDir()
	f := &crashFixture{base: 1000}
	s, err := Create(dir, f.base)
	if err != nil {
		t.Fatal(err)
	}
	f.idxAfter = append(f.idxAfter, readFile(t, dir, IndexFileName(f.base)))
	for _, spec := range mixedSpecs(n, 1_700_000_000_000) {
		f.chunks = append(f.chunks, appendChunks(t, s, spec)...)
		f.idxAfter = append(f.idxAfter, readFile(t, dir, IndexFileName(f.base)))
	}
	mustClose(t, s)
	f.seg = readFile(t, dir, SegmentFileName(f.base))
	f.idx = readFile(t, dir, IndexFileName(f.base))
	last := f.chunks[len(f.chunks)-1]
	if last.hdr.BloomSize == 0 || last.hdr.TrailerLen == 0 || last.hdr.NumRecords <= uint32(last.hdr.NumEntries) {
		t.Fatalf("test setup: last chunk %+v lacks Bloom bytes, trailer or sub-batch", last.hdr)
	}
	return f
}

// last is the last chunk of the fixture.
func (f *crashFixture) last() storedChunk { return f.chunks[len(f.chunks)-1] }

// indexOf returns the index file for chunks.
func indexOf(chunks []storedChunk) []byte {
	b := appendFileHeader(nil, indexMagic)
	for _, c := range chunks {
		r := c.record()
		b = r.AppendTo(b)
	}
	return b
}

// openDamaged writes seg and idx (nil: no index file) to a fresh directory
// and opens the segment there.
func (f *crashFixture) openDamaged(t *testing.T, seg, idx []byte) (*Segment, Recovery, string) {
	t.Helper()
	dir, err := os.MkdirTemp(t.TempDir(), "crash")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, SegmentFileName(f.base), seg)
	if idx != nil {
		writeFile(t, dir, IndexFileName(f.base), idx)
	}
	s, rec := mustOpen(t, dir, f.base)
	return s, rec, dir
}

// checkRecovered checks that the segment Open repaired in dir holds exactly
// want, byte-identical, with files cut to match and an index identical to a
// freshly written one; then that a new chunk appends and survives a
// reopen. It closes s and removes dir.
func checkRecovered(t *testing.T, s *Segment, dir string, want []storedChunk) {
	t.Helper()
	defer os.RemoveAll(dir)
	checkChunks(t, s, want)
	if st, err := os.Stat(s.Path()); err != nil || st.Size() != s.Size() {
		t.Fatalf("segment file is %d bytes (%v), Size %d", st.Size(), err, s.Size())
	}
	if got, w := readFile(t, dir, IndexFileName(s.Base())), indexOf(want); !bytes.Equal(got, w) {
		t.Fatalf("index file after recovery:\n got % x\nwant % x", got, w)
	}
	added := appendChunks(t, s, mixedSpecs(2, 1_800_000_000_000)[1])
	mustClose(t, s)
	s2, rec := mustOpen(t, dir, s.Base())
	defer s2.Close()
	if rec.Repaired() {
		t.Fatalf("reopen after an append repaired %+v", rec)
	}
	checkChunks(t, s2, append(want[:len(want):len(want)], added...))
}

// Ensure a segment cut at any byte of its last chunk opens with exactly the
// whole chunks before it, with the index complete or missing the last
// record.
func TestRecoverTruncatedLastChunk(t *testing.T) {
	f := newCrashFixture(t, 6)
	last := f.last()
	n := len(f.chunks)
	for _, idxCase := range []struct {
		name string
		idx  []byte
	}{
		{"index complete", f.idx},
		{"index without the last record", f.idxAfter[n-1]},
	} {
		t.Run(idxCase.name, func(t *testing.T) {
			for cut := last.pos; cut <= last.end(); cut++ {
				s, rec, dir := f.openDamaged(t, f.seg[:cut], idxCase.idx)
				want := f.chunks[:n-1]
				var wantRec Recovery
				switch {
				case cut == last.end() && idxCase.name == "index complete":
					want = f.chunks // nothing lost
				case cut == last.end():
					want = f.chunks
					wantRec.AddedRecords = 1
				case idxCase.name == "index complete":
					wantRec = Recovery{TruncatedBytes: cut - last.pos, DroppedRecords: 1}
				default:
					wantRec = Recovery{TruncatedBytes: cut - last.pos}
				}
				if rec != wantRec {
					t.Fatalf("cut at %d (chunk %d..%d): Recovery %+v, want %+v", cut, last.pos, last.end(), rec, wantRec)
				}
				checkRecovered(t, s, dir, want)
			}
		})
	}
}

// Ensure a last chunk with any one byte garbled is dropped whole, never
// returned, with the index complete or missing the last record.
func TestRecoverGarbledLastChunk(t *testing.T) {
	f := newCrashFixture(t, 6)
	last := f.last()
	n := len(f.chunks)
	for _, idxCase := range []struct {
		name    string
		idx     []byte
		dropped int
	}{
		{"index complete", f.idx, 1},
		{"index without the last record", f.idxAfter[n-1], 0},
	} {
		t.Run(idxCase.name, func(t *testing.T) {
			seg := bytes.Clone(f.seg)
			for i := last.pos; i < last.end(); i++ {
				seg[i] ^= 0xff
				s, rec, dir := f.openDamaged(t, seg, idxCase.idx)
				seg[i] ^= 0xff
				wantRec := Recovery{TruncatedBytes: last.hdr.Size(), DroppedRecords: idxCase.dropped}
				if rec != wantRec {
					t.Fatalf("byte %d (chunk %d..%d) garbled: Recovery %+v, want %+v", i, last.pos, last.end(), rec, wantRec)
				}
				checkRecovered(t, s, dir, f.chunks[:n-1])
			}
		})
	}
}

// Ensure an index cut at any byte, from an empty file to the whole index,
// is completed from the segment with identical records.
func TestRecoverTruncatedIndex(t *testing.T) {
	f := newCrashFixture(t, 6)
	n := len(f.chunks)
	for cut := 0; cut <= len(f.idx); cut++ {
		s, rec, dir := f.openDamaged(t, f.seg, f.idx[:cut])
		kept := 0
		var wantRec Recovery
		if cut < FileHeaderSize {
			wantRec.IndexRebuilt = true
		} else {
			kept = (cut - FileHeaderSize) / IndexRecordSize
			if (cut-FileHeaderSize)%IndexRecordSize != 0 {
				wantRec.DroppedRecords = 1 // the partial record
			}
		}
		wantRec.AddedRecords = n - kept
		if rec != wantRec {
			t.Fatalf("index cut at %d: Recovery %+v, want %+v", cut, rec, wantRec)
		}
		checkRecovered(t, s, dir, f.chunks)
	}
}

// Ensure the index is repaired in the other ways a crash or a bad disk
// leaves it: zeros after or over its tail, no file, a garbled last record,
// a foreign header, or records that do not describe this segment.
func TestRecoverDamagedIndex(t *testing.T) {
	f := newCrashFixture(t, 6)
	n := len(f.chunks)
	type damage struct {
		name string
		idx  []byte
		rec  Recovery
	}
	var cases []damage
	for _, k := range []int{1, 28, IndexRecordSize, IndexRecordSize + 1, 5 * IndexRecordSize, 4096} {
		dropped := k / IndexRecordSize
		if k%IndexRecordSize != 0 {
			dropped++
		}
		cases = append(cases, damage{
			fmt.Sprintf("%d zero bytes appended", k),
			append(bytes.Clone(f.idx), make([]byte, k)...),
			Recovery{DroppedRecords: dropped},
		})
	}
	for k := 1; k <= n; k++ {
		idx := bytes.Clone(f.idx)
		clear(idx[len(idx)-k*IndexRecordSize:])
		cases = append(cases, damage{fmt.Sprintf("last %d records zeroed", k), idx, Recovery{DroppedRecords: k, AddedRecords: k}})
	}
	for _, k := range []int{10, IndexRecordSize - 1} { // bytes 19-28 hold the non-zero epoch
		idx := bytes.Clone(f.idx)
		clear(idx[len(idx)-k:])
		cases = append(cases, damage{fmt.Sprintf("last %d bytes zeroed", k), idx, Recovery{DroppedRecords: 1, AddedRecords: 1}})
	}
	for i := len(f.idx) - IndexRecordSize; i < len(f.idx); i++ {
		idx := bytes.Clone(f.idx)
		idx[i] ^= 0xff
		cases = append(cases, damage{fmt.Sprintf("last record byte %d garbled", i), idx, Recovery{DroppedRecords: 1, AddedRecords: 1}})
	}
	cases = append(cases, damage{"no index file", nil, Recovery{IndexRebuilt: true, AddedRecords: n}})
	for _, hdr := range []string{"WRNX\x00\x00\x00\x01", "WRNI\x00\x00\x00\x02", "WRNS\x00\x00\x00\x01", "OSII\x00\x00\x00\x01", "\x00\x00\x00\x00\x00\x00\x00\x00"} {
		idx := append([]byte(hdr), f.idx[FileHeaderSize:]...)
		cases = append(cases, damage{fmt.Sprintf("header %q", hdr), idx, Recovery{IndexRebuilt: true, AddedRecords: n}})
	}
	{
		// The only record is for the third chunk: the first record must be
		// for the first chunk.
		idx := appendFileHeader(nil, indexMagic)
		r := f.chunks[2].record()
		idx = r.AppendTo(idx)
		cases = append(cases, damage{"only record not for the first chunk", idx, Recovery{DroppedRecords: 1, AddedRecords: n}})
	}
	{
		// Records of another segment: same positions, other ids.
		idx := appendFileHeader(nil, indexMagic)
		for _, c := range f.chunks {
			r := c.record()
			r.ChunkID += 5000
			idx = r.AppendTo(idx)
		}
		cases = append(cases, damage{"records of another segment", idx, Recovery{DroppedRecords: n, AddedRecords: n}})
	}
	{
		// Records pointing past the end of the segment file.
		idx := bytes.Clone(f.idx)
		for _, c := range f.chunks[3:] {
			r := c.record()
			r.Pos += 1 << 20
			idx = r.AppendTo(idx)
		}
		cases = append(cases, damage{"records past the end", idx, Recovery{DroppedRecords: n - 3}})
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			s, rec, dir := f.openDamaged(t, f.seg, tt.idx)
			if rec != tt.rec {
				t.Fatalf("Recovery %+v, want %+v", rec, tt.rec)
			}
			checkRecovered(t, s, dir, f.chunks)
		})
	}
}

// Ensure chunks written before a crash that came before their index
// records were written are indexed again, for a crash after each chunk.
func TestRecoverMissingIndexRecords(t *testing.T) {
	f := newCrashFixture(t, 6)
	n := len(f.chunks)
	for k := 0; k <= n; k++ {
		s, rec, dir := f.openDamaged(t, f.seg, f.idxAfter[k])
		if want := (Recovery{AddedRecords: n - k}); rec != want {
			t.Fatalf("index of %d chunks: Recovery %+v, want %+v", k, rec, want)
		}
		checkRecovered(t, s, dir, f.chunks)
	}
}

// Ensure a segment file shorter than its header (a crash while creating it)
// opens empty and writable, whatever its index says.
func TestRecoverShortSegmentFile(t *testing.T) {
	f := newCrashFixture(t, 6)
	for size := range FileHeaderSize {
		for _, idxCase := range []struct {
			name string
			idx  []byte
			rec  Recovery
		}{
			{"no index", nil, Recovery{IndexRebuilt: true}},
			{"empty index", f.idxAfter[0], Recovery{}},
			{"stale index", f.idx, Recovery{DroppedRecords: len(f.chunks)}},
		} {
			s, rec, dir := f.openDamaged(t, f.seg[:size], idxCase.idx)
			if rec != idxCase.rec {
				t.Fatalf("%d-byte segment, %s: Recovery %+v, want %+v", size, idxCase.name, rec, idxCase.rec)
			}
			if got := readFile(t, dir, SegmentFileName(f.base)); string(got) != "WRNS\x00\x00\x00\x02" {
				t.Fatalf("%d-byte segment, %s: file is now %q, want a fresh header", size, idxCase.name, got)
			}
			checkRecovered(t, s, dir, nil)
		}
	}
}

// Ensure a segment file with a foreign or future header is reported as
// corrupt and neither file is touched.
func TestRecoverForeignHeader(t *testing.T) {
	f := newCrashFixture(t, 6)
	for _, hdr := range []string{"OSIL\x00\x00\x00\x01", "WRNS\x00\x00\x00\x03", "WRNI\x00\x00\x00\x01", "WRNS\x00\x00\x01\x00"} {
		for _, withIndex := range []bool{true, false} {
			t.Run(fmt.Sprintf("%q index=%v", hdr, withIndex), func(t *testing.T) {
				dir := t.TempDir()
				seg := append([]byte(hdr), f.seg[FileHeaderSize:]...)
				writeFile(t, dir, SegmentFileName(f.base), seg)
				if withIndex {
					writeFile(t, dir, IndexFileName(f.base), f.idx)
				}
				s, _, err := Open(dir, f.base)
				if !IsCorrupt(err) {
					t.Fatalf("Open error %v, want a corruption error", err)
				}
				if s != nil {
					t.Fatalf("Open returned a segment with error %v", err)
				}
				if got := readFile(t, dir, SegmentFileName(f.base)); !bytes.Equal(got, seg) {
					t.Fatalf("segment file changed")
				}
				idx, err := os.ReadFile(filepath.Join(dir, IndexFileName(f.base)))
				switch {
				case withIndex && !bytes.Equal(idx, f.idx):
					t.Fatalf("index file changed: %v", err)
				case !withIndex && !os.IsNotExist(err):
					t.Fatalf("index file created: %v", err)
				}
			})
		}
	}
}

// Ensure a segment whose file header a power cut left torn (a prefix of
// the header, then zeros: created and never synced) opens empty, with a
// fresh header, whatever followed: nothing in it was synced.
func TestRecoverTornHeader(t *testing.T) {
	f := newCrashFixture(t, 6)
	for _, hdr := range []string{"WRNS\x00\x00\x00\x00", "WR\x00\x00\x00\x00\x00\x00", "\x00\x00\x00\x00\x00\x00\x00\x00"} {
		for _, withIndex := range []bool{true, false} {
			t.Run(fmt.Sprintf("%q index=%v", hdr, withIndex), func(t *testing.T) {
				seg := append([]byte(hdr), f.seg[FileHeaderSize:]...)
				var idx []byte
				if withIndex {
					idx = f.idx
				}
				s, rec, dir := f.openDamaged(t, seg, idx)
				if rec.TruncatedBytes != int64(len(seg)-FileHeaderSize) {
					t.Fatalf("Recovery %+v, want all %d bytes after the header truncated", rec, len(seg)-FileHeaderSize)
				}
				checkRecovered(t, s, dir, nil)
			})
		}
	}
}

// Ensure Recover validates every chunk of the segment, not only the tail: a
// power cut that wrote the unsynced part back out of order can leave a
// zeroed or garbled chunk in the middle behind a valid last chunk and a
// complete index. The segment ends before the damaged chunk; the index
// records after it are dropped.
func TestRecoverDamagedMiddle(t *testing.T) {
	for _, damage := range []string{"garbled", "zero page"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			s, chunks := createSegment(t, dir, 0, 50, mixedSpecs(300, 0))
			mustClose(t, s)
			mid := chunks[150]
			seg := readFile(t, dir, SegmentFileName(0))
			switch damage {
			case "garbled":
				seg[mid.pos+mid.hdr.DataOffset()] ^= 0xff // first byte of its entry data
			case "zero page":
				p := (mid.pos + mid.hdr.Size() - 1) / 4096 * 4096
				clear(seg[max(p, mid.pos):min(p+4096, int64(len(seg)))])
			}
			writeFile(t, dir, SegmentFileName(0), seg)

			s, rec, err := Recover(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := Recovery{TruncatedBytes: int64(len(seg)) - mid.pos, DroppedRecords: len(chunks) - 150}
			if rec != want {
				t.Fatalf("Recovery %+v, want %+v", rec, want)
			}
			checkRecovered(t, s, dir, chunks[:150])
		})
	}
}

// Ensure Open's cost does not depend on the chunks before the tail (Recover's
// does): with a
// garbled chunk in the middle and an intact tail, Open keeps every chunk,
// which it could only do without verifying the middle.
func TestRecoverTailOnly(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 50, mixedSpecs(300, 0))
	mustClose(t, s)
	mid := chunks[150]
	seg := readFile(t, dir, SegmentFileName(0))
	seg[mid.pos+mid.hdr.DataOffset()] ^= 0xff // first byte of its entry data
	writeFile(t, dir, SegmentFileName(0), seg)

	s, rec := mustOpen(t, dir, 0)
	defer s.Close()
	if rec.Repaired() {
		t.Fatalf("Recovery %+v, want none", rec)
	}
	if s.Count() != len(chunks) || s.Size() != chunks[len(chunks)-1].end() {
		t.Fatalf("Count %d, Size %d; want %d, %d", s.Count(), s.Size(), len(chunks), chunks[len(chunks)-1].end())
	}
	got := make([]byte, mid.hdr.Size())
	if err := s.ReadAt(got, mid.pos); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(got); !IsCorrupt(err) {
		t.Fatalf("the garbled middle chunk verifies (%v): the test does not test anything", err)
	}
}

// Ensure recovery keeps chunks whose timestamps go backwards (a wall clock
// stepped back): they are valid, and Append accepted them. Only the ids
// must follow on.
func TestRecoverTimestampsGoingBack(t *testing.T) {
	dir := t.TempDir()
	specs := mixedSpecs(5, 0)
	for i, ts := range []int64{100, 200, 150, 150, 90} {
		specs[i].ts = ts
	}
	s, chunks := createSegment(t, dir, 0, 1, specs)
	mustClose(t, s)
	for _, idx := range [][]byte{nil, readFile(t, dir, IndexFileName(0))[:FileHeaderSize+IndexRecordSize]} {
		if idx == nil {
			os.Remove(filepath.Join(dir, IndexFileName(0)))
		} else {
			writeFile(t, dir, IndexFileName(0), idx)
		}
		s, rec := mustOpen(t, dir, 0)
		if rec.TruncatedBytes != 0 {
			t.Fatalf("Recovery %+v: truncated valid chunks", rec)
		}
		checkChunks(t, s, chunks)
		mustClose(t, s)
	}
}

// Ensure recovery stops at a chunk whose id does not follow on from the
// previous one (stale data from an earlier life of the file), and keeps
// everything before it.
func TestRecoverChunkIDGap(t *testing.T) {
	dir := t.TempDir()
	s, chunks := createSegment(t, dir, 0, 3, mixedSpecs(3, 0))
	mustClose(t, s)
	// A valid chunk whose id skips one offset.
	stray, h := buildChunk(t, nil, chunks[2].hdr.NextOffset()+1, mixedSpecs(1, 100)[0])
	seg := append(readFile(t, dir, SegmentFileName(0)), stray...)
	for _, idx := range [][]byte{nil, indexOf(chunks)} {
		d := t.TempDir()
		writeFile(t, d, SegmentFileName(0), seg)
		if idx != nil {
			writeFile(t, d, IndexFileName(0), idx)
		}
		s, rec := mustOpen(t, d, 0)
		if rec.TruncatedBytes != h.Size() {
			t.Fatalf("Recovery %+v, want the stray chunk's %d bytes truncated", rec, h.Size())
		}
		checkRecovered(t, s, d, chunks)
	}
	// A first chunk whose id is not the segment's base is not kept.
	d := t.TempDir()
	other, _ := buildChunk(t, nil, 7, mixedSpecs(1, 0)[0])
	writeFile(t, d, SegmentFileName(0), append(appendFileHeader(nil, segmentMagic), other...))
	s, rec := mustOpen(t, d, 0)
	if rec.TruncatedBytes != int64(len(other)) {
		t.Fatalf("Recovery %+v, want the foreign chunk truncated", rec)
	}
	checkRecovered(t, s, d, nil)
}
