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
