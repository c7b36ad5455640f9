package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/cespare/xxhash/v2"
)

// These constants are part of the on-disk and wire format and must not be
// changed.
const (
	// HeaderSize is the size of a chunk header.
	HeaderSize = 48
	// magicVersion is magic 5 in the high nibble, chunk version 0 in the low.
	magicVersion = 0x50

	// ChunkUser holds user entries.
	ChunkUser ChunkType = 0
	// ChunkTrackingDelta holds tracking updates written without user data.
	ChunkTrackingDelta ChunkType = 1
	// ChunkTrackingSnapshot holds the whole tracking state; it starts a segment.
	ChunkTrackingSnapshot ChunkType = 2

	// MinBloomSize and MaxBloomSize bound a chunk's Bloom filter, in bytes.
	MinBloomSize = 16
	MaxBloomSize = 255

	// MaxChunkEntries is the most entries one chunk holds (nEntries is a u16).
	MaxChunkEntries = 1<<16 - 1
	// MaxDataLen bounds a chunk's entry data; larger lengths are corrupt.
	MaxDataLen = 1 << 28
	// MaxTrailerLen bounds a chunk's trailer; larger lengths are corrupt.
	MaxTrailerLen = 1 << 24
)

// Compile-time checks that the layout constants agree with each other.
const (
	_ = uint(HeaderSize - 48)
	_ = uint(48 - HeaderSize)
	_ = uint(MaxBloomSize - MinBloomSize)
	_ = uint(255 - MaxBloomSize)
)

// ChunkType says what a chunk holds.
type ChunkType uint8

func (t ChunkType) String() string {
	switch t {
	case ChunkUser:
		return "user"
	case ChunkTrackingDelta:
		return "tracking-delta"
	case ChunkTrackingSnapshot:
		return "tracking-snapshot"
	}
	return fmt.Sprintf("chunk-type(%d)", uint8(t))
}

// Header is a decoded chunk header.
type Header struct {
	Type       ChunkType // what the chunk holds
	NumEntries uint16    // top-level entries; a sub-batch counts once
	NumRecords uint32    // records (messages); offsets used by the chunk
	Timestamp  int64     // writer wall clock in ms when the chunk was formed
	Epoch      uint64    // writer epoch
	ChunkID    uint64    // offset of the chunk's first record
	DataCRC    uint32    // CRC-32 (IEEE) of the entry data
	DataLen    uint32    // bytes of entry data
	TrailerLen uint32    // bytes of trailer
	BloomSize  uint8     // bytes of Bloom filter (0: none)
	Check      uint32    // low 24 bits of xxhash64(header[0:45] | bloom | trailer)
}

// Size is the number of bytes the whole chunk takes in a segment file.
func (h *Header) Size() int64 {
	return HeaderSize + int64(h.BloomSize) + int64(h.DataLen) + int64(h.TrailerLen)
}

// NextOffset is the offset of the first record after this chunk.
func (h *Header) NextOffset() uint64 { return h.ChunkID + uint64(h.NumRecords) }

// DataOffset is the position of the entry data relative to the chunk start.
func (h *Header) DataOffset() int64 { return HeaderSize + int64(h.BloomSize) }

// AppendTo appends the stored 48-byte form of h to dst.
func (h *Header) AppendTo(dst []byte) []byte {
	dst = append(dst, magicVersion, byte(h.Type))
	dst = binary.BigEndian.AppendUint16(dst, h.NumEntries)
	dst = binary.BigEndian.AppendUint32(dst, h.NumRecords)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Timestamp))
	dst = binary.BigEndian.AppendUint64(dst, h.Epoch)
	dst = binary.BigEndian.AppendUint64(dst, h.ChunkID)
	dst = binary.BigEndian.AppendUint32(dst, h.DataCRC)
	dst = binary.BigEndian.AppendUint32(dst, h.DataLen)
	dst = binary.BigEndian.AppendUint32(dst, h.TrailerLen)
	dst = append(dst, h.BloomSize, byte(h.Check>>16), byte(h.Check>>8), byte(h.Check))
	return dst
}

// AppendWire appends h as a client expects it in a Deliver frame: the stored
// form with the reserved bytes 45-47 zeroed.
func (h *Header) AppendWire(dst []byte) []byte {
	dst = h.AppendTo(dst)
	n := len(dst)
	dst[n-3], dst[n-2], dst[n-1] = 0, 0, 0
	return dst
}

