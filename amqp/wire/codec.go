package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/warren-mq/warren/internal/amqptab"
)

// MaxShortstr is the longest shortstr: its length is one octet.
const MaxShortstr = amqptab.MaxShortstr

// argReader is the bounds-checked reader behind the generated ReadArgs
// methods. Its error is sticky: after the first failure every read
// returns a zero value and finish reports that first failure. It records
// the failing field by name so that errors say where decoding stopped,
// and allocates nothing unless decoding fails (or a string changes).
type argReader struct {
	b     []byte
	off   int
	field string // XML name of the field that failed
	why   string // what was wrong with it (primitive fields)
	err   error  // what was wrong with it (tables)
}

// fail records the first failure and stops further reads.
func (r *argReader) fail(field, why string) {
	if r.why == "" && r.err == nil {
		r.field, r.why = field, why
	}
	r.b, r.off = nil, 0
}

func (r *argReader) take(n int, field string) []byte {
	if len(r.b)-r.off < n {
		r.fail(field, "truncated")
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

func (r *argReader) octet(field string) uint8 {
	if r.off < len(r.b) {
		v := r.b[r.off]
		r.off++
		return v
	}
	r.fail(field, "truncated")
	return 0
}

func (r *argReader) short(field string) uint16 {
	if v := r.take(2, field); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *argReader) long(field string) uint32 {
	if v := r.take(4, field); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *argReader) longlong(field string) uint64 {
	if v := r.take(8, field); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *argReader) shortstrBytes(field string) []byte {
	n := int(r.octet(field))
	return r.take(n, field)
}

// shortstr returns the next shortstr, reusing old when it holds the same
// bytes (so a reused struct decodes a repeated value without allocating).
func (r *argReader) shortstr(old, field string) string {
	b := r.shortstrBytes(field)
	if string(b) == old {
		return old
	}
	return string(b)
}

// shortstrUTF8 is shortstr for fields RabbitMQ checks for UTF-8.
func (r *argReader) shortstrUTF8(old, field string) string {
	b := r.shortstrBytes(field)
	if !utf8.Valid(b) {
		r.fail(field, "malformed UTF-8 in shortstr")
		return ""
	}
	if string(b) == old {
		return old
	}
	return string(b)
}

func (r *argReader) longstr(old, field string) string {
	n := r.long(field)
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail(field, "truncated longstr")
		return ""
	}
	b := r.take(int(n), field)
	if string(b) == old {
		return old
	}
	return string(b)
}

func (r *argReader) table(field string) Table {
	if r.b == nil {
		r.fail(field, "truncated")
		return nil
	}
	t, n, err := amqptab.ReadTable(r.b[r.off:])
	if err != nil {
		if r.why == "" && r.err == nil {
			r.field, r.err = field, err
		}
		r.b, r.off = nil, 0
		return nil
	}
	r.off += n
	return t
}

// finish returns the first failure, or an error if bytes remain.
func (r *argReader) finish(method string) error {
	switch {
	case r.err != nil:
		return fmt.Errorf("amqp/wire: decode %s field %s: %w", method, r.field, r.err)
	case r.why != "":
		return fmt.Errorf("amqp/wire: decode %s field %s: %s: %w", method, r.field, r.why, ErrMalformed)
	case r.off != len(r.b):
		return fmt.Errorf("amqp/wire: decode %s: %d trailing bytes: %w", method, len(r.b)-r.off, ErrMalformed)
	}
	return nil
}

// appendShortstr appends s as a shortstr, truncated by
// amqptab.ClampShortstr if it is longer than 255 bytes.
func appendShortstr(dst []byte, s string) []byte {
	s = amqptab.ClampShortstr(s)
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// appendLongstr appends s as a longstr, truncated to math.MaxUint32 bytes.
func appendLongstr(dst []byte, s string) []byte {
	if uint64(len(s)) > math.MaxUint32 {
		s = s[:math.MaxUint32]
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// appendTableArg appends a method's table argument. It cannot fail: see
// amqptab.AppendTableLossy.
func appendTableArg(dst []byte, t Table) []byte { return amqptab.AppendTableLossy(dst, t) }
