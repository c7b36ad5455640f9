package leanstream

import "testing"

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
