package segment

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// codecs are the compressed sub-batch codecs.
var codecs = []Compression{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// encodeRecords is a sub-batch's uncompressed data: each record as a u32
// size and its bytes.
func encodeRecords(recs [][]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

// clientCompress compresses recs the way the RabbitMQ Go stream client does
// (pkg/stream/aggregation.go): a streaming writer of the codec's framed
// format gets each record's u32 size and then its bytes, then Flush and
// Close. gzip is the standard library's, snappy is the framed format from
// NewBufferedWriter, lz4 is the frame format.
func clientCompress(tb testing.TB, c Compression, recs [][]byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	var w interface {
		io.WriteCloser
		Flush() error
	}
	switch c {
	case CompressionGzip:
		w = gzip.NewWriter(&buf)
	case CompressionSnappy:
		w = snappy.NewBufferedWriter(&buf)
	case CompressionLZ4:
		w = lz4.NewWriter(&buf)
	case CompressionZstd:
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			tb.Fatal(err)
		}
		w = zw
	default:
		tb.Fatalf("clientCompress: %v", c)
	}
	var size [4]byte
	for _, r := range recs {
		binary.BigEndian.PutUint32(size[:], uint32(len(r)))
		if _, err := w.Write(size[:]); err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write(r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// compressed returns a sub-batch entry holding recs compressed with c.
func compressed(tb testing.TB, c Compression, recs ...[]byte) testEntry {
	tb.Helper()
	data := clientCompress(tb, c, recs)
	raw := AppendCompressedSubBatch(nil, c, uint16(len(recs)), uint32(len(encodeRecords(recs))), data)
	return testEntry{raw: raw, records: recs}
}

// makeRecords returns n records of about size bytes each, compressible but
// not trivially, and distinct.
func makeRecords(prefix string, n, size int) [][]byte {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	words := []string{"order", "created", "paid", "shipped", "eu-west", "us-east", "customer", "42"}
	var recs [][]byte
	for i := range n {
		r := fmt.Appendf(nil, "%s-%05d:", prefix, i)
		for len(r) < size {
			r = append(r, words[rng.IntN(len(words))]...)
			r = append(r, ' ')
		}
		recs = append(recs, r[:size])
	}
	return recs
}

// Ensure a simple entry parses to its record and leaves the rest.
func TestParseEntrySimple(t *testing.T) {
	b := AppendSimpleEntry(nil, []byte("hello"))
	want := []byte{0x00, 0x00, 0x00, 0x05, 'h', 'e', 'l', 'l', 'o'} // size 5, bytes
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendSimpleEntry = % x, want % x", b, want)
	}
	b = append(b, "rest"...)
	e, rest, err := ParseEntry(b)
	if err != nil {
		t.Fatalf("ParseEntry: %v", err)
	}
	if e.SubBatch || e.Records != 1 || string(e.Data) != "hello" || !bytes.Equal(e.Raw, want) || string(rest) != "rest" {
		t.Fatalf("ParseEntry = %+v, rest %q", e, rest)
	}
	// An empty record is a valid entry.
	e, rest, err = ParseEntry([]byte{0, 0, 0, 0})
	if err != nil || e.Records != 1 || len(e.Data) != 0 || len(rest) != 0 {
		t.Fatalf("empty record: %+v, rest %q, %v", e, rest, err)
	}
}

// Ensure sub-batch entries encode as documented and parse back.
func TestParseEntrySubBatch(t *testing.T) {
	b := AppendSubBatch(nil, [][]byte{[]byte("ab"), []byte("c")})
	want := []byte{
		0x80,       // sub-batch, compression 0
		0x00, 0x02, // 2 records
		0x00, 0x00, 0x00, 0x0b, // 11 bytes uncompressed
		0x00, 0x00, 0x00, 0x0b, // 11 bytes of data
		0x00, 0x00, 0x00, 0x02, 'a', 'b', // record "ab"
		0x00, 0x00, 0x00, 0x01, 'c', // record "c"
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendSubBatch:\n got % x\nwant % x", b, want)
	}
	e, rest, err := ParseEntry(append(b, 0xff))
	if err != nil {
		t.Fatalf("ParseEntry: %v", err)
	}
	if !e.SubBatch || e.Compression != CompressionNone || e.Records != 2 || e.Uncompressed != 11 ||
		!bytes.Equal(e.Data, want[11:]) || !bytes.Equal(e.Raw, want) || !bytes.Equal(rest, []byte{0xff}) {
		t.Fatalf("ParseEntry = %+v, rest % x", e, rest)
	}

	c := AppendCompressedSubBatch(nil, CompressionZstd, 3, 300, []byte{1, 2, 3})
	wantC := []byte{
		0xc0,       // sub-batch, compression 4 (zstd)
		0x00, 0x03, // 3 records
		0x00, 0x00, 0x01, 0x2c, // 300 bytes uncompressed
		0x00, 0x00, 0x00, 0x03, // 3 bytes of data
		0x01, 0x02, 0x03, // data
	}
	if !bytes.Equal(c, wantC) {
		t.Fatalf("AppendCompressedSubBatch:\n got % x\nwant % x", c, wantC)
	}
	e, rest, err = ParseEntry(c)
	if err != nil {
		t.Fatalf("ParseEntry: %v", err)
	}
	if !e.SubBatch || e.Compression != CompressionZstd || e.Records != 3 || e.Uncompressed != 300 ||
		!bytes.Equal(e.Data, []byte{1, 2, 3}) || len(rest) != 0 {
		t.Fatalf("ParseEntry = %+v, rest % x", e, rest)
	}
}

// Ensure ParseEntry applies each of RabbitMQ's sub-batch checks and the
// bounds of the buffer.
func TestParseEntryValidation(t *testing.T) {
	sub := func(flag byte, count uint16, uncompressed, n uint32, data []byte) []byte {
		b := []byte{flag}
		b = binary.BigEndian.AppendUint16(b, count)
		b = binary.BigEndian.AppendUint32(b, uncompressed)
		b = binary.BigEndian.AppendUint32(b, n)
		return append(b, data...)
	}
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty buffer", nil, false},
		{"simple: 3 bytes", []byte{0, 0, 0}, false},
		{"simple: size past end", []byte{0, 0, 0, 5, 'a', 'b', 'c', 'd'}, false},
		{"simple: size 2^31-1, 1 byte", []byte{0x7f, 0xff, 0xff, 0xff, 'a'}, false},
		{"simple: exact", []byte{0, 0, 0, 2, 'a', 'b'}, true},
		{"sub-batch: 10-byte header", sub(0x80, 1, 4, 0, nil)[:10], false},
		{"sub-batch: codec 1 gzip", sub(0x90, 1, 4, 1, []byte{0}), true},
		{"sub-batch: codec 4 zstd", sub(0xc0, 1, 4, 1, []byte{0}), true},
		{"sub-batch: codec 5", sub(0xd0, 1, 4, 1, []byte{0}), false},
		{"sub-batch: codec 6", sub(0xe0, 1, 4, 1, []byte{0}), false},
		{"sub-batch: codec 7 (user-defined)", sub(0xf0, 1, 4, 1, []byte{0}), false},
		{"sub-batch: count 0", sub(0x80, 0, 4, 4, []byte{0, 0, 0, 0}), false},
		{"sub-batch: 64 MiB uncompressed", sub(0x90, 1, MaxSubBatchUncompressed, 1, []byte{0}), true},
		{"sub-batch: 64 MiB + 1 uncompressed", sub(0x90, 1, MaxSubBatchUncompressed+1, 1, []byte{0}), false},
		{"sub-batch: 4 GiB uncompressed", sub(0x90, 1, 0xffffffff, 1, []byte{0}), false},
		{"sub-batch: count*4 = uncompressed", sub(0x90, 3, 12, 1, []byte{0}), true},
		{"sub-batch: count*4 > uncompressed", sub(0x90, 3, 11, 1, []byte{0}), false},
		{"sub-batch: 65535 records in 4 bytes", sub(0x80, 0xffff, 4, 4, []byte{0, 0, 0, 0}), false},
		{"sub-batch: empty gzip data", sub(0x90, 1, 4, 0, nil), false},
		{"sub-batch: empty zstd data", sub(0xc0, 1, 4, 0, nil), false},
		{"sub-batch: empty uncompressed data", sub(0x80, 1, 4, 0, nil), true},
		{"sub-batch: size past end", sub(0x90, 1, 4, 3, []byte{1, 2}), false},
		{"sub-batch: size 2^32-1", sub(0x90, 1, 4, 0xffffffff, []byte{1, 2}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, rest, err := ParseEntry(tt.b)
			if !tt.ok {
				if !errors.Is(err, ErrInvalidEntry) {
					t.Fatalf("ParseEntry error %v, want ErrInvalidEntry", err)
				}
				if !bytes.Equal(rest, tt.b) {
					t.Fatalf("rest after an error = % x, want the input", rest)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEntry: %v", err)
			}
			if !bytes.Equal(e.Raw, tt.b) || len(rest) != 0 {
				t.Fatalf("Raw = % x, rest = % x; want the whole input and nothing", e.Raw, rest)
			}
		})
	}
}

// Ensure ParseEntry walks a run of entries one by one.
func TestParseEntryChain(t *testing.T) {
	entries := []testEntry{simple("a"), subBatch("b", "c"), compressed(t, CompressionGzip, []byte("d")), simple("")}
	var data []byte
	for _, e := range entries {
		data = append(data, e.raw...)
	}
	for i, want := range entries {
		e, rest, err := ParseEntry(data)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !bytes.Equal(e.Raw, want.raw) || e.Records != uint32(len(want.records)) {
			t.Fatalf("entry %d: Raw % x, %d records; want % x, %d", i, e.Raw, e.Records, want.raw, len(want.records))
		}
		data = rest
	}
	if len(data) != 0 {
		t.Fatalf("%d bytes left", len(data))
	}
}

// Ensure Records yields every record of a chunk in order: simple entries,
// and sub-batches uncompressed and compressed with each codec as the stream
// client compresses them, small and spanning several codec blocks.
func TestRecordsAllCodecs(t *testing.T) {
	entries := []testEntry{simple("first"), subBatch("plain-0", "plain-1")}
	for _, c := range codecs {
		entries = append(entries,
			compressed(t, c, makeRecords(c.String()+"-small", 3, 20)...),
			simple("between-"+c.String()),
			// 200 KiB: several snappy (64 KiB) blocks and zstd blocks.
			compressed(t, c, makeRecords(c.String()+"-large", 100, 2048)...),
			compressed(t, c, []byte{}), // one empty record
		)
	}
	entries = append(entries, simple("last"))
	chunk, h := buildChunk(t, nil, 0, chunkSpec{ts: 1, epoch: 1, entries: entries})
	if _, err := Verify(chunk); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := specRecords(entries)
	got := recordsOf(t, chunkData(chunk, &h))
	if len(got) != len(want) || int(h.NumRecords) != len(want) {
		t.Fatalf("got %d records, header says %d, want %d", len(got), h.NumRecords, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d = %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

// Ensure Records stops when fn returns false, in a simple entry and inside
// a compressed sub-batch.
func TestRecordsStop(t *testing.T) {
	entries := []testEntry{simple("a"), compressed(t, CompressionLZ4, []byte("b"), []byte("c"), []byte("d")), simple("e")}
	var data []byte
	for _, e := range entries {
		data = append(data, e.raw...)
	}
	for stop := 1; stop <= 5; stop++ {
		var got []string
		if _, err := Records(data, nil, func(r []byte) bool {
			got = append(got, string(r))
			return len(got) < stop
		}); err != nil {
			t.Fatalf("stop after %d: %v", stop, err)
		}
		if want := []string{"a", "b", "c", "d", "e"}[:stop]; !slices.Equal(got, want) {
			t.Fatalf("stop after %d: got %q, want %q", stop, got, want)
		}
	}
}

// Ensure Records decompresses into the scratch buffer it is given and
// returns it for reuse.
func TestRecordsScratch(t *testing.T) {
	e := compressed(t, CompressionZstd, makeRecords("s", 10, 100)...)
	scratch := make([]byte, 0, 64<<10)
	out, err := Records(e.raw, scratch, func([]byte) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if cap(out) != cap(scratch) || &out[:1][0] != &scratch[:1][0] {
		t.Fatalf("Records did not reuse the scratch buffer (cap %d, want %d)", cap(out), cap(scratch))
	}
	if len(out) != 10*104 {
		t.Fatalf("scratch holds %d bytes, want the %d decompressed", len(out), 10*104)
	}
}

// Ensure Records reports entries whose records do not fit their data.
func TestRecordsInvalid(t *testing.T) {
	gz := clientCompress(t, CompressionGzip, [][]byte{[]byte("abcd")})
	badGzip := slices.Clone(gz)
	badGzip[len(badGzip)-8] ^= 0xff // the CRC-32 in the trailer
	tests := []struct {
		name string
		data []byte
	}{
		{"entry past end", []byte{0, 0, 0, 9, 'a'}},
		{"count above records", AppendCompressedSubBatch(nil, CompressionNone, 3, 12, encodeRecords([][]byte{[]byte("ab"), []byte("c")}))},
		{"record past sub-batch end", AppendCompressedSubBatch(nil, CompressionNone, 1, 6, []byte{0, 0, 0, 9, 'a', 'b'})},
		{"empty uncompressed data", AppendCompressedSubBatch(nil, CompressionNone, 1, 4, nil)},
		{"gzip uncompressed size too small", AppendCompressedSubBatch(nil, CompressionGzip, 1, 7, gz)},
		{"gzip bad checksum", AppendCompressedSubBatch(nil, CompressionGzip, 1, 8, badGzip)},
		{"gzip count above records", AppendCompressedSubBatch(nil, CompressionGzip, 2, 8, gz)},
		{"snappy garbage", AppendCompressedSubBatch(nil, CompressionSnappy, 1, 8, []byte("not snappy at all"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := append(AppendSimpleEntry(nil, []byte("ok")), tt.data...)
			var got []string
			_, err := Records(data, nil, func(r []byte) bool {
				got = append(got, string(r))
				return true
			})
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("Records error %v, want ErrInvalidEntry", err)
			}
			if len(got) == 0 || got[0] != "ok" {
				t.Fatalf("records before the bad entry = %q, want [ok ...]", got)
			}
		})
	}
}

// Ensure Decompress returns exactly the declared bytes, appended to dst, and
// rejects output longer or shorter than declared.
func TestDecompressSize(t *testing.T) {
	plain := encodeRecords(makeRecords("size", 20, 50))
	for _, c := range append([]Compression{CompressionNone}, codecs...) {
		t.Run(c.String(), func(t *testing.T) {
			data := plain
			if c != CompressionNone {
				data = clientCompress(t, c, makeRecords("size", 20, 50))
			}
			n := uint32(len(plain))
			got, err := Decompress([]byte("prefix"), c, data, n)
			if err != nil {
				t.Fatalf("Decompress: %v", err)
			}
			if string(got[:6]) != "prefix" || !bytes.Equal(got[6:], plain) {
				t.Fatalf("Decompress = %.20q..., want prefix + the records", got)
			}
			for _, declared := range []uint32{0, 1, n - 1, n + 1, 2 * n} {
				if _, err := Decompress(nil, c, data, declared); !errors.Is(err, ErrInvalidEntry) {
					t.Errorf("declared %d of %d bytes: error %v, want ErrInvalidEntry", declared, n, err)
				}
			}
		})
	}
}

// Ensure Decompress rejects a compressed stream cut at any byte, with
// garbage after it, and random garbage, without panicking.
func TestDecompressGarbage(t *testing.T) {
	recs := makeRecords("garbage", 5, 30)
	n := uint32(len(encodeRecords(recs)))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			data := clientCompress(t, c, recs)
			for cut := range len(data) {
				if _, err := Decompress(nil, c, data[:cut], n); !errors.Is(err, ErrInvalidEntry) {
					t.Fatalf("cut at %d of %d: error %v, want ErrInvalidEntry", cut, len(data), err)
				}
			}
			for _, tail := range [][]byte{{0}, make([]byte, 16), []byte("garbage after the stream"), data} {
				if _, err := Decompress(nil, c, append(slices.Clone(data), tail...), n); !errors.Is(err, ErrInvalidEntry) {
					t.Fatalf("%d bytes after the stream: error %v, want ErrInvalidEntry", len(tail), err)
				}
			}
			for i := range 200 {
				g := make([]byte, 1+rng.IntN(300))
				for j := range g {
					g[j] = byte(rng.Uint32())
				}
				if i%2 == 0 && len(g) > 4 {
					copy(g, data[:4]) // a valid magic number, garbage after
				}
				if _, err := Decompress(nil, c, g, n); !errors.Is(err, ErrInvalidEntry) {
					t.Fatalf("garbage % x: error %v, want ErrInvalidEntry", g, err)
				}
			}
		})
	}
}

// Ensure Decompress's pooled decoders give correct results after failures
// left them mid-stream, and are safe to use from many goroutines.
func TestDecompressPoolReuse(t *testing.T) {
	recs := makeRecords("pool", 50, 200)
	plain := encodeRecords(recs)
	var wg sync.WaitGroup
	for _, c := range codecs {
		data := clientCompress(t, c, recs)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 20 {
					switch (round + g) % 4 {
					case 0:
						got, err := Decompress(nil, c, data, uint32(len(plain)))
						if err != nil || !bytes.Equal(got, plain) {
							t.Errorf("%v round %d: %d bytes, %v; want the records", c, round, len(got), err)
							return
						}
					case 1:
						_, _ = Decompress(nil, c, data[:len(data)/2], uint32(len(plain)))
					case 2:
						_, _ = Decompress(nil, c, data, 10) // stops after 11 bytes
					case 3:
						_, _ = Decompress(nil, c, []byte("garbage"), uint32(len(plain)))
					}
				}
			}()
		}
	}
	wg.Wait()
}

// Ensure Decompress refuses sizes above the sub-batch limit and unknown
// codecs before reading anything.
func TestDecompressLimits(t *testing.T) {
	if _, err := Decompress(nil, CompressionGzip, []byte{1}, MaxSubBatchUncompressed+1); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("64 MiB + 1: error %v, want ErrInvalidEntry", err)
	}
	for _, c := range []Compression{5, 6, 7} {
		if _, err := Decompress(nil, c, []byte{1}, 4); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("%v: error %v, want ErrInvalidEntry", c, err)
		}
	}
	// A tiny zstd frame that expands to 1 MiB is cut off after the
	// declared size plus one byte.
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Decompress(nil, CompressionZstd, buf.Bytes(), 1000)
	if !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("bomb: error %v, want ErrInvalidEntry", err)
	}
	if len(got) > 1001 || cap(got) > 2002 {
		t.Fatalf("bomb: Decompress kept %d bytes (cap %d), want at most 1001", len(got), cap(got))
	}
}

