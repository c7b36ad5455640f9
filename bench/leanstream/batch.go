package leanstream

import "github.com/warren-mq/warren/streamproto/wire"

// Batch is the encoded messages of one Publish frame. Reset and reuse it:
// adding to a Batch allocates only when its buffer grows.
type Batch struct {
	buf []byte // count × (publishing id u64, entry size u32, message)
	n   int
}

// Reset empties the batch, keeping its buffer.
func (b *Batch) Reset() { b.buf, b.n = b.buf[:0], 0 }

// Len returns the number of messages in the batch.
func (b *Batch) Len() int { return b.n }

// Size returns the encoded size of the messages in bytes.
func (b *Batch) Size() int { return len(b.buf) }

// Add appends body as an AMQP 1.0 message (one data section) with the
// given publishing id.
func (b *Batch) Add(publishingID uint64, body []byte) {
	copy(b.Append(publishingID, len(body)), body)
}

// Append adds a message of an n-byte body with the given publishing id
// and returns the body for the caller to fill in. The slice is valid until
// the next call on b.
func (b *Batch) Append(publishingID uint64, n int) []byte {
	b.buf = wire.AppendU64(b.buf, publishingID)
	b.buf = wire.AppendU32(b.buf, uint32(EncodedSize(n)))
	b.buf = appendMessageHeader(b.buf, n)
	start := len(b.buf)
	b.buf = append(b.buf, make([]byte, n)...) // no allocation: append grows b.buf only
	b.n++
	return b.buf[start : start+n : start+n]
}

// AddRaw appends an already encoded message (normally AMQP 1.0) with the
// given publishing id.
func (b *Batch) AddRaw(publishingID uint64, msg []byte) {
	b.buf = wire.AppendU64(b.buf, publishingID)
	b.buf = wire.AppendU32(b.buf, uint32(len(msg)))
	b.buf = append(b.buf, msg...)
	b.n++
}
