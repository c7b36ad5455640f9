package streamproto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errMalformed marks a frame whose fields do not parse.
var errMalformed = errors.New("streamproto: malformed frame")

// reader decodes fields from a frame body. Errors are sticky: after the
// first one every read returns a zero value and err keeps the error.
// Lengths are checked against the bytes left before anything is sliced or
// allocated.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %d bytes left: %w", what, len(r.b), errMalformed)
	}
	r.b = nil
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.fail("u8")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.fail("u16")
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.fail("u32")
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail("u64")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// stringBytes reads a string without copying; ok is false for null.
func (r *reader) stringBytes() ([]byte, bool) {
	n := int16(r.u16())
	if r.err != nil {
		return nil, false
	}
	if n == -1 {
		return nil, false
	}
	if n < 0 {
		r.fail("string length")
		return nil, false
	}
	if int(n) > len(r.b) {
		r.fail("string")
		return nil, false
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s, true
}

func (r *reader) string() string {
	s, _ := r.stringBytes()
	return string(s)
}

// bytes reads an i32-length byte field without copying (nil for -1).
func (r *reader) bytes() []byte {
	n := int32(r.u32())
	if r.err != nil || n == -1 {
		return nil
	}
	if n < 0 {
		r.fail("bytes length")
		return nil
	}
	if int64(n) > int64(len(r.b)) {
		r.fail("bytes")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// count reads an i32 element count and checks that count elements of at
// least minSize bytes each can be left.
func (r *reader) count(minSize int) int {
	n := int32(r.u32())
	if r.err != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(minSize) > int64(len(r.b)) {
		r.fail("array count")
		return 0
	}
	return int(n)
}

func (r *reader) stringMap() map[string]string {
	n := r.count(4)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n && r.err == nil; i++ {
		k := r.string()
		m[k] = r.string()
	}
	return m
}

func (r *reader) stringArray() []string {
	n := r.count(2)
	out := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.string())
	}
	return out
}

func (r *reader) empty() bool { return len(r.b) == 0 }

// Appenders.

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendString(b []byte, s string) []byte {
	b = appendU16(b, uint16(len(s)))
	return append(b, s...)
}

func appendStringMap(b []byte, keys []string, m map[string]string) []byte {
	b = appendU32(b, uint32(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// beginFrame appends a frame header with a placeholder size; endFrame
// fills the size in. start is len(b) before beginFrame.
func beginFrame(b []byte, key Key, version uint16) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendU16(b, uint16(key))
	b = appendU16(b, version)
	return b, start
}

func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// beginResponse starts a response frame to key with corr and code.
func beginResponse(b []byte, key Key, corr uint32, code Code) ([]byte, int) {
	b, start := beginFrame(b, key|responseBit, 1)
	b = appendU32(b, corr)
	b = appendU16(b, uint16(code))
	return b, start
}
