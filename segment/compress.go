package segment

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decoders are pooled: building one allocates far more than a sub-batch.
var (
	gzipPool   sync.Pool // *gzip.Reader
	snappyPool = sync.Pool{New: func() any { return snappy.NewReader(nil) }}
	lz4Pool    = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstdPool   = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxSubBatchUncompressed+1))
		if err != nil {
			return err
		}
		return d
	}}
)

// Decompress appends the decompressed form of a sub-batch's data to dst. The
// result must be exactly uncompressed bytes long; more output is an error,
// so a small compressed batch cannot expand without bound.
func Decompress(dst []byte, c Compression, data []byte, uncompressed uint32) ([]byte, error) {
	if uncompressed > MaxSubBatchUncompressed {
		return dst, fmt.Errorf("decompress %v: %d bytes: %w", c, uncompressed, ErrInvalidEntry)
	}
	var r io.Reader
	src := bytes.NewReader(data)
	switch c {
	case CompressionNone:
		if uint32(len(data)) != uncompressed {
			return dst, fmt.Errorf("sub-batch: %d bytes, header says %d: %w", len(data), uncompressed, ErrInvalidEntry)
		}
		return append(dst, data...), nil
	case CompressionGzip:
		zr, _ := gzipPool.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(src)
		} else {
			err = zr.Reset(src)
		}
		if err != nil {
			return dst, fmt.Errorf("decompress gzip: %v: %w", err, ErrInvalidEntry)
		}
		defer gzipPool.Put(zr)
		r = zr
	case CompressionSnappy:
		sr := snappyPool.Get().(*snappy.Reader)
		sr.Reset(src)
		defer func() { sr.Reset(nil); snappyPool.Put(sr) }()
		r = sr
	case CompressionLZ4:
		lr := lz4Pool.Get().(*lz4.Reader)
		lr.Reset(src)
		defer func() { lr.Reset(nil); lz4Pool.Put(lr) }()
		r = lr
	case CompressionZstd:
		v := zstdPool.Get()
		zr, ok := v.(*zstd.Decoder)
		if !ok {
			return dst, fmt.Errorf("decompress zstd: %v", v)
		}
		defer zstdPool.Put(zr)
		if err := zr.Reset(src); err != nil {
			return dst, fmt.Errorf("decompress zstd: %v: %w", err, ErrInvalidEntry)
		}
		r = zr
	default:
		return dst, fmt.Errorf("decompress: %v: %w", c, ErrInvalidEntry)
	}
	start := len(dst)
	dst = grow(dst, int(uncompressed)+1)
	n, err := io.ReadFull(r, dst[start:start+int(uncompressed)])
	if err == nil {
		// All declared bytes are there. The stream must end now, after its
		// trailer: a decoder's own io.ErrUnexpectedEOF (a truncated
		// checksum or end mark) is an error, not the end.
		var m int
		m, err = io.ReadFull(r, dst[start+n:start+n+1])
		n += m
		dst = dst[:start+n]
		switch err {
		case nil:
			return dst, fmt.Errorf("decompress %v: more than %d bytes: %w", c, uncompressed, ErrInvalidEntry)
		case io.EOF:
			return dst, nil
		}
		return dst, fmt.Errorf("decompress %v: after %d bytes: %v: %w", c, n, err, ErrInvalidEntry)
	}
	dst = dst[:start+n]
	if err != io.ErrUnexpectedEOF && err != io.EOF {
		return dst, fmt.Errorf("decompress %v: %v: %w", c, err, ErrInvalidEntry)
	}
	return dst, fmt.Errorf("decompress %v: %d bytes, header says %d: %w", c, n, uncompressed, ErrInvalidEntry)
}

// grow extends b by n bytes of length, reusing capacity when it can.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*len(b)+n)
	copy(nb, b)
	return nb
}
