package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
)

// goldenHeader has a distinct value in every field so that a field written
// at the wrong place or width shows in the bytes.
var goldenHeader = Header{
	Type:       ChunkTrackingDelta,
	NumEntries: 0x0102,
	NumRecords: 0x03040506,
	Timestamp:  0x0708090a0b0c0d0e,
	Epoch:      0x1112131415161718,
	ChunkID:    0x2122232425262728,
	DataCRC:    0xa1a2a3a4,
	DataLen:    0x0b0c0d0e,
	TrailerLen: 0x00c1c2c3,
	BloomSize:  0xd1,
	Check:      0xe1e2e3,
}

var goldenHeaderBytes = []byte{
	0x50,       // 0: magic 5, version 0
	0x01,       // 1: type 1, tracking delta
	0x01, 0x02, // 2-3: nEntries u16
	0x03, 0x04, 0x05, 0x06, // 4-7: nRecords u32
	0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, // 8-15: timestamp i64
	0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, // 16-23: epoch u64
	0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, // 24-31: chunk id u64
	0xa1, 0xa2, 0xa3, 0xa4, // 32-35: data crc u32
	0x0b, 0x0c, 0x0d, 0x0e, // 36-39: data len u32
	0x00, 0xc1, 0xc2, 0xc3, // 40-43: trailer len u32
	0xd1,             // 44: bloom size u8
	0xe1, 0xe2, 0xe3, // 45-47: check, low 24 bits of xxhash64
}

// Ensure the stored header layout is exactly the documented one.
func TestHeaderGolden(t *testing.T) {
	if len(goldenHeaderBytes) != HeaderSize {
		t.Fatalf("golden has %d bytes, want %d", len(goldenHeaderBytes), HeaderSize)
	}
	got := goldenHeader.AppendTo(nil)
	if !bytes.Equal(got, goldenHeaderBytes) {
		t.Fatalf("AppendTo:\n got % x\nwant % x", got, goldenHeaderBytes)
	}
	h, err := ParseHeader(goldenHeaderBytes)
	if err != nil {
		t.Fatalf("ParseHeader: %v", err)
	}
	if h != goldenHeader {
		t.Fatalf("ParseHeader = %+v, want %+v", h, goldenHeader)
	}
	if got, want := h.Size(), int64(48+0xd1+0x0b0c0d0e+0xc1c2c3); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
	if got, want := h.DataOffset(), int64(48+0xd1); got != want {
		t.Errorf("DataOffset = %d, want %d", got, want)
	}
	if got, want := h.NextOffset(), uint64(0x2122232425262728+0x03040506); got != want {
		t.Errorf("NextOffset = %d, want %d", got, want)
	}
}

// Ensure AppendTo and AppendWire append after existing bytes, and AppendWire
// zeroes the check bytes 45-47 and nothing else.
func TestHeaderAppendWire(t *testing.T) {
	prefix := []byte("prefix")
	stored := goldenHeader.AppendTo(slices.Clone(prefix))
	wire := goldenHeader.AppendWire(slices.Clone(prefix))
	if !bytes.Equal(stored[:len(prefix)], prefix) || !bytes.Equal(wire[:len(prefix)], prefix) {
		t.Fatalf("prefix overwritten: stored %q, wire %q", stored[:len(prefix)], wire[:len(prefix)])
	}
	stored, wire = stored[len(prefix):], wire[len(prefix):]
	if len(wire) != HeaderSize {
		t.Fatalf("AppendWire appended %d bytes, want %d", len(wire), HeaderSize)
	}
	if !bytes.Equal(wire[:45], stored[:45]) {
		t.Errorf("AppendWire bytes 0-44:\n got % x\nwant % x", wire[:45], stored[:45])
	}
	if !bytes.Equal(wire[45:], []byte{0, 0, 0}) {
		t.Errorf("AppendWire bytes 45-47 = % x, want 00 00 00", wire[45:])
	}
	// A client parses the wire header fine; it carries no check.
	h, err := ParseHeader(wire)
	if err != nil {
		t.Fatalf("ParseHeader(wire): %v", err)
	}
	want := goldenHeader
	want.Check = 0
	if h != want {
		t.Errorf("ParseHeader(wire) = %+v, want %+v", h, want)
	}
}

