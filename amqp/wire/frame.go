package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// Frame types and framing constants. These constants are part of the wire
// format and must not be changed.
const (
	FrameMethod    uint8 = 1    // class u16 + method u16 + arguments
	FrameHeader    uint8 = 2    // class u16 + weight u16 + body-size u64 + property flags u16 + property values
	FrameBody      uint8 = 3    // body bytes
	FrameHeartbeat uint8 = 8    // empty, channel 0
	FrameEnd       uint8 = 0xCE // the octet after every payload

	// FrameOverhead is the size of a frame around its payload: type u8,
	// channel u16, size u32 before it and the frame-end octet after it.
	FrameOverhead = 8

	// FrameMinSize is the largest frame (overhead included) a peer must
	// accept before tuning, and the smallest frame_max it may negotiate.
	// It is RabbitMQ's ?FRAME_MIN_SIZE, 8192; the 0-9-1 XML says 4096.
	FrameMinSize = 8192
)

// Compile-time checks of the frozen values.
const (
	_ = uint(FrameOverhead - 8)
	_ = uint(8 - FrameOverhead)
	_ = uint(FrameEnd - 0xCE)
	_ = uint(0xCE - FrameEnd)
)

// ProtocolHeader is what an AMQP 0-9-1 client sends first.
var ProtocolHeader = [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}

// Frame is one frame as read by FrameReader.
type Frame struct {
	Type    uint8  // FrameMethod, FrameHeader, FrameBody or FrameHeartbeat
	Channel uint16 // channel number
	Payload []byte // payload, without the frame-end octet
}

// largeChunk bounds how much a FrameReader reads (and allocates) ahead of
// the bytes that have arrived when a frame does not fit its buffer.
const largeChunk = 64 << 10

// FrameReader reads frames from a stream. Frames that fit its buffer
// (payload + 8 ≤ bufSize) are returned without copying; larger ones are
// read into a second buffer that grows as their bytes arrive, never
// beyond the checked frame size, and is reused. Errors are sticky: after
// one, every call returns it again.
type FrameReader struct {
	br  *bufio.Reader
	big []byte // reused payload buffer for frames larger than br's buffer
	err error  // sticky
}

// NewFrameReader returns a FrameReader reading r through a buffer of
// bufSize bytes (at least 16). A buffer of the negotiated frame_max makes
// every frame zero-copy.
func NewFrameReader(r io.Reader, bufSize int) *FrameReader {
	return &FrameReader{br: bufio.NewReaderSize(r, bufSize)}
}

func (fr *FrameReader) fail(err error) error {
	fr.err = err
	return err
}

// failPeek is fail for an error of a Peek, which took nothing from the
// buffer: a passed deadline is not sticky.
func (fr *FrameReader) failPeek(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return fr.fail(err)
}

// ReadProtocolHeader reads the 8-byte protocol header a client sends
// first. It does not check it; compare with ProtocolHeader.
func (fr *FrameReader) ReadProtocolHeader() ([8]byte, error) {
	var h [8]byte
	if fr.err != nil {
		return h, fr.err
	}
	if _, err := io.ReadFull(fr.br, h[:]); err != nil {
		return h, fr.fail(err)
	}
	return h, nil
}

// Buffered returns the bytes read from the stream but not yet taken, for
// a caller that hands the stream to another protocol's reader. They are
// valid until the next read.
func (fr *FrameReader) Buffered() []byte {
	b, _ := fr.br.Peek(fr.br.Buffered())
	return b
}

