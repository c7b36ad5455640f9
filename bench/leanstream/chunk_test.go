package leanstream

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"testing"
)

// buildChunk returns a chunk header followed by data, as Deliver carries
// it (no Bloom filter, no trailer).
func buildChunk(first uint64, entries uint16, records uint32, data []byte) []byte {
	b := make([]byte, ChunkHeaderSize, ChunkHeaderSize+len(data))
	b[0] = 0x50
	binary.BigEndian.PutUint16(b[2:], entries)
	binary.BigEndian.PutUint32(b[4:], records)
	binary.BigEndian.PutUint64(b[8:], 1700000000123)
	binary.BigEndian.PutUint64(b[16:], 1)
	binary.BigEndian.PutUint64(b[24:], first)
	binary.BigEndian.PutUint32(b[32:], crc32.ChecksumIEEE(data))
	binary.BigEndian.PutUint32(b[36:], uint32(len(data)))
	binary.BigEndian.PutUint32(b[40:], 0) // trailer
	b[44] = 16                            // Bloom size, ignored
	return append(b, data...)
}

func simple(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
}

func subBatch(compression byte, msgs ...[]byte) []byte {
	var recs []byte
	for _, m := range msgs {
		recs = append(recs, simple(m)...)
	}
	b := []byte{0x80 | compression<<4}
	b = binary.BigEndian.AppendUint16(b, uint16(len(msgs)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(recs)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(recs)))
	return append(b, recs...)
}

// collect returns the messages and offsets of a chunk.
func collect(t *testing.T, c *Chunk) ([]string, []uint64, error) {
	t.Helper()
	var msgs []string
	var offs []uint64
	it := c.Messages()
	for it.Next() {
		msgs = append(msgs, string(it.Message()))
		offs = append(offs, it.Offset())
	}
	return msgs, offs, it.Err()
}

