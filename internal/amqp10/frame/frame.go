package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// ProtocolID is the protocol id byte of an AMQP 1.0 protocol header.
type ProtocolID uint8

// Protocol ids (core §2.2, §5.1, §5.2). These constants are part of the
// wire format and must not be changed.
const (
	ProtocolAMQP ProtocolID = 0 // "AMQP 0 1 0 0": AMQP frames
	ProtocolTLS  ProtocolID = 2 // "AMQP 2 1 0 0": a TLS handshake follows
	ProtocolSASL ProtocolID = 3 // "AMQP 3 1 0 0": SASL frames
)

// ProtocolHeaderSize is the size of a protocol header.
const ProtocolHeaderSize = 8

// ProtocolHeader is the 8 bytes each peer sends first: "AMQP", then for
// AMQP 1.0 the protocol id, major 1, minor 0, revision 0. AMQP 0-9-1's
// header is "AMQP" 0 0 9 1.
type ProtocolHeader [ProtocolHeaderSize]byte

// ProtocolHeaderOf returns the AMQP 1.0 protocol header of id.
func ProtocolHeaderOf(id ProtocolID) ProtocolHeader {
	return ProtocolHeader{'A', 'M', 'Q', 'P', byte(id), 1, 0, 0}
}

// ParseProtocolHeader reads a protocol header from the first 8 bytes of
// b: any header that starts with "AMQP", whose version the caller then
// checks with Is10 or Is091. Fewer bytes or another start is an error
// wrapping ErrNotAMQP.
func ParseProtocolHeader(b []byte) (ProtocolHeader, error) {
	var h ProtocolHeader
	if len(b) < ProtocolHeaderSize || string(b[:4]) != "AMQP" {
		return h, fmt.Errorf("amqp10/frame: protocol header % x: %w", b[:min(len(b), ProtocolHeaderSize)], ErrNotAMQP)
	}
	copy(h[:], b)
	return h, nil
}

// ID returns the protocol id byte.
func (h ProtocolHeader) ID() ProtocolID { return ProtocolID(h[4]) }

// Is10 says whether h is AMQP 1.0 (version 1.0.0) with any protocol id.
func (h ProtocolHeader) Is10() bool { return h[5] == 1 && h[6] == 0 && h[7] == 0 }

// Is091 says whether h is AMQP 0-9-1's header ("AMQP" 0 0 9 1), or the
// "AMQP" 1 1 0 9 that RabbitMQ also takes as 0-9-1.
func (h ProtocolHeader) Is091() bool {
	return h[4] == 0 && h[5] == 0 && h[6] == 9 && h[7] == 1 ||
		h[4] == 1 && h[5] == 1 && h[6] == 0 && h[7] == 9
}

// String formats h as "AMQP 3 1 0 0".
func (h ProtocolHeader) String() string {
	return fmt.Sprintf("%s %d %d %d %d", h[:4], h[4], h[5], h[6], h[7])
}

// Type is a frame's type.
type Type uint8

// Frame types (core §2.3.1, §5.3.1). These constants are part of the
// wire format and must not be changed.
const (
	TypeAMQP Type = 0
	TypeSASL Type = 1
)

// HeaderSize is the size of a frame header; DataOffset counts 4-byte
// words, so 2 is a header without an extended header.
const (
	HeaderSize     = 8
	minDataOffset  = 2
	largeBodyChunk = 64 << 10 // reads of bodies above this grow the buffer as bytes arrive
)

// FrameHeader is a decoded frame header.
type FrameHeader struct {
	Size       uint32 // the whole frame, header included
	DataOffset uint8  // where the body starts, in 4-byte words (>= 2)
	Type       Type
	Channel    uint16 // AMQP frames; ignored in SASL frames
}