// Ensure a built chunk is byte for byte what the format says, including the
// data CRC and the xxhash check (both computed independently: CRC-32 with
// Python's zlib, XXH64 with a reference implementation).
func TestBuilderGolden(t *testing.T) {
	var b Builder
	b.Begin(nil, ChunkUser, 7, 0)
	if err := b.AddEntry(AppendSimpleEntry(nil, []byte("hi")), 1, nil); err != nil {
		t.Fatal(err)
	}
	got, h := b.Finish(1000, 1, nil)
	want := []byte{
		0x50,       // magic 5, version 0
		0x00,       // type user
		0x00, 0x01, // 1 entry
		0x00, 0x00, 0x00, 0x01, // 1 record
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // timestamp 1000
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // epoch 1
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, // chunk id 7
		0x2b, 0x0c, 0x4d, 0x9e, // crc32("\x00\x00\x00\x02hi")
		0x00, 0x00, 0x00, 0x06, // data len 6
		0x00, 0x00, 0x00, 0x00, // trailer len 0
		0x00,             // no Bloom
		0x0a, 0x83, 0x18, // xxhash64(bytes 0-44) & 0xffffff
		0x00, 0x00, 0x00, 0x02, 'h', 'i', // simple entry "hi"
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("chunk:\n got % x\nwant % x", got, want)
	}
	wantH := Header{Type: ChunkUser, NumEntries: 1, NumRecords: 1, Timestamp: 1000, Epoch: 1, ChunkID: 7,
		DataCRC: 0x2b0c4d9e, DataLen: 6, Check: 0x0a8318}
	if h != wantH {
		t.Fatalf("header = %+v, want %+v", h, wantH)
	}
}

// fullChunk builds a chunk with simple entries, a sub-batch, filter values
// and a trailer, appended after prefix.
func fullChunk(t testing.TB, prefix []byte) ([]byte, Header, chunkSpec) {
	t.Helper()
	spec := chunkSpec{
		typ:       ChunkUser,
		ts:        1_700_000_000_123,
		epoch:     3,
		bloomSize: 16,
		entries: []testEntry{
			filtered("order-1", "eu"),
			subBatch("batch-0", "batch-1", "batch-2"),
			filtered("order-2", "us"),
			simple(""),
		},
		trailer: []byte{0, 4, 'p', 'u', 'b', '1', 0, 0, 0, 0, 0, 0, 0, 42},
	}
	buf, h := buildChunk(t, prefix, 100, spec)
	return buf, h, spec
}

// Ensure a chunk built from mixed entries has the right header, Bloom
// bytes, data and trailer, and passes Verify.
func TestBuilderChunk(t *testing.T) {
	prefix := []byte("earlier chunks")
	buf, h, spec := fullChunk(t, slices.Clone(prefix))
	if !bytes.Equal(buf[:len(prefix)], prefix) {
		t.Fatalf("prefix overwritten: %q", buf[:len(prefix)])
	}
	chunk := buf[len(prefix):]
	var data []byte
	for _, e := range spec.entries {
		data = append(data, e.raw...)
	}
	want := Header{
		Type: ChunkUser, NumEntries: 4, NumRecords: 6, Timestamp: spec.ts, Epoch: 3, ChunkID: 100,
		DataCRC: crc32.ChecksumIEEE(data), DataLen: uint32(len(data)), TrailerLen: uint32(len(spec.trailer)),
		BloomSize: 16, Check: h.Check,
	}
	if h != want {
		t.Fatalf("Finish header = %+v, want %+v", h, want)
	}
	if got := int64(len(chunk)); got != h.Size() {
		t.Fatalf("chunk is %d bytes, header says %d", got, h.Size())
	}
	if got := chunk[h.DataOffset() : h.DataOffset()+int64(h.DataLen)]; !bytes.Equal(got, data) {
		t.Errorf("data:\n got % x\nwant % x", got, data)
	}
	if got := chunk[h.Size()-int64(h.TrailerLen):]; !bytes.Equal(got, spec.trailer) {
		t.Errorf("trailer = % x, want % x", got, spec.trailer)
	}
	var bloom Bloom
	bloom.Reset(16)
	for _, e := range spec.entries {
		bloom.Add(e.filter)
	}
	if got := chunk[HeaderSize:h.DataOffset()]; !bytes.Equal(got, bloom.Bytes()) {
		t.Errorf("Bloom = % x, want % x", got, bloom.Bytes())
	}
	vh, err := Verify(chunk)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if vh != h {
		t.Fatalf("Verify header = %+v, want %+v", vh, h)
	}
	if got, want := recordsOf(t, chunkData(chunk, &h)), specRecords(spec.entries); !slices.Equal(got, want) {
		t.Errorf("records = %q, want %q", got, want)
	}
}

