package segment

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Run a target with: go test -run=^$ -fuzz=FuzzOpen -fuzztime=30s ./segment/
// Crashers the tool writes to testdata/fuzz/<target> stay as regression
// tests that plain go test runs.

// fuzzChunks returns seed chunks of every shape: plain, Bloom and trailer,
// sub-batches compressed with each codec, tracking chunks.
func fuzzChunks(tb testing.TB) [][]byte {
	var out [][]byte
	full, _, _ := fullChunk(tb, nil)
	out = append(out, full)
	var id uint64
	for _, spec := range mixedSpecs(4, 1000) {
		c, h := buildChunk(tb, nil, id, spec)
		out = append(out, c)
		id = h.NextOffset()
	}
	for _, c := range append([]Compression{CompressionNone}, codecs...) {
		var e testEntry
		if c == CompressionNone {
			e = subBatch("x", "yy", "zzz")
		} else {
			e = compressed(tb, c, []byte("x"), []byte("yy"), []byte("zzz"))
		}
		chunk, _ := buildChunk(tb, nil, 0, chunkSpec{ts: 1, epoch: 1, entries: []testEntry{e, simple("after")}})
		out = append(out, chunk)
	}
	return out
}

// Ensure ParseHeader never panics and what it accepts re-encodes to the
// same bytes and satisfies the documented bounds.
func FuzzParseHeader(f *testing.F) {
	f.Add(goldenHeaderBytes)
	for _, c := range fuzzChunks(f) {
		f.Add(c[:HeaderSize])
	}
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if got := h.AppendTo(nil); !bytes.Equal(got, b[:HeaderSize]) {
			t.Fatalf("re-encoded header:\n got % x\nwant % x", got, b[:HeaderSize])
		}
		if h.Type > ChunkTrackingSnapshot || h.NumEntries == 0 || h.NumRecords < uint32(h.NumEntries) ||
			h.DataLen > MaxDataLen || h.TrailerLen > MaxTrailerLen ||
			(h.BloomSize != 0 && h.BloomSize < MinBloomSize) || h.NextOffset() < h.ChunkID {
			t.Fatalf("accepted out-of-bounds header %+v", h)
		}
	})
}

// Ensure Verify never panics on arbitrary chunk bytes, and a chunk it
// accepts has a header that re-encodes to its first 48 bytes, the size it
// says, and entries that parse.
func FuzzVerify(f *testing.F) {
	for _, c := range fuzzChunks(f) {
		f.Add(c)
	}
	f.Add(goldenHeaderBytes)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Verify(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if got := h.AppendTo(nil); !bytes.Equal(got, b[:HeaderSize]) {
			t.Fatalf("re-encoded header:\n got % x\nwant % x", got, b[:HeaderSize])
		}
		if h.Size() != int64(len(b)) {
			t.Fatalf("header size %d, chunk %d bytes", h.Size(), len(b))
		}
		var entries, records uint32
		for data := chunkData(b, &h); len(data) > 0; {
			e, rest, err := ParseEntry(data)
			if err != nil {
				t.Fatalf("accepted chunk has a bad entry: %v", err)
			}
			entries++
			records += e.Records
			data = rest
		}
		if entries != uint32(h.NumEntries) || records != h.NumRecords {
			t.Fatalf("accepted chunk holds %d entries, %d records; header %d, %d", entries, records, h.NumEntries, h.NumRecords)
		}
		// Decompression may fail (Verify does not decompress) but must not
		// panic.
		_, _ = Records(chunkData(b, &h), nil, func([]byte) bool { return true })
	})
}

