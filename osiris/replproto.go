package osiris

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/warren-mq/warren/segment"
)

// The replication protocol's frames (see the package documentation for
// the exchange). Every frame is length-prefixed and versioned; integers
// are big-endian:
//
//	+------------+---------+---------+---------------------+
//	| length u32 | version | type u8 | payload             |
//	|            | u8 (1)  |         | (length - 2 bytes)  |
//	+------------+---------+---------+---------------------+

// FrameType is a replication frame's type.
type FrameType uint8

// These constants are part of the wire format and must not be changed.
const (
	// FrameVersion is the version byte of every frame.
	FrameVersion = 1

	// FrameHello opens the exchange, replica to leader:
	// u8 member len + member + u64 first + u64 next + u32 n + n × (u64 epoch + u64 first chunk id).
	FrameHello FrameType = 1
	// FrameStart answers it, leader to replica: u8 flags (bit 0: reset) + u64 offset.
	FrameStart FrameType = 2
	// FrameChunks carries whole chunks as stored, leader to replica:
	// i64 commit chunk id + chunks.
	FrameChunks FrameType = 3
	// FrameCommit moves the commit offset, leader to replica: i64 commit chunk id.
	FrameCommit FrameType = 4
	// FrameAck acknowledges, replica to leader: i64 last chunk id written (-1: none).
	FrameAck FrameType = 5

	// frameHeaderSize is the length, version and type bytes.
	frameHeaderSize = 6
	// MaxFrameSize bounds a frame's length field: a Chunks frame with
	// one chunk of the largest size a header allows.
	MaxFrameSize = 2 + 8 + segment.HeaderSize + segment.MaxBloomSize + segment.MaxDataLen + segment.MaxTrailerLen
	// maxEpochs bounds the epochs a Hello frame may carry.
	maxEpochs = 1 << 20
	// frameGrowStep is how much a frame buffer grows per read, so that a
	// declared length costs memory only as its bytes arrive.
	frameGrowStep = 1 << 20
)

// Compile-time checks of the layout constants.
const (
	_ = uint(frameHeaderSize - 6)
	_ = uint(6 - frameHeaderSize)
	_ = uint(1<<32 - 1 - MaxFrameSize)
)

func (t FrameType) String() string {
	switch t {
	case FrameHello:
		return "hello"
	case FrameStart:
		return "start"
	case FrameChunks:
		return "chunks"
	case FrameCommit:
		return "commit"
	case FrameAck:
		return "ack"
	}
	return fmt.Sprintf("frame(%d)", uint8(t))
}

// ErrFrame marks a replication frame that does not parse.
var ErrFrame = errors.New("osiris: invalid replication frame")

// beginFrame appends a frame header with a reserved length; endFrame
// fills the length in.
func beginFrame(dst []byte, t FrameType) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, FrameVersion, byte(t))
	return dst, start
}

func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// Hello is the replica's opening frame.
type Hello struct {
	Member  string       // the replica's name, at most 255 bytes
	History EpochHistory // its log
}

// AppendTo appends h as a Hello frame.
func (h *Hello) AppendTo(dst []byte) []byte {
	dst, start := beginFrame(dst, FrameHello)
	m := h.Member[:min(len(h.Member), MaxReferenceLen)]
	dst = append(dst, byte(len(m)))
	dst = append(dst, m...)
	dst = binary.BigEndian.AppendUint64(dst, h.History.First)
	dst = binary.BigEndian.AppendUint64(dst, h.History.Next)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(h.History.Starts)))
	for _, e := range h.History.Starts {
		dst = binary.BigEndian.AppendUint64(dst, e.Epoch)
		dst = binary.BigEndian.AppendUint64(dst, e.First)
	}
	return endFrame(dst, start)
}

// ReadFrom decodes a Hello frame's payload.
func (h *Hello) ReadFrom(p []byte) error {
	r := wireReader{b: p}
	h.Member = string(r.bytes(int(r.u8())))
	h.History.First = r.u64()
	h.History.Next = r.u64()
	n := r.u32()
	if r.err == nil && (n > maxEpochs || uint64(n)*16 != uint64(len(r.b))) {
		return fmt.Errorf("hello: %d epochs in %d bytes: %w", n, len(r.b), ErrFrame)
	}
	h.History.Starts = nil
	if n > 0 && r.err == nil {
		h.History.Starts = make([]EpochStart, n)
		for i := range h.History.Starts {
			h.History.Starts[i] = EpochStart{Epoch: r.u64(), First: r.u64()}
		}
	}
	return r.done("hello")
}

