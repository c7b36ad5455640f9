package osiris

import (
	"fmt"

	"github.com/warren-mq/warren/segment"
)

// scanWindow is how much a scanner reads at a time.
const scanWindow = 64 << 10

// scanner walks the chunks of a segment in order, reading the file through
// a window so that small chunks cost one read per window, not per chunk.
type scanner struct {
	seg   *segment.Segment
	limit int64  // end of complete chunks
	pos   int64  // next chunk position
	buf   []byte // window contents
	start int64  // file position of buf[0]
}

func newScanner(seg *segment.Segment, limit int64) *scanner {
	return &scanner{seg: seg, limit: limit, pos: segment.FileHeaderSize}
}

// read returns n bytes at file position pos, valid until the next call.
func (sc *scanner) read(pos int64, n int) ([]byte, error) {
	if pos < sc.start || pos+int64(n) > sc.start+int64(len(sc.buf)) {
		size := max(n, scanWindow)
		if rem := sc.limit - pos; int64(size) > rem {
			size = int(rem)
		}
		if size < n {
			return nil, fmt.Errorf("osiris: segment %d: read %d bytes at %d past %d: %w", sc.seg.Base(), n, pos, sc.limit, segment.ErrCorrupt)
		}
		if cap(sc.buf) < size {
			sc.buf = make([]byte, size)
		}
		sc.buf = sc.buf[:size]
		if err := sc.seg.ReadAt(sc.buf, pos); err != nil {
			return nil, err
		}
		sc.start = pos
	}
	off := pos - sc.start
	return sc.buf[off : off+int64(n)], nil
}

// next returns the next chunk's header and position; ok is false at the end.
func (sc *scanner) next() (segment.Header, int64, bool, error) {
	if sc.pos >= sc.limit {
		return segment.Header{}, 0, false, nil
	}
	b, err := sc.read(sc.pos, segment.HeaderSize)
	if err != nil {
		return segment.Header{}, 0, false, err
	}
	h, err := segment.ParseHeader(b)
	if err != nil {
		return h, 0, false, fmt.Errorf("osiris: segment %d at %d: %w", sc.seg.Base(), sc.pos, err)
	}
	pos := sc.pos
	sc.pos += h.Size()
	return h, pos, true, nil
}
