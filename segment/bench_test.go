package segment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Run with: go test -run=^$ -bench=. -benchtime=2s ./segment/
//
// Each workload runs twice, side by side: through this package, and as the
// same bytes through a plain *os.File, so the overhead reads off one run.
// One op is one message; MB/s counts message bytes.

const (
	// benchRollSize is the segment size at which the write benchmarks start
	// a new file (and delete the old one), so the disk does not fill up.
	benchRollSize = 256 << 20
	// benchBatchBytes is about how many bytes one Append (or Write) takes.
	benchBatchBytes = 1 << 20
	// benchReadFileBytes is the size of the file the read benchmarks read
	// round and round.
	benchReadFileBytes = 64 << 20
)

var (
	benchMsgSizes = []int{100, 1024}
	benchEntries  = []int{1, 100, 1000}
)

// benchShape is one workload: message size and messages per chunk.
type benchShape struct {
	msgSize int
	entries int
}

func (s benchShape) String() string { return fmt.Sprintf("msg=%dB/entries=%d", s.msgSize, s.entries) }

// entry is one message as a simple entry.
func (s benchShape) entry() []byte {
	return AppendSimpleEntry(nil, bytes.Repeat([]byte{'m'}, s.msgSize))
}

// chunkSize is the size of one chunk.
func (s benchShape) chunkSize() int { return HeaderSize + s.entries*(4+s.msgSize) }

// chunksPerBatch is how many chunks one Append takes: about 1 MiB.
func (s benchShape) chunksPerBatch() int { return max(1, benchBatchBytes/s.chunkSize()) }

func reportMsgs(b *testing.B, msgs int) {
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkAppend builds chunks with Builder and appends them in batches of
// about 1 MiB (Append), next to writing the same batches to a plain file
// (RawWrite).
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchMsgSizes {
		for _, entries := range benchEntries {
			shape := benchShape{msgSize: size, entries: entries}
			b.Run(shape.String()+"/Append", func(b *testing.B) { benchAppend(b, shape) })
			b.Run(shape.String()+"/RawWrite", func(b *testing.B) { benchRawWrite(b, shape) })
		}
	}
}