// Ensure Records refuses an uncompressed sub-batch whose data length
// disagrees with its declared uncompressed size.
func TestRecordsUncompressedLengthMismatch(t *testing.T) {
	good := AppendSubBatch(nil, [][]byte{[]byte("ab"), []byte("cd")})
	if _, err := Records(good, nil, func([]byte) bool { return true }); err != nil {
		t.Fatalf("good sub-batch: %v", err)
	}
	bad := AppendCompressedSubBatch(nil, CompressionNone, 2, 13, good[subBatchHeaderSize:])
	if _, err := Records(bad, nil, func([]byte) bool { return true }); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("uncompressed size 13 for 12 bytes: %v", err)
	}
}

// Ensure Walk gives every record its index in the chunk, and with
// skipCompressed passes over a compressed sub-batch while still counting
// its records, so the records after it keep their offsets.
func TestWalkIndexes(t *testing.T) {
	var data []byte
	data = AppendSimpleEntry(data, []byte("s0"))
	data = AppendSubBatch(data, [][]byte{[]byte("b1"), []byte("b2")})
	data = append(data, compressed(t, CompressionGzip, []byte("z3"), []byte("z4"), []byte("z5")).raw...)
	data = AppendSimpleEntry(data, []byte("s6"))
	for _, skip := range []bool{false, true} {
		var got []string
		if _, err := Walk(data, nil, skip, func(r []byte, i uint64) bool {
			got = append(got, fmt.Sprintf("%d:%s", i, r))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		want := "0:s0 1:b1 2:b2 3:z3 4:z4 5:z5 6:s6"
		if skip {
			want = "0:s0 1:b1 2:b2 6:s6"
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("skipCompressed=%v: %s, want %s", skip, g, want)
		}
	}
	n := 0
	if _, err := Walk(data, nil, true, func([]byte, uint64) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Fatalf("stopping after 2: %d, %v", n, err)
	}
}