// ParseHeader decodes a chunk header from the first HeaderSize bytes of b.
// It checks the magic, version, type and length bounds, not the checksums.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("chunk header: %d bytes: %w", len(b), ErrCorrupt)
	}
	if b[0] != magicVersion {
		return h, fmt.Errorf("chunk header: magic/version 0x%02x: %w", b[0], ErrCorrupt)
	}
	h.Type = ChunkType(b[1])
	h.NumEntries = binary.BigEndian.Uint16(b[2:])
	h.NumRecords = binary.BigEndian.Uint32(b[4:])
	h.Timestamp = int64(binary.BigEndian.Uint64(b[8:]))
	h.Epoch = binary.BigEndian.Uint64(b[16:])
	h.ChunkID = binary.BigEndian.Uint64(b[24:])
	h.DataCRC = binary.BigEndian.Uint32(b[32:])
	h.DataLen = binary.BigEndian.Uint32(b[36:])
	h.TrailerLen = binary.BigEndian.Uint32(b[40:])
	h.BloomSize = b[44]
	h.Check = uint32(b[45])<<16 | uint32(b[46])<<8 | uint32(b[47])
	switch {
	case h.Type > ChunkTrackingSnapshot:
		return h, fmt.Errorf("chunk %d: type %d: %w", h.ChunkID, h.Type, ErrCorrupt)
	case h.NumEntries == 0 || h.NumRecords < uint32(h.NumEntries):
		return h, fmt.Errorf("chunk %d: %d entries, %d records: %w", h.ChunkID, h.NumEntries, h.NumRecords, ErrCorrupt)
	case h.DataLen > MaxDataLen || h.TrailerLen > MaxTrailerLen:
		return h, fmt.Errorf("chunk %d: data %d, trailer %d bytes: %w", h.ChunkID, h.DataLen, h.TrailerLen, ErrCorrupt)
	case h.BloomSize != 0 && h.BloomSize < MinBloomSize:
		return h, fmt.Errorf("chunk %d: bloom size %d: %w", h.ChunkID, h.BloomSize, ErrCorrupt)
	case h.ChunkID+uint64(h.NumRecords) < h.ChunkID:
		return h, fmt.Errorf("chunk %d: %d records overflow: %w", h.ChunkID, h.NumRecords, ErrCorrupt)
	}
	return h, nil
}

// headerCheck computes the 24-bit check over a stored header (bytes 0-44),
// the Bloom bytes and the trailer.
func headerCheck(hdr, bloom, trailer []byte) uint32 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(hdr[:45])
	_, _ = d.Write(bloom)
	_, _ = d.Write(trailer)
	return uint32(d.Sum64()) & 0xffffff
}

// Verify checks a whole chunk held in memory: header, check bytes and data
// CRC. chunk must be exactly h.Size() bytes starting with the header.
func Verify(chunk []byte) (Header, error) {
	h, err := ParseHeader(chunk)
	if err != nil {
		return h, err
	}
	if int64(len(chunk)) != h.Size() {
		return h, fmt.Errorf("chunk %d: %d bytes, header says %d: %w", h.ChunkID, len(chunk), h.Size(), ErrCorrupt)
	}
	bloomEnd := HeaderSize + int(h.BloomSize)
	dataEnd := bloomEnd + int(h.DataLen)
	if c := headerCheck(chunk, chunk[HeaderSize:bloomEnd], chunk[dataEnd:]); c != h.Check {
		return h, fmt.Errorf("chunk %d: header check %06x, want %06x: %w", h.ChunkID, c, h.Check, ErrCorrupt)
	}
	if c := crc32.ChecksumIEEE(chunk[bloomEnd:dataEnd]); c != h.DataCRC {
		return h, fmt.Errorf("chunk %d: data crc %08x, want %08x: %w", h.ChunkID, c, h.DataCRC, ErrCorrupt)
	}
	if err := checkEntries(chunk[bloomEnd:dataEnd], &h); err != nil {
		return h, err
	}
	return h, nil
}

// checkEntries checks that data splits into exactly h.NumEntries entries
// holding h.NumRecords records.
func checkEntries(data []byte, h *Header) error {
	var entries, records uint32
	for len(data) > 0 {
		e, rest, err := ParseEntry(data)
		if err != nil {
			return fmt.Errorf("chunk %d: entry %d: %w", h.ChunkID, entries, ErrCorrupt)
		}
		entries++
		records += e.Records
		data = rest
	}
	if entries != uint32(h.NumEntries) || records != h.NumRecords {
		return fmt.Errorf("chunk %d: data holds %d entries, %d records; header says %d, %d: %w",
			h.ChunkID, entries, records, h.NumEntries, h.NumRecords, ErrCorrupt)
	}
	return nil
}

