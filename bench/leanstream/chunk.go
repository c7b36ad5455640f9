package leanstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/warren-mq/warren/streamproto/wire"
)

// ChunkHeaderSize is the size of an Osiris chunk header on the wire.
const ChunkHeaderSize = 48

const (
	chunkMagicVersion = 0x50 // magic 5 in the high nibble, version 0 in the low one
	chunkTypeUser     = 0
)

// Errors of the chunk parser.
var (
	// ErrBadChunk marks a chunk the parser cannot read.
	ErrBadChunk = errors.New("leanstream: malformed chunk")
	// ErrCompressed marks a compressed sub-entry batch, which this client
	// does not read.
	ErrCompressed = errors.New("leanstream: compressed sub-entry batch not supported")
)

// Chunk is one Osiris chunk as delivered. Data and every message read from
// it point into the connection's read buffer: they are valid only during
// the handler call that received the chunk.
type Chunk struct {
	SubscriptionID uint8
	ChunkType      uint8
	NumEntries     uint16
	NumRecords     uint32
	Timestamp      int64 // ms since the Unix epoch, when the chunk was written
	Epoch          uint64
	FirstOffset    uint64 // the chunk id: offset of its first record
	CRC            uint32
	Data           []byte // the entries, DataLength bytes

	// skipBelow makes Messages drop records below it (an "offset" start
	// lands on the chunk containing the offset).
	skipBelow uint64
}

// ParseChunk parses a chunk (header and entries, without Bloom filter or
// trailer bytes) from b. Bytes after the entries are ignored. With
// checkCRC it verifies the CRC32 of the entries.
func ParseChunk(b []byte, checkCRC bool) (Chunk, error) {
	var c Chunk
	if len(b) < ChunkHeaderSize {
		return c, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadChunk, len(b), ChunkHeaderSize)
	}
	if b[0] != chunkMagicVersion {
		return c, fmt.Errorf("%w: magic/version byte %#02x, want %#02x", ErrBadChunk, b[0], chunkMagicVersion)
	}
	c.ChunkType = b[1]
	c.NumEntries = binary.BigEndian.Uint16(b[2:])
	c.NumRecords = binary.BigEndian.Uint32(b[4:])
	c.Timestamp = int64(binary.BigEndian.Uint64(b[8:]))
	c.Epoch = binary.BigEndian.Uint64(b[16:])
	c.FirstOffset = binary.BigEndian.Uint64(b[24:])
	c.CRC = binary.BigEndian.Uint32(b[32:])
	dataLen := binary.BigEndian.Uint32(b[36:])
	// TrailerLength (40), BloomSize (44) and 3 reserved bytes: the server
	// sends neither Bloom filter nor trailer to consumers.
	rest := b[ChunkHeaderSize:]
	if uint64(dataLen) > uint64(len(rest)) {
		return c, fmt.Errorf("%w: data length %d, only %d bytes follow the header", ErrBadChunk, dataLen, len(rest))
	}
	c.Data = rest[:dataLen:dataLen]
	if checkCRC {
		if got := crc32.ChecksumIEEE(c.Data); got != c.CRC {
			return c, fmt.Errorf("%w: chunk %d: crc %#08x, header says %#08x", ErrBadChunk, c.FirstOffset, got, c.CRC)
		}
	}
	return c, nil
}

// Messages returns an iterator over the chunk's records (the message
// bytes, normally an AMQP 1.0 message). Non-user chunks (tracking) have no
// messages.
func (c *Chunk) Messages() MessageIter {
	it := MessageIter{data: c.Data, offset: c.FirstOffset, skipBelow: c.skipBelow, entriesLeft: int(c.NumEntries)}
	if c.ChunkType != chunkTypeUser {
		it.data, it.entriesLeft = nil, 0
	}
	return it
}

// MessageIter walks the records of a chunk without allocating:
//
//	it := chunk.Messages()
//	for it.Next() {
//		use(it.Message(), it.Offset())
//	}
//	if err := it.Err(); err != nil { ... }
type MessageIter struct {
	data        []byte // remaining entries
	sub         []byte // remaining records of the current sub-entry batch
	subLeft     int    // records left in sub
	entriesLeft int
	offset      uint64 // offset of the next record
	skipBelow   uint64
	msg         []byte
	msgOffset   uint64
	err         error
}