// Ensure Verify rejects every single-byte change anywhere in a chunk: each
// bit flip and the inversion of each byte.
func TestVerifyRejectsEveryByteFlip(t *testing.T) {
	chunk, _, _ := fullChunk(t, nil)
	if _, err := Verify(chunk); err != nil {
		t.Fatalf("Verify(original): %v", err)
	}
	c := make([]byte, len(chunk))
	for i := range chunk {
		for _, mask := range []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff} {
			copy(c, chunk)
			c[i] ^= mask
			if _, err := Verify(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d ^ %#02x: Verify error %v, want ErrCorrupt", i, mask, err)
			}
		}
	}
}

// Ensure Verify rejects every truncation and an extension of a chunk.
func TestVerifyRejectsTruncation(t *testing.T) {
	chunk, _, _ := fullChunk(t, nil)
	for n := range len(chunk) {
		if _, err := Verify(chunk[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d of %d bytes: Verify error %v, want ErrCorrupt", n, len(chunk), err)
		}
	}
	if _, err := Verify(append(slices.Clone(chunk), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("one extra byte: Verify error %v, want ErrCorrupt", err)
	}
}

// Ensure Verify rejects chunks whose checksums are right but whose entries
// disagree with the header's counts or do not parse.
func TestVerifyRejectsEntryMismatch(t *testing.T) {
	rec := AppendSimpleEntry(nil, []byte("x"))
	tests := []struct {
		name    string
		entries [][]byte
		records []uint32
	}{
		{"records too high", [][]byte{rec}, []uint32{2}},
		{"sub-batch records too low", [][]byte{AppendSubBatch(nil, [][]byte{[]byte("a"), []byte("b")})}, []uint32{1}},
		{"entry past data end", [][]byte{rec[:len(rec)-1]}, []uint32{1}},
		{"garbage after entries", [][]byte{rec, {0x00, 0x00}}, []uint32{1, 0}},
		{"invalid sub-batch", [][]byte{{0xf0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0}}, []uint32{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Builder
			b.Begin(nil, ChunkUser, 0, 0)
			for i, e := range tt.entries {
				if err := b.AddEntry(e, tt.records[i], nil); err != nil {
					t.Fatal(err)
				}
			}
			chunk, _ := b.Finish(1, 1, nil)
			if _, err := Verify(chunk); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify error %v, want ErrCorrupt", err)
			}
		})
	}
}

// Ensure ParseHeader rejects each structural error and accepts the limits.
func TestParseHeaderValidation(t *testing.T) {
	valid := Header{Type: ChunkUser, NumEntries: 2, NumRecords: 5, ChunkID: 10, DataLen: 100, BloomSize: 16}
	tests := []struct {
		name string
		edit func(b []byte)
		ok   bool
	}{
		{"valid", func(b []byte) {}, true},
		{"magic 4", func(b []byte) { b[0] = 0x40 }, false},
		{"magic 0", func(b []byte) { b[0] = 0x00 }, false},
		{"version 1", func(b []byte) { b[0] = 0x51 }, false},
		{"type tracking snapshot", func(b []byte) { b[1] = 2 }, true},
		{"type 3", func(b []byte) { b[1] = 3 }, false},
		{"type 255", func(b []byte) { b[1] = 255 }, false},
		{"zero entries", func(b []byte) { b[2], b[3] = 0, 0 }, false},
		{"records less than entries", func(b []byte) { b[4], b[5], b[6], b[7] = 0, 0, 0, 1 }, false},
		{"records equal entries", func(b []byte) { b[4], b[5], b[6], b[7] = 0, 0, 0, 2 }, true},
		{"max entries", func(b []byte) { b[2], b[3], b[4], b[5], b[6], b[7] = 0xff, 0xff, 0, 0, 0xff, 0xff }, true},
		{"data len max", func(b []byte) { binary.BigEndian.PutUint32(b[36:], MaxDataLen) }, true},
		{"data len max+1", func(b []byte) { binary.BigEndian.PutUint32(b[36:], MaxDataLen+1) }, false},
		{"data len huge", func(b []byte) { binary.BigEndian.PutUint32(b[36:], 0xffffffff) }, false},
		{"trailer len max", func(b []byte) { binary.BigEndian.PutUint32(b[40:], MaxTrailerLen) }, true},
		{"trailer len max+1", func(b []byte) { binary.BigEndian.PutUint32(b[40:], MaxTrailerLen+1) }, false},
		{"trailer len huge", func(b []byte) { binary.BigEndian.PutUint32(b[40:], 0xffffffff) }, false},
		{"bloom 0", func(b []byte) { b[44] = 0 }, true},
		{"bloom 255", func(b []byte) { b[44] = 255 }, true},
		{"chunk id max, one record", func(b []byte) {
			binary.BigEndian.PutUint64(b[24:], 1<<64-2)
			b[2], b[3], b[4], b[5], b[6], b[7] = 0, 1, 0, 0, 0, 1
		}, true},
		{"chunk id overflow", func(b []byte) { binary.BigEndian.PutUint64(b[24:], 1<<64-3) }, false},
	}
	for i := 1; i < MinBloomSize; i++ {
		tests = append(tests, struct {
			name string
			edit func(b []byte)
			ok   bool
		}{fmt.Sprintf("bloom %d", i), func(b []byte) { b[44] = byte(i) }, false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := valid.AppendTo(nil)
			tt.edit(b)
			h, err := ParseHeader(b)
			if tt.ok && err != nil {
				t.Fatalf("ParseHeader: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseHeader error %v, want ErrCorrupt", err)
			}
			if tt.ok && !bytes.Equal(h.AppendTo(nil), b) {
				t.Fatalf("round trip:\n got % x\nwant % x", h.AppendTo(nil), b)
			}
		})
	}
	for n := range HeaderSize {
		if _, err := ParseHeader(valid.AppendTo(nil)[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bytes: ParseHeader error %v, want ErrCorrupt", n, err)
		}
	}
}

// Ensure that when the first entries are unfiltered and a later one is
// filtered, Builder moves the data to make room for the Bloom bytes, and
// the Bloom records the earlier entries as unfiltered (bit 0).
func TestBuilderBloomAfterUnfilteredEntries(t *testing.T) {
	entries := []testEntry{
		simple("first, unfiltered"),
		subBatch("sb-0", "sb-1"),
		simple("third, unfiltered"),
		filtered("fourth, filtered", "blue"),
		simple("fifth, unfiltered"),
		filtered("sixth, filtered", "green"),
	}
	var data []byte
	for _, e := range entries {
		data = append(data, e.raw...)
	}
	// A previous chunk in the buffer makes the builder's positions relative.
	prev, prevH := buildChunk(t, nil, 0, chunkSpec{ts: 1, epoch: 1, entries: []testEntry{simple("prev")}})
	buf, h := buildChunk(t, slices.Clone(prev), prevH.NextOffset(), chunkSpec{ts: 2, epoch: 1, bloomSize: 40, entries: entries, trailer: []byte("tr")})
	if !bytes.Equal(buf[:len(prev)], prev) {
		t.Fatalf("previous chunk changed")
	}
	chunk := buf[len(prev):]
	if h.BloomSize != 40 {
		t.Fatalf("BloomSize = %d, want 40", h.BloomSize)
	}
	if _, err := Verify(chunk); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got := chunkData(chunk, &h); !bytes.Equal(got, data) {
		t.Fatalf("data after the move:\n got % x\nwant % x", got, data)
	}
	if got := string(chunk[h.Size()-2:]); got != "tr" {
		t.Fatalf("trailer = %q, want %q", got, "tr")
	}
	bloom := chunk[HeaderSize:h.DataOffset()]
	if !NewMatcher(vals("absent"), true).Match(FilterV2, bloom) {
		t.Errorf("Bloom does not hold the unfiltered entries: % x", bloom)
	}
	var want Bloom
	want.Reset(40)
	want.Add(nil)
	want.Add([]byte("blue"))
	want.Add([]byte("green"))
	if !bytes.Equal(bloom, want.Bytes()) {
		t.Errorf("Bloom:\n got % x\nwant % x", bloom, want.Bytes())
	}
	for _, v := range []string{"blue", "green"} {
		if !NewMatcher([][]byte{[]byte(v)}, false).Match(FilterV2, bloom) {
			t.Errorf("Bloom does not match %q", v)
		}
	}
	if got, want := recordsOf(t, chunkData(chunk, &h)), specRecords(entries); !slices.Equal(got, want) {
		t.Errorf("records = %q, want %q", got, want)
	}
}

// Ensure a chunk of only unfiltered entries has no Bloom bytes even when the
// stream has a filter size, and that filter values are ignored without one.
func TestBuilderNoBloom(t *testing.T) {
	tests := []struct {
		name      string
		bloomSize int
		entries   []testEntry
	}{
		{"unfiltered, bloom size 16", 16, []testEntry{simple("a"), subBatch("b", "c")}},
		{"empty filter values, bloom size 16", 16, []testEntry{filtered("a", ""), filtered("b", "")}},
		{"filter values, bloom size 0", 0, []testEntry{filtered("a", "x"), filtered("b", "y")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunk, h := buildChunk(t, nil, 0, chunkSpec{ts: 1, epoch: 1, bloomSize: tt.bloomSize, entries: tt.entries})
			if h.BloomSize != 0 {
				t.Fatalf("BloomSize = %d, want 0", h.BloomSize)
			}
			if h.DataOffset() != HeaderSize || int64(len(chunk)) != HeaderSize+int64(h.DataLen) {
				t.Fatalf("chunk is %d bytes, data offset %d, data %d bytes", len(chunk), h.DataOffset(), h.DataLen)
			}
			if _, err := Verify(chunk); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got, want := recordsOf(t, chunkData(chunk, &h)), specRecords(tt.entries); !slices.Equal(got, want) {
				t.Errorf("records = %q, want %q", got, want)
			}
		})
	}
}

// Ensure the builder's running counters follow the entries added.
func TestBuilderCounters(t *testing.T) {
	var b Builder
	b.Begin(make([]byte, 5), ChunkUser, 40, 16)
	if b.Len() != 0 || b.DataLen() != 0 || b.NextOffset() != 40 {
		t.Fatalf("after Begin: Len %d, DataLen %d, NextOffset %d; want 0, 0, 40", b.Len(), b.DataLen(), b.NextOffset())
	}
	e1 := AppendSimpleEntry(nil, []byte("abc"))
	e2 := AppendSubBatch(nil, [][]byte{[]byte("d"), []byte("e"), []byte("f")})
	if err := b.AddEntry(e1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.AddEntry(e2, 3, []byte("v")); err != nil { // moves the data
		t.Fatal(err)
	}
	if b.Len() != 2 || b.DataLen() != len(e1)+len(e2) || b.NextOffset() != 44 {
		t.Fatalf("after 2 entries: Len %d, DataLen %d, NextOffset %d; want 2, %d, 44", b.Len(), b.DataLen(), b.NextOffset(), len(e1)+len(e2))
	}
	buf, h := b.Finish(5, 6, nil)
	if len(buf) != 5+int(h.Size()) {
		t.Fatalf("buffer is %d bytes, want %d", len(buf), 5+h.Size())
	}
	if _, err := Verify(buf[5:]); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// Ensure a chunk takes at most MaxChunkEntries entries, then ErrChunkFull,
// and the full chunk is valid.
func TestBuilderChunkFull(t *testing.T) {
	var b Builder
	b.Begin(make([]byte, 0, HeaderSize+16+MaxChunkEntries*5), ChunkUser, 0, 16)
	entry := AppendSimpleEntry(nil, []byte{7})
	for i := range MaxChunkEntries {
		var filter []byte
		if i == MaxChunkEntries-1 {
			filter = []byte("last") // the data move with a full chunk
		}
		if err := b.AddEntry(entry, 1, filter); err != nil {
			t.Fatalf("AddEntry %d: %v", i, err)
		}
	}
	if err := b.AddEntry(entry, 1, nil); !errors.Is(err, ErrChunkFull) {
		t.Fatalf("entry %d: AddEntry error %v, want ErrChunkFull", MaxChunkEntries, err)
	}
	if b.Len() != MaxChunkEntries {
		t.Fatalf("Len = %d after ErrChunkFull, want %d", b.Len(), MaxChunkEntries)
	}
	chunk, h := b.Finish(1, 1, nil)
	if h.NumEntries != MaxChunkEntries || h.NumRecords != MaxChunkEntries || h.BloomSize != 16 {
		t.Fatalf("header %+v, want %d entries and records, Bloom 16", h, MaxChunkEntries)
	}
	if _, err := Verify(chunk); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// Ensure Begin, AddEntry and Finish do not allocate once the buffer is big
// enough, including the Bloom and data-move paths.
func TestBuilderZeroAllocs(t *testing.T) {
	entry := AppendSimpleEntry(nil, bytes.Repeat([]byte("m"), 100))
	batch := AppendSubBatch(nil, [][]byte{[]byte("a"), []byte("b")})
	filter := []byte("region-eu")
	trailer := []byte("trailer")
	buf := make([]byte, 0, 64<<10)
	var b Builder
	var id uint64
	allocs := testing.AllocsPerRun(100, func() {
		buf = buf[:0]
		for range 3 {
			b.Begin(buf, ChunkUser, id, 32)
			for i := range 20 {
				var f []byte
				if i >= 5 {
					f = filter // entries 0-4 unfiltered: data moves at entry 5
				}
				_ = b.AddEntry(entry, 1, f)
			}
			_ = b.AddEntry(batch, 2, nil)
			var h Header
			buf, h = b.Finish(123, 1, trailer)
			id = h.NextOffset()
		}
	})
	if allocs != 0 {
		t.Fatalf("Builder allocs per run = %v, want 0", allocs)
	}
	// The chunks built in the loop are valid.
	pos := 0
	for range 3 {
		h, err := ParseHeader(buf[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(buf[pos : pos+int(h.Size())]); err != nil {
			t.Fatalf("chunk at %d: %v", pos, err)
		}
		pos += int(h.Size())
	}
	if pos != len(buf) {
		t.Fatalf("chunks cover %d of %d bytes", pos, len(buf))
	}
}

// Ensure the names of chunk types and codecs, used in errors and logs.
func TestStringers(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{ChunkUser.String(), "user"},
		{ChunkTrackingDelta.String(), "tracking-delta"},
		{ChunkTrackingSnapshot.String(), "tracking-snapshot"},
		{ChunkType(9).String(), "chunk-type(9)"},
		{CompressionNone.String(), "none"},
		{CompressionGzip.String(), "gzip"},
		{CompressionSnappy.String(), "snappy"},
		{CompressionLZ4.String(), "lz4"},
		{CompressionZstd.String(), "zstd"},
		{Compression(7).String(), "compression(7)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