// Ensure ParseEntry never panics, and an entry it accepts is a prefix of the
// input that re-encodes to the same bytes.
func FuzzParseEntry(f *testing.F) {
	for _, e := range []testEntry{
		simple("hello"), simple(""), subBatch("a", "bb"),
		compressed(f, CompressionGzip, []byte("a")), compressed(f, CompressionZstd, []byte("b"), []byte("c")),
	} {
		f.Add(e.raw)
	}
	f.Add([]byte{0x90, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, rest, err := ParseEntry(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("error %v is not ErrInvalidEntry", err)
			}
			return
		}
		if len(e.Raw)+len(rest) != len(b) || !bytes.Equal(e.Raw, b[:len(e.Raw)]) {
			t.Fatalf("Raw (%d bytes) and rest (%d bytes) do not split the %d-byte input", len(e.Raw), len(rest), len(b))
		}
		var re []byte
		if e.SubBatch {
			if e.Records == 0 || e.Uncompressed > MaxSubBatchUncompressed || uint64(e.Records)*4 > uint64(e.Uncompressed) ||
				e.Compression > CompressionZstd || (e.Compression != CompressionNone && len(e.Data) == 0) {
				t.Fatalf("accepted invalid sub-batch %+v", e)
			}
			re = AppendCompressedSubBatch(nil, e.Compression, uint16(e.Records), e.Uncompressed, e.Data)
			re[0] |= e.Raw[0] & 0x0f // reserved bits, ignored
		} else {
			if e.Records != 1 {
				t.Fatalf("simple entry with %d records", e.Records)
			}
			re = AppendSimpleEntry(nil, e.Data)
		}
		if !bytes.Equal(re, e.Raw) {
			t.Fatalf("re-encoded entry:\n got % x\nwant % x", re, e.Raw)
		}
	})
}

// Ensure Records never panics or allocates beyond the sub-batch bound, and
// when it succeeds yields exactly the records the entries declare.
func FuzzRecords(f *testing.F) {
	for _, c := range fuzzChunks(f) {
		h, _ := ParseHeader(c)
		f.Add(chunkData(c, &h))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var n uint32
		scratch, err := Records(data, nil, func(r []byte) bool {
			n++
			return true
		})
		if cap(scratch) > MaxSubBatchUncompressed+1 {
			t.Fatalf("scratch grew to %d bytes", cap(scratch))
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("error %v is not ErrInvalidEntry", err)
			}
			return
		}
		var want uint32
		for len(data) > 0 {
			e, rest, err := ParseEntry(data)
			if err != nil {
				t.Fatalf("Records succeeded over a bad entry: %v", err)
			}
			want += e.Records
			data = rest
		}
		if n != want {
			t.Fatalf("Records yielded %d records, entries declare %d", n, want)
		}
	})
}

// Ensure Decompress never panics, returns exactly the declared size on
// success, and never more than one byte past it on failure.
func FuzzDecompress(f *testing.F) {
	for _, c := range codecs {
		recs := [][]byte{[]byte("x"), []byte("yy"), []byte("zzz")}
		f.Add(uint8(c), uint32(len(encodeRecords(recs))), clientCompress(f, c, recs))
	}
	f.Add(uint8(CompressionNone), uint32(3), []byte("abc"))
	f.Fuzz(func(t *testing.T, codec uint8, uncompressed uint32, data []byte) {
		uncompressed %= 1<<20 + 1 // keep each run fast; the 64 MiB bound has unit tests
		out, err := Decompress([]byte("p"), Compression(codec), data, uncompressed)
		if string(out[:1]) != "p" {
			t.Fatalf("prefix overwritten")
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("error %v is not ErrInvalidEntry", err)
			}
			if len(out) > 1+int(uncompressed)+1 {
				t.Fatalf("failed Decompress kept %d bytes for %d declared", len(out)-1, uncompressed)
			}
			return
		}
		if len(out)-1 != int(uncompressed) {
			t.Fatalf("Decompress returned %d bytes, %d declared", len(out)-1, uncompressed)
		}
	})
}

// fuzzBase is the base offset of the segments FuzzOpen writes.
const fuzzBase = 100

// validChain returns the chunks Open may keep in a segment file: the valid
// chunks from the start whose ids follow on from the base. It is computed
// here, without Open.
func validChain(seg []byte) []storedChunk {
	var out []storedChunk
	next := uint64(fuzzBase)
	for pos := int64(FileHeaderSize); pos < int64(len(seg)); {
		h, err := ParseHeader(seg[pos:])
		if err != nil || pos+h.Size() > int64(len(seg)) || h.ChunkID != next {
			break
		}
		chunk := seg[pos : pos+h.Size()]
		if _, err := Verify(chunk); err != nil {
			break
		}
		out = append(out, storedChunk{hdr: h, pos: pos, bytes: chunk})
		next = h.NextOffset()
		pos += h.Size()
	}
	return out
}

