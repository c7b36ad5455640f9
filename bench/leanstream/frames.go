package leanstream

import (
	"encoding/binary"
	"fmt"
	"io"
)

// frameReader reads a connection's frames into one buffer and hands
// them out where they lie: each byte is copied once, by the read system
// call, except for a frame cut by the end of the buffer, whose start is
// moved to the front to be completed (at most one frame per buffer's
// worth of reads). A frame larger than the buffer grows it.
type frameReader struct {
	src  io.Reader
	buf  []byte
	r, w int // buf[r:w] is read and not yet handed out
}

func newFrameReader(src io.Reader, size int) *frameReader {
	return &frameReader{src: src, buf: make([]byte, size)}
}

// next returns the next frame after its size field (key, version and
// the rest), valid until the next call. It refuses frames of more than
// limit bytes and returns io.EOF at a frame boundary when src ends,
// io.ErrUnexpectedEOF within a frame.
func (f *frameReader) next(limit uint32) ([]byte, error) {
	if err := f.fill(4); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(f.buf[f.r:])
	if n > limit {
		return nil, fmt.Errorf("leanstream: frame of %d bytes exceeds the %d-byte read limit", n, limit)
	}
	if n < 4 {
		return nil, fmt.Errorf("leanstream: frame of %d bytes has no key and version", n)
	}
	end := 4 + int(n)
	if err := f.fill(end); err != nil {
		return nil, err
	}
	frame := f.buf[f.r+4 : f.r+end : f.r+end]
	f.r += end
	return frame, nil
}

// fill reads until buf[r:w] holds at least need bytes.
func (f *frameReader) fill(need int) error {
	if f.r == f.w {
		f.r, f.w = 0, 0
	}
	for f.w-f.r < need {
		if f.r+need > len(f.buf) {
			// The frame would run past the end: move its start to the
			// front, into a larger buffer if it does not fit at all.
			buf := f.buf
			if need > len(buf) {
				buf = make([]byte, max(need, 2*len(buf)))
			}
			f.w = copy(buf, f.buf[f.r:f.w])
			f.r, f.buf = 0, buf
		}
		k, err := f.src.Read(f.buf[f.w:])
		f.w += k
		if err != nil && f.w-f.r < need {
			if err == io.EOF && f.w > f.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
