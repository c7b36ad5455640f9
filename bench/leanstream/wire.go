package leanstream

import (
	"encoding/binary"
	"fmt"

	"github.com/warren-mq/warren/streamproto/wire"
)

// ResponseError is a response with a code other than OK.
type ResponseError struct {
	Op   string // the request, such as "create stream \"s\""
	Code wire.Code
}

func (e *ResponseError) Error() string { return "leanstream: " + e.Op + ": " + e.Code.Error() }

// Unwrap returns the Code, for errors.Is.
func (e *ResponseError) Unwrap() error { return e.Code }

// decoder reads protocol types from a frame body. The first read past the
// end sets err; later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("leanstream: truncated frame reading %s", what)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail(what)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8(what string) uint8 {
	if p := d.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if p := d.take(2, what); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// str reads a protocol string; the null string (-1) reads as "".
func (d *decoder) str(what string) string {
	n := int16(d.u16(what))
	if n <= 0 {
		return ""
	}
	return string(d.take(int(n), what))
}

// strings reads an array of strings.
func (d *decoder) strings(what string) []string {
	n := int32(d.u32(what))
	if n < 0 || int(n) > len(d.b)/2 {
		if n != 0 {
			d.fail(what)
		}
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.str(what))
	}
	return out
}

// strMap reads a protocol map.
func (d *decoder) strMap(what string) map[string]string {
	n := int32(d.u32(what))
	if n < 0 || int(n) > len(d.b)/4 {
		if n != 0 {
			d.fail(what)
		}
		return nil
	}
	out := make(map[string]string, n)
	for range n {
		k := d.str(what)
		out[k] = d.str(what)
	}
	return out
}