// Ensure Open never panics or fails on arbitrary bytes after a valid segment
// header, whatever the index holds; that what it keeps is valid; and that
// the segment is writable afterwards.
//
// The index is either idxTail as is, header included (rawIndex), or what a
// crash leaves: the correct index cut at idxCut, with idxTail (zeros, a torn
// record, garbage) after it. When the index is crash-shaped (see
// crashShaped), Open must keep exactly the valid chain of chunks from the
// start, byte-identical. Otherwise the index vouches for a valid chunk that
// the chain does not reach, or in the wrong slot; Open validates only the
// index's tail (its cost must not depend on the number of chunks), so it
// then keeps what the index says, and the checks are those it promises for
// any index: the last chunk and every chunk it indexed itself verify and
// match their records, and the kept extent ends at the file's end.
func FuzzOpen(f *testing.F) {
	var seg []byte
	var id uint64 = fuzzBase
	for _, spec := range mixedSpecs(5, 1000) {
		var h Header
		seg, h = buildChunk(f, seg, id, spec)
		id = h.NextOffset()
	}
	chain := validChain(append(appendFileHeader(nil, segmentMagic), seg...))
	fullIdx := indexOf(chain)
	f.Add(seg, uint16(len(fullIdx)), []byte{}, false)
	f.Add(seg, uint16(len(fullIdx)-IndexRecordSize), []byte{}, false)
	f.Add(seg[:len(seg)-7], uint16(len(fullIdx)), []byte{}, false)
	f.Add(seg, uint16(len(fullIdx)), make([]byte, 3*IndexRecordSize), false)
	f.Add(seg, uint16(len(fullIdx)-10), []byte{1, 2, 3}, false)
	f.Add(seg, uint16(0), []byte{}, false)
	f.Add(seg, uint16(0), fullIdx, true)
	f.Add(seg, uint16(0), fullIdx[:len(fullIdx)-5], true)
	f.Add([]byte{}, uint16(0), []byte{}, false)
	f.Add(seg[:100], uint16(0), []byte("WRNI\x00\x00\x00\x01garbage"), true)
	f.Fuzz(fuzzOpen)
}

// fuzzOpen is FuzzOpen's body.
func fuzzOpen(t *testing.T, segTail []byte, idxCut uint16, idxTail []byte, rawIndex bool) {
	{
		dir := t.TempDir()
		seg := append(appendFileHeader(nil, segmentMagic), segTail...)
		chain := validChain(seg)
		idx := idxTail
		if !rawIndex {
			full := indexOf(chain)
			idx = append(full[:int(idxCut)%(len(full)+1)], idxTail...)
		}
		writeFile(t, dir, SegmentFileName(fuzzBase), seg)
		writeFile(t, dir, IndexFileName(fuzzBase), idx)

		s, rec, err := Open(dir, fuzzBase)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if crashShaped(seg, idx, chain) {
			checkChunks(t, s, chain)
		} else {
			checkKept(t, s, rec)
		}
		if st, err := os.Stat(filepath.Join(dir, SegmentFileName(fuzzBase))); err != nil || st.Size() != s.Size() {
			t.Fatalf("segment file is %d bytes (%v), Size %d", st.Size(), err, s.Size())
		}

		next := uint64(fuzzBase)
		if _, h, ok := s.Last(); ok {
			next = h.NextOffset()
		}
		n := s.Count()
		added := appendChunks(t, s, mixedSpecs(2, 5000)[1])
		if added[0].hdr.ChunkID != next {
			t.Fatalf("appended chunk id %d, want %d", added[0].hdr.ChunkID, next)
		}
		mustClose(t, s)
		s, rec, err = Open(dir, fuzzBase)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s.Close()
		if rec.Repaired() || s.Count() != n+1 {
			t.Fatalf("reopen after append: Recovery %+v, Count %d; want none, %d", rec, s.Count(), n+1)
		}
		checkKept(t, s, rec)
	}
}

// crashShaped reports whether idx is an index a crash can leave for the
// segment file seg whose valid chain is chain: a bad header, or records
// equal to the chain's for a prefix and then none that describes a valid
// chunk of seg.
func crashShaped(seg, idx []byte, chain []storedChunk) bool {
	if len(idx) < FileHeaderSize || !bytes.Equal(idx[:FileHeaderSize], appendFileHeader(nil, indexMagic)) {
		return true // Open rebuilds the whole index
	}
	i := 0
	for recs := idx[FileHeaderSize:]; len(recs) >= IndexRecordSize; recs = recs[IndexRecordSize:] {
		r := parseIndexRecord(recs)
		if i < len(chain) && r == chain[i].record() {
			i++
			continue
		}
		i = len(chain) + 1 // past the intact prefix
		if describesChunk(seg, &r) {
			return false
		}
	}
	return true
}