// appendStart appends a Start frame.
func appendStart(dst []byte, offset uint64, reset bool) []byte {
	dst, start := beginFrame(dst, FrameStart)
	var flags byte
	if reset {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, offset)
	return endFrame(dst, start)
}

// parseStart decodes a Start frame's payload.
func parseStart(p []byte) (offset uint64, reset bool, err error) {
	r := wireReader{b: p}
	flags := r.u8()
	offset = r.u64()
	if r.err == nil && flags&^1 != 0 {
		return 0, false, fmt.Errorf("start: flags %#x: %w", flags, ErrFrame)
	}
	return offset, flags&1 != 0, r.done("start")
}

// appendChunksHeader appends the header of a Chunks frame whose chunks,
// n bytes, the caller writes after it.
func appendChunksHeader(dst []byte, commit int64, n int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(2+8+n))
	dst = append(dst, FrameVersion, byte(FrameChunks))
	return binary.BigEndian.AppendUint64(dst, uint64(commit))
}

// parseChunks decodes a Chunks frame's payload: the commit offset and the
// chunk bytes (checked by AppendChunks).
func parseChunks(p []byte) (commit int64, chunks []byte, err error) {
	r := wireReader{b: p}
	commit = int64(r.u64())
	if r.err != nil {
		return 0, nil, fmt.Errorf("chunks: %w", r.err)
	}
	if len(r.b) == 0 {
		return 0, nil, fmt.Errorf("chunks: no chunk: %w", ErrFrame)
	}
	return commit, r.b, nil
}

// appendOffsetFrame appends a Commit or Ack frame.
func appendOffsetFrame(dst []byte, t FrameType, chunk int64) []byte {
	dst, start := beginFrame(dst, t)
	dst = binary.BigEndian.AppendUint64(dst, uint64(chunk))
	return endFrame(dst, start)
}

// parseOffsetFrame decodes a Commit or Ack frame's payload.
func parseOffsetFrame(p []byte, t FrameType) (int64, error) {
	r := wireReader{b: p}
	c := int64(r.u64())
	if err := r.done(t.String()); err != nil {
		return 0, err
	}
	if c < -1 {
		return 0, fmt.Errorf("%s: chunk id %d: %w", t, c, ErrFrame)
	}
	return c, nil
}

// readFrame reads one frame into buf (grown as its bytes arrive, so that
// a declared length costs memory only once sent) and returns its type
// and payload, which alias the returned buffer.
func readFrame(br *bufio.Reader, buf []byte) (FrameType, []byte, []byte, error) {
	var hdr [frameHeaderSize]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 2 || n > MaxFrameSize {
		return 0, nil, buf, fmt.Errorf("frame length %d: %w", n, ErrFrame)
	}
	if hdr[4] != FrameVersion {
		return 0, nil, buf, fmt.Errorf("frame version %d: %w", hdr[4], ErrFrame)
	}
	t := FrameType(hdr[5])
	if t < FrameHello || t > FrameAck {
		return 0, nil, buf, fmt.Errorf("frame type %d: %w", hdr[5], ErrFrame)
	}
	size := int(n) - 2
	buf = buf[:0]
	for len(buf) < size {
		step := min(size-len(buf), frameGrowStep)
		buf = slices.Grow(buf, step)
		if _, err := io.ReadFull(br, buf[len(buf):len(buf)+step]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, buf, fmt.Errorf("%s frame of %d bytes: %w", t, size, err)
		}
		buf = buf[:len(buf)+step]
	}
	return t, buf, buf, nil
}

// wireReader decodes big-endian fields with a sticky error.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%d bytes wanted, %d left: %w", n, len(r.b), ErrFrame)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *wireReader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *wireReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *wireReader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (r *wireReader) bytes(n int) []byte { return r.take(n) }

// done returns the sticky error, or an error when bytes are left over.
func (r *wireReader) done(what string) error {
	if r.err != nil {
		return fmt.Errorf("%s: %w", what, r.err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%s: %d bytes left over: %w", what, len(r.b), ErrFrame)
	}
	return nil
}