// ParseFrameHeader decodes a frame header from the first 8 bytes of b
// and checks it: a size of at least 8, a data offset of at least 2 that
// lies within the frame, a known type, and a size no larger than
// maxFrameSize (an error wrapping ErrFrameTooLarge, checked before
// anything reads the body).
func ParseFrameHeader(b []byte, maxFrameSize uint32) (FrameHeader, error) {
	if len(b) < HeaderSize {
		return FrameHeader{}, fmt.Errorf("amqp10/frame: frame header of %d bytes: %w", len(b), ErrFraming)
	}
	h := FrameHeader{
		Size:       binary.BigEndian.Uint32(b),
		DataOffset: b[4],
		Type:       Type(b[5]),
		Channel:    binary.BigEndian.Uint16(b[6:]),
	}
	switch {
	case h.Size < HeaderSize:
		return h, fmt.Errorf("amqp10/frame: frame size %d: %w", h.Size, ErrFraming)
	case h.DataOffset < minDataOffset || uint32(h.DataOffset)*4 > h.Size:
		return h, fmt.Errorf("amqp10/frame: data offset %d in a frame of %d bytes: %w", h.DataOffset, h.Size, ErrFraming)
	case h.Type != TypeAMQP && h.Type != TypeSASL:
		return h, fmt.Errorf("amqp10/frame: frame type %d: %w", h.Type, ErrFraming)
	case h.Size > maxFrameSize:
		return h, fmt.Errorf("amqp10/frame: frame of %d bytes, the maximum is %d: %w: %w", h.Size, maxFrameSize, ErrFrameTooLarge, ErrFraming)
	}
	return h, nil
}

// Frame is a frame read by a Reader.
type Frame struct {
	Type    Type
	Channel uint16
	// Body is the frame body (after the extended header): a performative
	// and, for a transfer, its payload. It is empty for an empty frame (a
	// heartbeat), and valid until the next read.
	Body []byte
}

// Empty says whether f is an empty frame, which peers send to keep a
// connection alive.
func (f Frame) Empty() bool { return len(f.Body) == 0 }

// Reader reads protocol headers and frames from an io.Reader, into a
// buffer it reuses. Pass it a bufio.Reader over a socket: it reads a
// frame's header and body with two reads. Errors are sticky: after one,
// every read returns it.
type Reader struct {
	r   io.Reader
	max uint32
	hdr [HeaderSize]byte
	buf []byte
	err error
}

// NewReader returns a Reader that refuses frames larger than
// maxFrameSize. Until open has been exchanged, a peer may send frames
// of MinMaxFrameSize bytes.
func NewReader(r io.Reader, maxFrameSize uint32) *Reader {
	return &Reader{r: r, max: maxFrameSize}
}

// SetMaxFrameSize changes the largest frame the Reader accepts (to the
// max-frame-size this side announced in open).
func (r *Reader) SetMaxFrameSize(n uint32) { r.max = n }

// ReadProtocolHeader reads a protocol header (any header that starts
// with "AMQP": the caller decides what to do with other versions).
func (r *Reader) ReadProtocolHeader() (ProtocolHeader, error) {
	if r.err != nil {
		return ProtocolHeader{}, r.err
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		r.err = err
		return ProtocolHeader{}, err
	}
	h, err := ParseProtocolHeader(r.hdr[:])
	if err != nil {
		r.err = err
	}
	return h, err
}

// ReadFrame reads the next frame. The body is valid until the next read.
// io.EOF means the stream ended between frames; a stream that ends
// within one is io.ErrUnexpectedEOF.
func (r *Reader) ReadFrame() (Frame, error) {
	if r.err != nil {
		return Frame{}, r.err
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		r.err = err
		return Frame{}, err
	}
	h, err := ParseFrameHeader(r.hdr[:], r.max)
	if err != nil {
		r.err = err
		return Frame{}, err
	}
	b, err := r.read(int(h.Size - HeaderSize))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.err = err
		return Frame{}, err
	}
	return Frame{Type: h.Type, Channel: h.Channel, Body: b[int(h.DataOffset)*4-HeaderSize:]}, nil
}

// read reads n bytes into the buffer. A buffer too small grows as bytes
// arrive (doubling from 64 KiB), so that a size claimed by a frame
// header costs memory only once its bytes are there.
func (r *Reader) read(n int) ([]byte, error) {
	if n <= cap(r.buf) {
		b := r.buf[:n]
		_, err := io.ReadFull(r.r, b)
		return b, err
	}
	b := r.buf[:0]
	for len(b) < n {
		step := min(n-len(b), max(len(b), largeBodyChunk))
		b = slices.Grow(b, step)
		m, err := io.ReadFull(r.r, b[len(b):len(b)+step])
		b = b[:len(b)+m]
		if err != nil {
			r.buf = b[:0]
			return nil, err
		}
	}
	r.buf = b
	return b, nil
}

