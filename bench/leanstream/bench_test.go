package leanstream

import (
	"encoding/binary"
	"testing"
)

// BenchmarkEncodeBatch encodes batches of 100 messages of 100 bytes into a
// reused Batch.
func BenchmarkEncodeBatch(b *testing.B) {
	body := make([]byte, 100)
	var batch Batch
	b.ReportAllocs()
	b.SetBytes(100 * 100)
	var id uint64
	for b.Loop() {
		batch.Reset()
		for range 100 {
			id++
			copy(batch.Append(id, len(body)), body)
		}
	}
}

// BenchmarkParseChunk parses a chunk of 100 messages of 100 bytes (CRC
// checked) and reads every body.
func BenchmarkParseChunk(b *testing.B) {
	var data []byte
	for range 100 {
		data = append(data, simple(AppendMessage(nil, make([]byte, 100)))...)
	}
	raw := buildChunk(0, 100, 100, data)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		c, err := ParseChunk(raw, true)
		if err != nil {
			b.Fatal(err)
		}
		it := c.Messages()
		n := 0
		for it.Next() {
			if body, ok := DataBody(it.Message()); ok {
				n += len(body)
			}
		}
		if n != 100*100 || it.Err() != nil {
			b.Fatal(n, it.Err())
		}
	}
}

// BenchmarkMessages walks a replay-sized chunk (2,000 messages of 100
// bytes, ~220 KB) and reads every body's first 8 bytes, as warren-perf's
// lean consumer does; the CRC is left out (BenchmarkParseChunk has it).
func BenchmarkMessages(b *testing.B) {
	var data []byte
	for range 2000 {
		data = append(data, simple(AppendMessage(nil, make([]byte, 100)))...)
	}
	c, err := ParseChunk(buildChunk(0, 2000, 2000, data), false)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var sum uint64
	for b.Loop() {
		it := c.Messages()
		n := 0
		for it.Next() {
			if body, ok := DataBody(it.Message()); ok && len(body) >= 8 {
				sum += binary.BigEndian.Uint64(body)
				n++
			}
		}
		if n != 2000 || it.Err() != nil {
			b.Fatal(n, it.Err())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000), "ns/msg")
}