// Builder forms chunks in a caller-owned buffer. Several chunks may be built
// one after another into the same buffer, so that a writer can hand them to
// the file in one write. A Builder is not safe for concurrent use.
//
// Usage: Begin, then AddEntry for each entry, then Finish. Builder copies the
// entry bytes; nothing is retained after Finish.
type Builder struct {
	buf        []byte // the output buffer; the chunk being built starts at start
	start      int    // position of the chunk header in buf
	dataStart  int    // position of the entry data in buf
	bloomSize  int    // configured filter size in bytes, 0 for none
	bloomOn    bool   // whether bytes for the Bloom filter are reserved in buf
	typ        ChunkType
	chunkID    uint64
	numEntries int
	numRecords uint32
	bloom      Bloom
}

// Begin starts a chunk of type typ whose first record gets offset chunkID,
// appended to buf. bloomSize is the stream's filter size (0 disables
// filters; otherwise MinBloomSize..MaxBloomSize).
func (b *Builder) Begin(buf []byte, typ ChunkType, chunkID uint64, bloomSize int) {
	b.buf = buf
	b.start = len(buf)
	b.buf = append(b.buf, make([]byte, HeaderSize)...)
	b.dataStart = len(b.buf)
	b.bloomSize = bloomSize
	b.bloomOn = false
	b.typ = typ
	b.chunkID = chunkID
	b.numEntries = 0
	b.numRecords = 0
	if bloomSize > 0 {
		b.bloom.Reset(bloomSize)
	}
}

// Len is the number of entries added since Begin.
func (b *Builder) Len() int { return b.numEntries }

// DataLen is the number of entry bytes added since Begin.
func (b *Builder) DataLen() int { return len(b.buf) - b.dataStart }

// NextOffset is the offset the next record added would get.
func (b *Builder) NextOffset() uint64 { return b.chunkID + uint64(b.numRecords) }

// AddEntry appends one encoded entry (simple or sub-batch) holding records
// records. filter is the entry's filter value; nil or empty means
// unfiltered. A filter value is only recorded when the builder has a Bloom
// size.
func (b *Builder) AddEntry(entry []byte, records uint32, filter []byte) error {
	if b.numEntries == MaxChunkEntries {
		return ErrChunkFull
	}
	if b.bloomSize > 0 {
		if len(filter) > 0 && !b.bloomOn {
			// Reserve the Bloom bytes before the data, moving any data
			// already added. Rare: usually the first entry decides.
			n := len(b.buf)
			b.buf = append(b.buf, make([]byte, b.bloomSize)...)
			copy(b.buf[b.dataStart+b.bloomSize:], b.buf[b.dataStart:n])
			b.dataStart += b.bloomSize
			b.bloomOn = true
		}
		b.bloom.Add(filter)
	}
	b.buf = append(b.buf, entry...)
	b.numEntries++
	b.numRecords += records
	return nil
}

// Finish completes the chunk with the given timestamp, epoch and trailer and
// returns the buffer (with the chunk appended) and the chunk's header.
func (b *Builder) Finish(timestamp int64, epoch uint64, trailer []byte) ([]byte, Header) {
	bloomStart := b.start + HeaderSize
	h := Header{
		Type:       b.typ,
		NumEntries: uint16(b.numEntries),
		NumRecords: b.numRecords,
		Timestamp:  timestamp,
		Epoch:      epoch,
		ChunkID:    b.chunkID,
		DataCRC:    crc32.ChecksumIEEE(b.buf[b.dataStart:]),
		DataLen:    uint32(len(b.buf) - b.dataStart),
		TrailerLen: uint32(len(trailer)),
	}
	if b.bloomOn {
		h.BloomSize = uint8(b.bloomSize)
		copy(b.buf[bloomStart:b.dataStart], b.bloom.Bytes())
	}
	b.buf = append(b.buf, trailer...)
	hdr := h.AppendTo(b.buf[b.start:b.start])
	h.Check = headerCheck(hdr, b.buf[bloomStart:b.dataStart], trailer)
	hdr[45], hdr[46], hdr[47] = byte(h.Check>>16), byte(h.Check>>8), byte(h.Check)
	buf := b.buf
	b.buf = nil
	return buf, h
}