// Ensure a chunk with golden header bytes parses field by field.
func TestParseChunkGolden(t *testing.T) {
	golden, _ := hex.DecodeString("" +
		"50" + "00" + "0002" + "00000002" + // magic/version, user chunk, 2 entries, 2 records
		"0000018bcfe56800" + // timestamp 1700000000000
		"0000000000000003" + // epoch
		"000000000000002a" + // chunk id 42
		"f51b8a0b" + // crc (unchecked here)
		"0000000e" + "00000000" + "00" + "000000" + // data length 14, trailer, bloom, reserved
		"00000001" + "61" + "00000005" + "68656c6c6f") // "a", "hello"
	c, err := ParseChunk(golden, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.ChunkType != 0 || c.NumEntries != 2 || c.NumRecords != 2 || c.Timestamp != 1700000000000 ||
		c.Epoch != 3 || c.FirstOffset != 42 || c.CRC != 0xf51b8a0b || len(c.Data) != 14 {
		t.Errorf("header: %+v", c)
	}
	msgs, offs, err := collect(t, &c)
	if err != nil || len(msgs) != 2 || msgs[0] != "a" || msgs[1] != "hello" || offs[0] != 42 || offs[1] != 43 {
		t.Errorf("messages %q offsets %v err %v", msgs, offs, err)
	}
	if _, err := ParseChunk(golden, true); !errors.Is(err, ErrBadChunk) {
		t.Errorf("bad crc: got %v", err)
	}
}

// Ensure simple entries and uncompressed sub-entry batches mix, offsets
// count every record, CRCs check, and skipBelow drops early records.
func TestParseChunkEntries(t *testing.T) {
	data := append(simple([]byte("m0")), subBatch(0, []byte("m1"), []byte("m2"), []byte("m3"))...)
	data = append(data, simple([]byte("m4"))...)
	raw := append(buildChunk(100, 3, 5, data), 0xde, 0xad) // trailing bytes ignored
	c, err := ParseChunk(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	msgs, offs, err := collect(t, &c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"m0", "m1", "m2", "m3", "m4"}; !equal(msgs, want) {
		t.Errorf("messages %q, want %q", msgs, want)
	}
	for i, o := range offs {
		if o != 100+uint64(i) {
			t.Errorf("offset %d = %d", i, o)
		}
	}
	c.skipBelow = 102
	msgs, offs, _ = collect(t, &c)
	if want := []string{"m2", "m3", "m4"}; !equal(msgs, want) || offs[0] != 102 {
		t.Errorf("skip below 102: %q %v", msgs, offs)
	}
	// A tracking chunk has no messages.
	raw[1] = 1
	c, _ = ParseChunk(raw, true)
	if msgs, _, _ := collect(t, &c); len(msgs) != 0 {
		t.Errorf("tracking chunk gave %q", msgs)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Ensure malformed input gives errors, not panics.
func TestParseChunkErrors(t *testing.T) {
	if _, err := ParseChunk(make([]byte, 47), false); !errors.Is(err, ErrBadChunk) {
		t.Errorf("short header: %v", err)
	}
	bad := buildChunk(0, 1, 1, simple([]byte("x")))
	bad[0] = 0x51
	if _, err := ParseChunk(bad, false); !errors.Is(err, ErrBadChunk) {
		t.Errorf("bad magic: %v", err)
	}
	long := buildChunk(0, 1, 1, simple([]byte("x")))
	if _, err := ParseChunk(long[:len(long)-1], false); !errors.Is(err, ErrBadChunk) {
		t.Errorf("data length past the end: %v", err)
	}
	for name, data := range map[string][]byte{
		"entry too long":    {0, 0, 0, 9, 'a'},
		"entry size cut":    {0, 0},
		"sub-batch cut":     {0x80, 0, 1},
		"sub-batch too big": append([]byte{0x80, 0, 1, 0, 0, 0, 5, 0, 0, 0, 50}, 1, 2),
		"record too long":   append([]byte{0x80, 0, 1, 0, 0, 0, 5, 0, 0, 0, 5}, 0, 0, 0, 9, 1),
	} {
		c, err := ParseChunk(buildChunk(0, 1, 1, data), true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, _, err := collect(t, &c); !errors.Is(err, ErrBadChunk) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	c, _ := ParseChunk(buildChunk(0, 1, 2, subBatch(1, []byte("a"), []byte("b"))), true)
	if _, _, err := collect(t, &c); !errors.Is(err, ErrCompressed) {
		t.Errorf("gzip sub-batch: %v", err)
	}
}

// Ensure the AMQP 1.0 encoding is one data section, small and large, and
// that DataBody reads it back and refuses anything else.
func TestAMQPDataSection(t *testing.T) {
	if got := hex.EncodeToString(AppendMessage(nil, []byte("hi"))); got != "005375a0026869" {
		t.Errorf("small: %s", got)
	}
	big := bytes.Repeat([]byte{7}, 300)
	enc := AppendMessage(nil, big)
	if hex.EncodeToString(enc[:8]) != "005375b00000012c" || len(enc) != EncodedSize(300) {
		t.Errorf("large header % x, len %d", enc[:8], len(enc))
	}
	for _, body := range [][]byte{{}, []byte("hi"), big, bytes.Repeat([]byte{1}, 255), bytes.Repeat([]byte{1}, 256)} {
		enc := AppendMessage(nil, body)
		if len(enc) != EncodedSize(len(body)) {
			t.Errorf("len %d: EncodedSize %d, got %d", len(body), EncodedSize(len(body)), len(enc))
		}
		got, ok := DataBody(enc)
		if !ok || !bytes.Equal(got, body) {
			t.Errorf("len %d: round trip %v", len(body), ok)
		}
	}
	for _, bad := range []string{"", "005375", "005375a005", "005375b0000000", "005375b000000009aa",
		"005377a00161", "005370a00161"} {
		b, _ := hex.DecodeString(bad)
		if _, ok := DataBody(b); ok {
			t.Errorf("DataBody(%s) accepted", bad)
		}
	}
}

// Ensure a Batch encodes publishing id, entry size and message per entry.
func TestBatchGolden(t *testing.T) {
	var b Batch
	b.Add(1, []byte("hi"))
	copy(b.Append(0x0102030405060708, 3), "abc")
	want := "0000000000000001" + "00000007" + "005375a0026869" +
		"0102030405060708" + "00000008" + "005375a003616263"
	if got := hex.EncodeToString(b.buf); got != want || b.Len() != 2 {
		t.Errorf("batch %s (%d messages), want %s", got, b.Len(), want)
	}
	b.Reset()
	b.AddRaw(9, []byte{1, 2})
	if got := hex.EncodeToString(b.buf); got != "0000000000000009000000020102" {
		t.Errorf("raw: %s", got)
	}
}

func FuzzParseChunk(f *testing.F) {
	f.Add(buildChunk(0, 1, 1, simple([]byte("x"))))
	f.Add(buildChunk(7, 2, 4, append(subBatch(0, []byte("a"), []byte("b"), []byte("c")), simple([]byte("d"))...)))
	f.Add(buildChunk(0, 1, 2, subBatch(3, []byte("a"), []byte("b"))))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseChunk(b, false)
		if err != nil {
			return
		}
		it := c.Messages()
		n := 0
		for it.Next() {
			if _, ok := DataBody(it.Message()); ok {
				n++
			}
			if len(it.Message()) > len(c.Data) {
				t.Fatal("message longer than the chunk data")
			}
		}
	})
}
