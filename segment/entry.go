package segment

import (
	"encoding/binary"
	"fmt"
)

// These constants are part of the on-disk and wire format and must not be
// changed.
const (
	// subBatchFlag marks a sub-batch entry in the first byte.
	subBatchFlag = 0x80
	// subBatchHeaderSize is flag byte + count u16 + uncompressed u32 + len u32.
	subBatchHeaderSize = 1 + 2 + 4 + 4
	// MaxSubBatchUncompressed bounds a sub-batch's uncompressed size (64 MiB,
	// RabbitMQ's max_uncompressed_sub_entry_batch_size).
	MaxSubBatchUncompressed = 64 << 20
)

// Compression is a sub-batch's compression codec (3 bits on the wire).
type Compression uint8

// Sub-batch compression codecs.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// Entry is one parsed entry. Its slices alias the parsed buffer.
type Entry struct {
	Raw          []byte      // the whole entry as stored
	Records      uint32      // records it holds: 1 for a simple entry
	SubBatch     bool        // whether it is a sub-batch
	Compression  Compression // sub-batch codec
	Uncompressed uint32      // sub-batch uncompressed size
	Data         []byte      // simple: the record; sub-batch: the (compressed) data
}

// ParseEntry splits the first entry off b and validates it the way RabbitMQ
// validates published sub-batches: a known codec, a positive count, at most
// 64 MiB uncompressed, count*4 <= uncompressed size, and non-empty data when
// compressed.
func ParseEntry(b []byte) (Entry, []byte, error) {
	if len(b) < 4 {
		return Entry{}, b, fmt.Errorf("entry header: %d bytes: %w", len(b), ErrInvalidEntry)
	}
	if b[0]&subBatchFlag == 0 {
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return Entry{}, b, fmt.Errorf("simple entry: size %d, %d bytes left: %w", n, len(b)-4, ErrInvalidEntry)
		}
		end := 4 + int(n)
		return Entry{Raw: b[:end], Records: 1, Data: b[4:end]}, b[end:], nil
	}
	if len(b) < subBatchHeaderSize {
		return Entry{}, b, fmt.Errorf("sub-batch header: %d bytes: %w", len(b), ErrInvalidEntry)
	}
	e := Entry{
		SubBatch:     true,
		Compression:  Compression(b[0] >> 4 & 0x7),
		Records:      uint32(binary.BigEndian.Uint16(b[1:])),
		Uncompressed: binary.BigEndian.Uint32(b[3:]),
	}
	n := binary.BigEndian.Uint32(b[7:])
	switch {
	case e.Compression > CompressionZstd:
		return Entry{}, b, fmt.Errorf("sub-batch: %v: %w", e.Compression, ErrInvalidEntry)
	case e.Records == 0:
		return Entry{}, b, fmt.Errorf("sub-batch: no records: %w", ErrInvalidEntry)
	case e.Uncompressed > MaxSubBatchUncompressed:
		return Entry{}, b, fmt.Errorf("sub-batch: %d bytes uncompressed: %w", e.Uncompressed, ErrInvalidEntry)
	case uint64(e.Records)*4 > uint64(e.Uncompressed):
		return Entry{}, b, fmt.Errorf("sub-batch: %d records in %d bytes: %w", e.Records, e.Uncompressed, ErrInvalidEntry)
	case e.Compression != CompressionNone && n == 0:
		return Entry{}, b, fmt.Errorf("sub-batch: empty %v data: %w", e.Compression, ErrInvalidEntry)
	case uint64(n) > uint64(len(b)-subBatchHeaderSize):
		return Entry{}, b, fmt.Errorf("sub-batch: size %d, %d bytes left: %w", n, len(b)-subBatchHeaderSize, ErrInvalidEntry)
	}
	end := subBatchHeaderSize + int(n)
	e.Raw = b[:end]
	e.Data = b[subBatchHeaderSize:end]
	return e, b[end:], nil
}

// AppendSimpleEntry appends a simple entry holding record to dst.
func AppendSimpleEntry(dst, record []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(record)))
	return append(dst, record...)
}

// AppendSubBatch appends an uncompressed sub-batch entry holding records.
func AppendSubBatch(dst []byte, records [][]byte) []byte {
	size := 0
	for _, r := range records {
		size += 4 + len(r)
	}
	dst = append(dst, subBatchFlag|byte(CompressionNone)<<4)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(records)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	for _, r := range records {
		dst = AppendSimpleEntry(dst, r)
	}
	return dst
}

// AppendCompressedSubBatch appends a sub-batch entry whose records are
// already encoded (u32 size + bytes each) and compressed with c.
func AppendCompressedSubBatch(dst []byte, c Compression, count uint16, uncompressed uint32, data []byte) []byte {
	dst = append(dst, subBatchFlag|byte(c)<<4)
	dst = binary.BigEndian.AppendUint16(dst, count)
	dst = binary.BigEndian.AppendUint32(dst, uncompressed)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	return append(dst, data...)
}

// Records calls fn for each record of the entry data (the entries of one
// chunk), decompressing sub-batches into scratch, which it may grow and
// returns. The record slices passed to fn are valid only during the call.
// fn returning false stops the iteration.
func Records(data []byte, scratch []byte, fn func(record []byte) bool) ([]byte, error) {
	return Walk(data, scratch, false, func(record []byte, _ uint64) bool { return fn(record) })
}

// Walk is Records with each record's index in the chunk (its offset less
// the chunk's first offset). With skipCompressed, compressed sub-batches
// are passed over (their records still count in the indexes), as
// RabbitMQ's AMQP consumers of a stream skip them.
func Walk(data []byte, scratch []byte, skipCompressed bool, fn func(record []byte, index uint64) bool) ([]byte, error) {
	var index uint64
	for len(data) > 0 {
		e, rest, err := ParseEntry(data)
		if err != nil {
			return scratch, err
		}
		data = rest
		if !e.SubBatch {
			if !fn(e.Data, index) {
				return scratch, nil
			}
			index++
			continue
		}
		plain := e.Data
		switch {
		case e.Compression == CompressionNone && uint32(len(plain)) != e.Uncompressed:
			return scratch, fmt.Errorf("sub-batch: %d bytes, header says %d: %w", len(plain), e.Uncompressed, ErrInvalidEntry)
		case e.Compression != CompressionNone && skipCompressed:
			index += uint64(e.Records)
			continue
		case e.Compression != CompressionNone:
			scratch, err = Decompress(scratch[:0], e.Compression, e.Data, e.Uncompressed)
			if err != nil {
				return scratch, err
			}
			plain = scratch
		}
		for i := uint32(0); i < e.Records; i++ {
			if len(plain) < 4 {
				return scratch, fmt.Errorf("sub-batch record %d: %w", i, ErrInvalidEntry)
			}
			n := binary.BigEndian.Uint32(plain)
			if uint64(n) > uint64(len(plain)-4) {
				return scratch, fmt.Errorf("sub-batch record %d: size %d: %w", i, n, ErrInvalidEntry)
			}
			if !fn(plain[4:4+n], index) {
				return scratch, nil
			}
			plain = plain[4+n:]
			index++
		}
	}
	return scratch, nil
}