// Next advances to the next record and reports whether there is one. It
// returns false at the end or on an error (see Err).
func (it *MessageIter) Next() bool {
	for {
		if it.err != nil {
			return false
		}
		var msg []byte
		switch {
		case it.subLeft > 0:
			if len(it.sub) < 4 {
				return it.fail("sub-entry record size truncated")
			}
			n := binary.BigEndian.Uint32(it.sub)
			if uint64(n) > uint64(len(it.sub)-4) {
				return it.fail("sub-entry record longer than its batch")
			}
			msg = it.sub[4 : 4+n : 4+n]
			it.sub = it.sub[4+n:]
			it.subLeft--
		case it.entriesLeft > 0 && len(it.data) > 0:
			it.entriesLeft--
			if it.data[0]&0x80 == 0 { // simple entry
				if len(it.data) < 4 {
					return it.fail("entry size truncated")
				}
				n := binary.BigEndian.Uint32(it.data)
				if uint64(n) > uint64(len(it.data)-4) {
					return it.fail("entry longer than the chunk data")
				}
				msg = it.data[4 : 4+n : 4+n]
				it.data = it.data[4+n:]
				break
			}
			// Sub-entry batch: type/compression byte, record count u16,
			// uncompressed length u32, data length u32, data.
			if len(it.data) < 11 {
				return it.fail("sub-entry header truncated")
			}
			compression := (it.data[0] >> 4) & 0x7
			records := binary.BigEndian.Uint16(it.data[1:])
			n := binary.BigEndian.Uint32(it.data[7:])
			if uint64(n) > uint64(len(it.data)-11) {
				return it.fail("sub-entry batch longer than the chunk data")
			}
			if compression != 0 {
				it.err = fmt.Errorf("%w (compression type %d, chunk %d)", ErrCompressed, compression, it.offset)
				return false
			}
			it.sub, it.subLeft = it.data[11:11+n:11+n], int(records)
			it.data = it.data[11+n:]
			continue
		default:
			return false
		}
		off := it.offset
		it.offset++
		if off < it.skipBelow {
			continue
		}
		it.msg, it.msgOffset = msg, off
		return true
	}
}

func (it *MessageIter) fail(what string) bool {
	it.err = fmt.Errorf("%w: %s at offset %d", ErrBadChunk, what, it.offset)
	return false
}

// Message returns the current record's bytes (valid during the handler).
func (it *MessageIter) Message() []byte { return it.msg }

// Offset returns the current record's offset in the stream.
func (it *MessageIter) Offset() uint64 { return it.msgOffset }

// Err returns the error that stopped the iteration, if any.
func (it *MessageIter) Err() error { return it.err }

// AMQP 1.0 encoding of a message with one data section.
const (
	amqpDescribed  = 0x00
	amqpSmallUlong = 0x53
	amqpDataCode   = 0x75
	amqpVbin8      = 0xa0
	amqpVbin32     = 0xb0
)

// EncodedSize returns the size of the AMQP 1.0 message AppendMessage
// writes for a body of n bytes.
func EncodedSize(n int) int {
	if n < 256 {
		return 3 + 2 + n
	}
	return 3 + 5 + n
}

// AppendMessage appends body as an AMQP 1.0 message of a single data
// section.
func AppendMessage(b, body []byte) []byte {
	b = appendMessageHeader(b, len(body))
	return append(b, body...)
}

func appendMessageHeader(b []byte, n int) []byte {
	b = append(b, amqpDescribed, amqpSmallUlong, amqpDataCode)
	if n < 256 {
		return append(b, amqpVbin8, byte(n))
	}
	b = append(b, amqpVbin32)
	return wire.AppendU32(b, uint32(n))
}

// DataBody returns the body of an AMQP 1.0 message that starts with a
// data section (as AppendMessage writes it), or false for anything else.
// Sections after the data section are ignored.
func DataBody(msg []byte) ([]byte, bool) {
	if len(msg) < 5 || msg[0] != amqpDescribed || msg[1] != amqpSmallUlong || msg[2] != amqpDataCode {
		return nil, false
	}
	switch msg[3] {
	case amqpVbin8:
		n := int(msg[4])
		if len(msg)-5 < n {
			return nil, false
		}
		return msg[5 : 5+n : 5+n], true
	case amqpVbin32:
		if len(msg) < 8 {
			return nil, false
		}
		n := binary.BigEndian.Uint32(msg[4:])
		if uint64(len(msg)-8) < uint64(n) {
			return nil, false
		}
		return msg[8 : 8+n : 8+n], true
	}
	return nil, false
}