// AppendProtocolHeader appends the protocol header of id.
func AppendProtocolHeader(dst []byte, id ProtocolID) []byte {
	h := ProtocolHeaderOf(id)
	return append(dst, h[:]...)
}

// AppendEmptyFrame appends an empty frame on channel 0: a heartbeat.
func AppendEmptyFrame(dst []byte) []byte {
	return append(dst, 0, 0, 0, HeaderSize, minDataOffset, byte(TypeAMQP), 0, 0)
}

// BeginFrame appends a frame header whose size EndFrame fills in; the
// caller appends the body between them. It returns where the frame
// starts.
func BeginFrame(dst []byte, typ Type, channel uint16) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, minDataOffset, byte(typ))
	return binary.BigEndian.AppendUint16(dst, channel), start
}

// EndFrame fills in the size of the frame that starts at start.
func EndFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// typeOf is the frame type a performative travels in.
func typeOf(p Performative) Type {
	if c := p.Descriptor(); c >= CodeSASLMechanisms && c <= CodeSASLOutcome {
		return TypeSASL
	}
	return TypeAMQP
}

// AppendFrame appends a frame carrying p on channel (an AMQP frame, or a
// SASL frame for the SASL performatives, whose channel is 0). On an
// error dst is returned unchanged. Being an interface, p escapes to the
// heap: where that allocation matters (a disposition or flow per
// message), append with BeginFrame, the performative's AppendTo and
// EndFrame, which allocate nothing.
func AppendFrame(dst []byte, channel uint16, p Performative) ([]byte, error) {
	dst, start := BeginFrame(dst, typeOf(p), channel)
	dst, err := p.AppendTo(dst)
	if err != nil {
		return dst[:start], err
	}
	return EndFrame(dst, start), nil
}

// AppendTransferFrame appends a frame carrying t and payload on channel.
// The caller keeps the frame within the peer's max-frame-size
// (TransferFrames splits a payload that does not fit).
func AppendTransferFrame(dst []byte, channel uint16, t *Transfer, payload []byte) ([]byte, error) {
	dst, start := BeginFrame(dst, TypeAMQP, channel)
	dst, err := t.AppendTo(dst)
	if err != nil {
		return dst[:start], err
	}
	return EndFrame(append(dst, payload...), start), nil
}

// AppendTransferFrames appends the frames of one delivery: t and as
// much of payload as fits in maxFrameSize, then continuation transfers
// (the handle, and the settled flag and state of t) with the rest, all
// but the last with More set. t.More is ignored. An error is returned
// when not even a continuation with one byte of payload fits.
func AppendTransferFrames(dst []byte, channel uint16, t *Transfer, payload []byte, maxFrameSize uint32) ([]byte, error) {
	first := *t
	first.More = false
	start := len(dst)
	for i := 0; ; i++ {
		var fs int
		dst, fs = BeginFrame(dst, TypeAMQP, channel)
		p := &first
		if i > 0 {
			p = &Transfer{Handle: t.Handle, Settled: t.Settled, State: t.State}
		}
		// Encode with More set to learn the size; drop it on the last.
		p.More = true
		var err error
		if dst, err = p.AppendTo(dst); err != nil {
			return dst[:start], err
		}
		room := int64(maxFrameSize) - int64(len(dst)-fs)
		if room < 0 || room == 0 && len(payload) > 0 {
			return dst[:start], fmt.Errorf("amqp10/frame: a transfer does not fit in frames of %d bytes: %w", maxFrameSize, ErrFrameTooLarge)
		}
		if int64(len(payload)) <= room {
			p.More = false
			dst = dst[:fs+HeaderSize]
			if dst, err = p.AppendTo(dst); err != nil {
				return dst[:start], err
			}
			return EndFrame(append(dst, payload...), fs), nil
		}
		dst = EndFrame(append(dst, payload[:room]...), fs)
		payload = payload[room:]
	}
}