// ReadFrame reads one frame with a payload of at most max bytes (pass
// math.MaxUint32 for no limit). The payload aliases an internal buffer
// and is valid until the next call.
//
// A payload over max, an unknown frame type or a bad frame-end octet
// give a *FramingError with Code FrameError (501), checked before the
// payload is read. I/O errors pass through: io.EOF at a frame boundary,
// io.ErrUnexpectedEOF within a frame. ReadFrame checks framing only;
// which frames may arrive when (heartbeats on channel 0, a header after
// a content method) is the caller's to check.
//
// Errors are sticky, except a read deadline passing
// (os.ErrDeadlineExceeded) before the frame's bytes were taken from the
// buffer: the caller may move the deadline and read the frame again.
func (fr *FrameReader) ReadFrame(max uint32) (Frame, error) {
	if fr.err != nil {
		return Frame{}, fr.err
	}
	hdr, err := fr.br.Peek(7)
	if err != nil {
		if len(hdr) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, fr.failPeek(err)
	}
	typ := hdr[0]
	channel := binary.BigEndian.Uint16(hdr[1:])
	size := binary.BigEndian.Uint32(hdr[3:])
	// RabbitMQ's order: the size (before the payload is read), the
	// frame-end octet, then the type.
	if size > max {
		return Frame{}, fr.fail(&FramingError{Code: FrameError, Type: typ, Text: fmt.Sprintf("frame payload of %d bytes exceeds the limit of %d", size, max),
			Term: fmt.Sprintf("{frame_too_large,%d,%d}", size, int64(max)-FrameOverhead)})
	}
	if uint64(size) > math.MaxInt-FrameOverhead { // 32-bit platforms
		return Frame{}, fr.fail(&FramingError{Code: FrameError, Text: fmt.Sprintf("frame payload of %d bytes is too large for this platform", size)})
	}
	var raw []byte // payload and frame-end octet
	if uint64(size)+FrameOverhead <= uint64(fr.br.Size()) {
		total := int(size) + FrameOverhead
		buf, err := fr.br.Peek(total)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, fr.failPeek(err)
		}
		_, _ = fr.br.Discard(total) // cannot fail: the bytes are buffered
		raw = buf[7:total]
	} else {
		_, _ = fr.br.Discard(7) // cannot fail: Peek(7) succeeded
		raw, err = fr.readLarge(int(size) + 1)
		if err != nil {
			return Frame{}, fr.fail(err)
		}
	}
	if end := raw[size]; end != FrameEnd {
		return Frame{}, fr.fail(&FramingError{Code: FrameError, Type: typ, Payload: snippet(raw[:size]), Text: fmt.Sprintf("bad frame end octet 0x%02x (type %d, channel %d, size %d)", end, typ, channel, size),
			Term: fmt.Sprintf("{invalid_frame_end_marker,%d}", end)})
	}
	payload := raw[:size:size]
	switch typ {
	case FrameMethod, FrameHeader, FrameBody, FrameHeartbeat:
	default:
		return Frame{}, fr.fail(&FramingError{Code: FrameError, Type: typ, Payload: snippet(payload), Text: fmt.Sprintf("unknown frame type %d", typ), Term: "unknown_frame"})
	}
	return Frame{Type: typ, Channel: channel, Payload: payload}, nil
}

// snippet copies the first 17 bytes of a payload at most, enough for
// RabbitMQ's "first 16 octets" in a frame error's text.
func snippet(p []byte) []byte {
	return append([]byte(nil), p[:min(len(p), 17)]...)
}

// readLarge reads n bytes into fr.big, growing it as the bytes arrive.
func (fr *FrameReader) readLarge(n int) ([]byte, error) {
	buf := fr.big[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), largeChunk)
		buf = slices.Grow(buf, chunk)
		got, err := io.ReadFull(fr.br, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+got]
		if err != nil {
			fr.big = buf[:0]
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	fr.big = buf[:0]
	return buf, nil
}

// appendFrameHeader appends type, channel and size.
func appendFrameHeader(dst []byte, typ uint8, channel uint16, size uint32) []byte {
	return append(dst, typ, byte(channel>>8), byte(channel), byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
}

// AppendHeartbeat appends a heartbeat frame (channel 0, empty payload).
func AppendHeartbeat(dst []byte) []byte {
	return append(appendFrameHeader(dst, FrameHeartbeat, 0, 0), FrameEnd)
}

// AppendHeaderFrame appends a content header frame: class id, weight 0,
// body size and props, the raw property flags and values (as in
// ContentHeader.Props or from AppendProperties).
func AppendHeaderFrame(dst []byte, channel uint16, classID uint16, bodySize uint64, props []byte) []byte {
	dst = appendFrameHeader(dst, FrameHeader, channel, uint32(12+len(props)))
	dst = binary.BigEndian.AppendUint16(dst, classID)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, bodySize)
	dst = append(dst, props...)
	return append(dst, FrameEnd)
}

// AppendBodyFrames appends body as body frames of at most frameMax bytes
// each (payloads of at most frameMax-8), and nothing for an empty body.
// frameMax 0 means no limit; a frameMax below FrameMinSize is raised to
// it, as no peer may negotiate less.
func AppendBodyFrames(dst []byte, channel uint16, body []byte, frameMax uint32) []byte {
	maxPayload := uint64(math.MaxUint32)
	if frameMax != 0 {
		maxPayload = uint64(max(frameMax, FrameMinSize)) - FrameOverhead
	}
	for len(body) > 0 {
		n := len(body)
		if uint64(n) > maxPayload {
			n = int(maxPayload)
		}
		dst = appendFrameHeader(dst, FrameBody, channel, uint32(n))
		dst = append(dst, body[:n]...)
		dst = append(dst, FrameEnd)
		body = body[n:]
	}
	return dst
}