func benchAppend(b *testing.B, shape benchShape) {
	dir := b.TempDir()
	entry := shape.entry()
	perBatch := shape.chunksPerBatch()
	buf := make([]byte, 0, perBatch*shape.chunkSize())
	hdrs := make([]Header, 0, perBatch)
	var id uint64
	s, err := Create(dir, id)
	if err != nil {
		b.Fatal(err)
	}
	var bld Builder
	b.SetBytes(int64(shape.msgSize))
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		buf, hdrs = buf[:0], hdrs[:0]
		for c := 0; c < perBatch && sent < b.N; c++ {
			bld.Begin(buf, ChunkUser, id, 0)
			for range shape.entries {
				if err := bld.AddEntry(entry, 1, nil); err != nil {
					b.Fatal(err)
				}
			}
			var h Header
			buf, h = bld.Finish(1_700_000_000_000+int64(sent), 1, nil)
			hdrs = append(hdrs, h)
			id = h.NextOffset()
			sent += shape.entries
		}
		if s.Size()+int64(len(buf)) > benchRollSize {
			b.StopTimer()
			if err := s.Remove(); err != nil {
				b.Fatal(err)
			}
			if s, err = Create(dir, hdrs[0].ChunkID); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if err := s.Append(buf, hdrs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportMsgs(b, sent)
	if err := s.Remove(); err != nil {
		b.Fatal(err)
	}
}

func benchRawWrite(b *testing.B, shape benchShape) {
	path := filepath.Join(b.TempDir(), "raw")
	perBatch := shape.chunksPerBatch()
	// The same bytes Append writes: the chunks of one batch.
	var batch []byte
	var bld Builder
	for range perBatch {
		bld.Begin(batch, ChunkUser, 0, 0)
		for range shape.entries {
			_ = bld.AddEntry(shape.entry(), 1, nil)
		}
		batch, _ = bld.Finish(0, 1, nil)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	size := int64(0)
	b.SetBytes(int64(shape.msgSize))
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		n := min(perBatch, (b.N-sent+shape.entries-1)/shape.entries)
		if size+int64(n*shape.chunkSize()) > benchRollSize {
			b.StopTimer()
			f.Close()
			if f, err = os.Create(path); err != nil { // truncates
				b.Fatal(err)
			}
			size = 0
			b.StartTimer()
		}
		if _, err := f.Write(batch[:n*shape.chunkSize()]); err != nil {
			b.Fatal(err)
		}
		size += int64(n * shape.chunkSize())
		sent += n * shape.entries
	}
	b.StopTimer()
	reportMsgs(b, sent)
	f.Close()
	os.Remove(path)
}

// BenchmarkSequentialRead reads a 64 MiB segment back chunk by chunk, header
// then data (ReadHeader + ReadAt), next to reading the same file in 1 MiB
// blocks (RawRead). The file is in the page cache.
func BenchmarkSequentialRead(b *testing.B) {
	for _, size := range benchMsgSizes {
		for _, entries := range benchEntries {
			shape := benchShape{msgSize: size, entries: entries}
			dir := b.TempDir()
			s := benchSegment(b, dir, shape)
			b.Run(shape.String()+"/ReadHeader", func(b *testing.B) { benchReadHeader(b, s, shape) })
			b.Run(shape.String()+"/RawRead", func(b *testing.B) { benchRawRead(b, s, shape) })
			if err := s.Remove(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchSegment writes a segment of about benchReadFileBytes of shape's
// chunks.
func benchSegment(b *testing.B, dir string, shape benchShape) *Segment {
	s, err := Create(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	entry := shape.entry()
	perBatch := shape.chunksPerBatch()
	var bld Builder
	var buf []byte
	var hdrs []Header
	var id uint64
	for s.Size() < benchReadFileBytes {
		buf, hdrs = buf[:0], hdrs[:0]
		for range perBatch {
			bld.Begin(buf, ChunkUser, id, 0)
			for range shape.entries {
				_ = bld.AddEntry(entry, 1, nil)
			}
			var h Header
			buf, h = bld.Finish(0, 1, nil)
			hdrs = append(hdrs, h)
			id = h.NextOffset()
		}
		if err := s.Append(buf, hdrs); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

func benchReadHeader(b *testing.B, s *Segment, shape benchShape) {
	limit := s.Size()
	hbuf := make([]byte, HeaderSize+MaxBloomSize)
	data := make([]byte, shape.chunkSize())
	pos := int64(FileHeaderSize)
	b.SetBytes(int64(shape.msgSize))
	b.ReportAllocs()
	b.ResetTimer()
	read := 0
	for read < b.N {
		if pos == limit {
			pos = FileHeaderSize
		}
		h, _, err := s.ReadHeader(pos, limit, hbuf)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.ReadAt(data[:h.DataLen], pos+h.DataOffset()); err != nil {
			b.Fatal(err)
		}
		read += int(h.NumRecords)
		pos += h.Size()
	}
	b.StopTimer()
	reportMsgs(b, read)
}

func benchRawRead(b *testing.B, s *Segment, shape benchShape) {
	f, err := os.Open(s.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	limit := s.Size()
	block := make([]byte, 1<<20)
	// Read as many bytes per message as the chunks hold.
	perMsg := float64(shape.chunkSize()) / float64(shape.entries)
	pos := int64(0)
	b.SetBytes(int64(shape.msgSize))
	b.ReportAllocs()
	b.ResetTimer()
	total := int64(float64(b.N) * perMsg)
	for done := int64(0); done < total; {
		if pos == limit {
			pos = 0
		}
		n := min(int64(len(block)), limit-pos, total-done)
		if _, err := f.ReadAt(block[:n], pos); err != nil {
			b.Fatal(err)
		}
		pos += n
		done += n
	}
	b.StopTimer()
	reportMsgs(b, b.N)
}

// BenchmarkOpen opens a closed 64 MiB segment of 100-message chunks of
// 1 KiB messages with Open (the tail only) and with Recover (every
// chunk: what a stream's open pays for its last segment); MB/s counts
// the segment's bytes.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	shape := benchShape{msgSize: 1024, entries: 100}
	s, err := Create(dir, 0)
	if err != nil {
		b.Fatal(err)
	}
	entry := shape.entry()
	var bld Builder
	var buf []byte
	var hdrs []Header
	next := uint64(0)
	for s.Size() < benchReadFileBytes {
		buf, hdrs = buf[:0], hdrs[:0]
		for range shape.chunksPerBatch() {
			bld.Begin(buf, ChunkUser, next, 0)
			for range shape.entries {
				if err := bld.AddEntry(entry, 1, nil); err != nil {
					b.Fatal(err)
				}
			}
			var h Header
			buf, h = bld.Finish(1, 1, nil)
			hdrs = append(hdrs, h)
			next = h.NextOffset()
		}
		if err := s.Append(buf, hdrs); err != nil {
			b.Fatal(err)
		}
	}
	size := s.Size()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, fn := range []struct {
		name string
		open func(string, uint64) (*Segment, Recovery, error)
	}{{"Open", Open}, {"Recover", Recover}} {
		b.Run(fn.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				s, rec, err := fn.open(dir, 0)
				if err != nil || rec.Repaired() {
					b.Fatalf("%+v, %v", rec, err)
				}
				s.Close()
			}
		})
	}
}