// describesChunk reports whether r is the record of a valid chunk in seg.
func describesChunk(seg []byte, r *IndexRecord) bool {
	pos := int64(r.Pos)
	if pos < FileHeaderSize || pos >= int64(len(seg)) {
		return false
	}
	h, err := ParseHeader(seg[pos:])
	if err != nil || pos+h.Size() > int64(len(seg)) || *r != RecordFor(&h, pos) {
		return false
	}
	_, err = Verify(seg[pos : pos+h.Size()])
	return err == nil
}

// checkKept checks what Open promises for any index: the chunks it indexed
// itself and the last chunk verify and match their records, and the last
// chunk ends at Size.
func checkKept(t *testing.T, s *Segment, rec Recovery) {
	t.Helper()
	n := s.Count()
	if n == 0 {
		if s.Size() != FileHeaderSize {
			t.Fatalf("no chunks, Size %d", s.Size())
		}
		return
	}
	for i := min(n-1, n-rec.AddedRecords); i < n; i++ {
		r, err := s.Record(i)
		if err != nil {
			t.Fatalf("Record(%d): %v", i, err)
		}
		h, _, err := s.ReadHeader(int64(r.Pos), s.Size(), nil)
		if err != nil {
			t.Fatalf("ReadHeader(record %d at %d): %v", i, r.Pos, err)
		}
		chunk := make([]byte, h.Size())
		if err := s.ReadAt(chunk, int64(r.Pos)); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(chunk); err != nil {
			t.Fatalf("kept chunk %d at %d does not verify: %v", i, r.Pos, err)
		}
		if r != RecordFor(&h, int64(r.Pos)) {
			t.Fatalf("record %d = %+v, chunk header %+v", i, r, h)
		}
		if i == n-1 && int64(r.Pos)+h.Size() != s.Size() {
			t.Fatalf("last chunk ends at %d, Size %d", int64(r.Pos)+h.Size(), s.Size())
		}
	}
}

// Ensure Match never panics on Bloom bytes read from disk, of any length
// and either format, and answers as the filters are defined: for FilterV2
// as the bits-and-blooms filter over the same bits, for FilterV1 as the
// two xxhash64 bits (or bit 0 for match-unfiltered); a filter of all ones
// matches, and no Bloom bytes match only match-unfiltered readers.
func FuzzMatch(f *testing.F) {
	f.Add(uint8(FilterV2), bloomOf(16, []byte("eu"), nil), []byte("eu"), false)
	f.Add(uint8(FilterV2), bloomOf(255, filterValues("x", 50)...), []byte("x-7"), true)
	f.Add(uint8(FilterV1), v1BloomOf(16, []byte("eu"), nil), []byte("us"), true)
	f.Add(uint8(FilterV1), v1BloomOf(32, []byte("eu")), []byte("eu"), false)
	f.Add(uint8(FilterV2), []byte{}, []byte("a"), true)
	f.Add(uint8(7), []byte{1}, []byte("a"), false)
	f.Fuzz(func(t *testing.T, format uint8, bloom, value []byte, unfiltered bool) {
		if len(bloom) > 2*MaxBloomSize || len(value) == 0 {
			return
		}
		m := NewMatcher([][]byte{value}, unfiltered)
		got := m.Match(FilterFormat(format), bloom)
		if got != m.Match(FilterFormat(format), bloom) {
			t.Fatal("Match differs between two calls")
		}
		var want bool
		switch {
		case len(bloom) == 0:
			want = unfiltered
		case FilterFormat(format) == FilterV2:
			lib := libFilter(bloom)
			want = lib.Test(value) || unfiltered && lib.Test(nil)
		case FilterFormat(format) == FilterV1:
			want = v1Holds(bloom, value) || unfiltered && bloom[0]&0x80 != 0
		default:
			want = true
		}
		if got != want {
			t.Fatalf("Match(%d, % x) for %q (unfiltered %v) = %v, want %v", format, bloom, value, unfiltered, got, want)
		}
		if len(bloom) > 0 && !m.Match(FilterFormat(format), bytes.Repeat([]byte{0xff}, len(bloom))) {
			t.Fatalf("format %d: a filter of all ones does not match", format)
		}
	})
}
