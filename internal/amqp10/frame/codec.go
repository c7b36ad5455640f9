package frame

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/warren-mq/warren/internal/amqp10"
)

// Performatives are described lists whose fields have fixed AMQP types.
// dec reads them from a slice without allocating for scalar and binary
// fields (binary values alias the input), checking every constructor
// against the field's type; fields of type * or of compound types
// (fields, filter-set, unsettled) go through amqp10.DecodeBudget, which
// is bounded by the input's size and a budget of zero-width elements per
// performative. Errors are sticky and wrap ErrDecode.

// Constructor codes the performative codec reads and writes directly
// (core §1.6). These constants are part of the wire format.
const (
	cDescribed  = 0x00
	cNull       = 0x40
	cTrue       = 0x41
	cFalse      = 0x42
	cUint0      = 0x43
	cUlong0     = 0x44
	cList0      = 0x45
	cUbyte      = 0x50
	cSmallUint  = 0x52
	cSmallUlong = 0x53
	cBool       = 0x56
	cUshort     = 0x60
	cUint       = 0x70
	cUlong      = 0x80
	cVbin8      = 0xa0
	cStr8       = 0xa1
	cSym8       = 0xa3
	cVbin32     = 0xb0
	cStr32      = 0xb1
	cSym32      = 0xb3
	cList8      = 0xc0
	cMap8       = 0xc1
	cList32     = 0xd0
	cMap32      = 0xd1
	cArray8     = 0xe0
	cArray32    = 0xf0
)

// maxZeroWidthItems bounds the zero-width array elements (nulls, trues,
// empty lists: elements without bytes to check a count against) in all
// the values of one performative. Performatives have no use for many.
const maxZeroWidthItems = 1024

// dec reads described lists from b[:lim]. After an error every read
// returns zero values and err keeps the first error.
type dec struct {
	b   []byte
	off int
	lim int    // end of the innermost list being read
	zw  *int   // zero-width array elements left, shared by the values read
	typ string // the performative or type being decoded, for errors
	err error
}

func newDec(b []byte, typ string) dec {
	return dec{b: b, lim: len(b), typ: typ}
}

func (d *dec) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("amqp10/frame: %s at byte %d: %s: %w", d.typ, d.off, fmt.Sprintf(format, args...), ErrDecode)
	}
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > d.lim-d.off {
		d.failf("%d bytes needed, %d left", n, d.lim-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return p
}

func (d *dec) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *dec) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *dec) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// descriptor reads 0x00 and a descriptor: a ulong code or a symbol,
// which is mapped to its code (0 and the symbol when unknown).
func (d *dec) descriptor() (code uint64, sym string) {
	if d.u8() != cDescribed {
		d.failf("not a described value")
		return 0, ""
	}
	switch c := d.u8(); c {
	case cUlong0:
		return 0, ""
	case cSmallUlong:
		return uint64(d.u8()), ""
	case cUlong:
		return d.u64(), ""
	case cSym8, cSym32:
		p := d.take(d.size(c == cSym32))
		if code, ok := symbolCodes[string(p)]; ok {
			return code, ""
		}
		return 0, string(p)
	default:
		d.failf("descriptor constructor 0x%02x", c)
	}
	return 0, ""
}

// size reads a u8 or (wide) u32 size and checks it against the bytes
// left.
func (d *dec) size(wide bool) int {
	var n int
	if wide {
		n = int(d.u32())
	} else {
		n = int(d.u8())
	}
	if d.err == nil && n > d.lim-d.off {
		d.failf("size %d, %d bytes left", n, d.lim-d.off)
		return 0
	}
	return n
}

// list is a list being read: its items end at end; n items, next is i.
type list struct {
	n, i  int
	end   int
	outer int // the enclosing lim, restored by close
}

// list reads a list header (list0, list8, list32) and narrows lim to it.
func (d *dec) list() list {
	l := list{outer: d.lim}
	if d.err != nil {
		return l
	}
	switch c := d.u8(); c {
	case cList0:
		l.end = d.off
		d.lim = l.end
	case cList8, cList32:
		wide := c == cList32
		sz := d.size(wide)
		l.end = d.off + sz
		w := 1
		if wide {
			w = 4
		}
		if d.err == nil && sz < w {
			d.failf("list size %d has no room for its count", sz)
			return l
		}
		d.lim = l.end
		if wide {
			l.n = int(d.u32())
		} else {
			l.n = int(d.u8())
		}
		if d.err == nil && l.n > l.end-d.off {
			d.failf("list of %d items in %d bytes", l.n, l.end-d.off)
		}
	default:
		d.failf("constructor 0x%02x where a list is due", c)
	}
	return l
}

// close skips the list's items not read (fields a later version of the
// spec may add), checks that they end where the list does, and restores
// lim.
func (d *dec) close(l *list) {
	for d.err == nil && l.i < l.n {
		l.i++
		_, n, err := amqp10.DecodeBudget(d.b[d.off:d.lim], d.budget())
		if err != nil {
			d.failf("item %d: %v", l.i, err)
			break
		}
		d.off += n
	}
	if d.err == nil && d.off != l.end {
		d.failf("%d bytes after the last of %d items", l.end-d.off, l.n)
	}
	d.lim = l.outer
}

// next moves to the list's next field and says whether it is present
// (not past the end, not null); a null is consumed. A missing mandatory
// field is an error.
func (d *dec) next(l *list, field string, mandatory bool) bool {
	if d.err != nil {
		return false
	}
	present := false
	if l.i < l.n {
		l.i++
		if d.off >= d.lim {
			d.failf("field %s: no bytes left", field)
			return false
		}
		if d.b[d.off] == cNull {
			d.off++
		} else {
			present = true
		}
	}
	if !present && mandatory {
		d.failf("mandatory field %s is missing", field)
	}
	return present
}

func (d *dec) wrongType(field, want string, c byte) {
	d.failf("field %s: constructor 0x%02x where %s is due", field, c, want)
}

func (d *dec) uintOf(field string) uint32 {
	switch c := d.u8(); c {
	case cUint0:
		return 0
	case cSmallUint:
		return uint32(d.u8())
	case cUint:
		return d.u32()
	default:
		d.wrongType(field, "a uint", c)
	}
	return 0
}

// uint reads a uint field: def when absent.
func (d *dec) uint(l *list, field string, mandatory bool, def uint32) (uint32, bool) {
	if !d.next(l, field, mandatory) {
		return def, false
	}
	return d.uintOf(field), d.err == nil
}

func (d *dec) ulong(l *list, field string, mandatory bool) uint64 {
	if !d.next(l, field, mandatory) {
		return 0
	}
	switch c := d.u8(); c {
	case cUlong0:
		return 0
	case cSmallUlong:
		return uint64(d.u8())
	case cUlong:
		return d.u64()
	default:
		d.wrongType(field, "a ulong", c)
	}
	return 0
}

func (d *dec) ushort(l *list, field string, def uint16) (uint16, bool) {
	if !d.next(l, field, false) {
		return def, false
	}
	if c := d.u8(); c != cUshort {
		d.wrongType(field, "a ushort", c)
		return 0, false
	}
	return d.u16(), d.err == nil
}

func (d *dec) ubyte(l *list, field string, mandatory bool, def, maxv uint8) (uint8, bool) {
	if !d.next(l, field, mandatory) {
		return def, false
	}
	if c := d.u8(); c != cUbyte {
		d.wrongType(field, "a ubyte", c)
		return 0, false
	}
	v := d.u8()
	if d.err == nil && v > maxv {
		d.failf("field %s: %d is out of range (at most %d)", field, v, maxv)
	}
	return v, d.err == nil
}

func (d *dec) boolean(l *list, field string, mandatory bool) bool {
	if !d.next(l, field, mandatory) {
		return false
	}
	switch c := d.u8(); c {
	case cTrue:
		return true
	case cFalse:
		return false
	case cBool:
		switch d.u8() {
		case 0:
			return false
		case 1:
			return true
		}
		d.failf("field %s: boolean byte is neither 0 nor 1", field)
	default:
		d.wrongType(field, "a boolean", c)
	}
	return false
}

// binary reads a binary field, aliasing the input; nil when absent.
func (d *dec) binary(l *list, field string, mandatory bool) []byte {
	if !d.next(l, field, mandatory) {
		return nil
	}
	switch c := d.u8(); c {
	case cVbin8, cVbin32:
		return d.take(d.size(c == cVbin32))
	default:
		d.wrongType(field, "a binary", c)
	}
	return nil
}

func (d *dec) str(l *list, field string, mandatory bool) string {
	if !d.next(l, field, mandatory) {
		return ""
	}
	switch c := d.u8(); c {
	case cStr8, cStr32:
		p := d.take(d.size(c == cStr32))
		if d.err == nil && !utf8.Valid(p) {
			d.failf("field %s: string is not UTF-8", field)
		}
		return string(p)
	default:
		d.wrongType(field, "a string", c)
	}
	return ""
}

func (d *dec) symbol(l *list, field string, mandatory bool, def amqp10.Symbol) amqp10.Symbol {
	if !d.next(l, field, mandatory) {
		return def
	}
	switch c := d.u8(); c {
	case cSym8, cSym32:
		return amqp10.Symbol(d.take(d.size(c == cSym32)))
	default:
		d.wrongType(field, "a symbol", c)
	}
	return ""
}

// address reads a terminus address: a string, or a symbol as some
// clients send.
func (d *dec) address(l *list, field string) string {
	if !d.next(l, field, false) {
		return ""
	}
	switch c := d.u8(); c {
	case cStr8, cStr32:
		p := d.take(d.size(c == cStr32))
		if d.err == nil && !utf8.Valid(p) {
			d.failf("field %s: string is not UTF-8", field)
		}
		return string(p)
	case cSym8, cSym32:
		return string(d.take(d.size(c == cSym32)))
	default:
		d.wrongType(field, "an address string", c)
	}
	return ""
}

// symbols reads a multiple symbol field: one symbol or an array of them.
// The slice grows as symbols are read, and every one takes at least a
// byte, so a count claims no more than the input holds.
func (d *dec) symbols(l *list, field string, mandatory bool) []amqp10.Symbol {
	if !d.next(l, field, mandatory) {
		return nil
	}
	switch c := d.u8(); c {
	case cSym8, cSym32:
		return []amqp10.Symbol{amqp10.Symbol(d.take(d.size(c == cSym32)))}
	case cArray8, cArray32:
		wide := c == cArray32
		sz := d.size(wide)
		end, outer := d.off+sz, d.lim
		if d.err != nil {
			return nil
		}
		d.lim = end
		var n int
		if wide {
			n = int(d.u32())
		} else {
			n = int(d.u8())
		}
		ec := d.u8()
		if d.err != nil {
			return nil
		}
		if n > 0 && ec != cSym8 && ec != cSym32 {
			d.wrongType(field, "an array of symbols", ec)
			return nil
		}
		if n > d.lim-d.off {
			d.failf("field %s: array of %d symbols in %d bytes", field, n, d.lim-d.off)
			return nil
		}
		out := make([]amqp10.Symbol, 0, min(n, 16))
		for range n {
			out = append(out, amqp10.Symbol(d.take(d.size(ec == cSym32))))
			if d.err != nil {
				return nil
			}
		}
		if d.off != end {
			d.failf("field %s: %d bytes after the last symbol", field, end-d.off)
		}
		d.lim = outer
		return out
	default:
		d.wrongType(field, "a symbol or an array of symbols", c)
	}
	return nil
}

// budget returns the zero-width element budget, made on first use so
// that performatives without such values (a transfer) need not allocate
// it: the address of a field of d would move d to the heap.
func (d *dec) budget() *int {
	if d.zw == nil {
		n := maxZeroWidthItems
		d.zw = &n
	}
	return d.zw
}

// value reads any value with amqp10.DecodeBudget.
func (d *dec) value(field string) any {
	if d.err != nil {
		return nil
	}
	v, n, err := amqp10.DecodeBudget(d.b[d.off:d.lim], d.budget())
	if err != nil {
		d.failf("field %s: %v", field, err)
		return nil
	}
	d.off += n
	return v
}

// fields reads a map field (fields, filter-set, unsettled). With symKeys
// every key must be a symbol; with describedValues every value must be
// described or null (a filter-set).
func (d *dec) fields(l *list, field string, symKeys, describedValues bool) amqp10.Map {
	if !d.next(l, field, false) {
		return nil
	}
	if c := d.b[d.off]; c != cMap8 && c != cMap32 {
		d.wrongType(field, "a map", c)
		return nil
	}
	m, _ := d.value(field).(amqp10.Map)
	for _, e := range m {
		if _, ok := e.Key.(amqp10.Symbol); symKeys && !ok {
			d.failf("field %s: key of type %T, not a symbol", field, e.Key)
			return nil
		}
		if _, ok := e.Value.(amqp10.Described); describedValues && !ok && e.Value != nil {
			d.failf("field %s: filter of type %T, not described", field, e.Value)
			return nil
		}
	}
	if m == nil && d.err == nil {
		m = amqp10.Map{}
	}
	return m
}

// enc builds a described list, remembering where its last non-null field
// ended so that trailing nulls are dropped.
type enc struct {
	c     amqp10.Compound
	last  int // len(dst) after the last present field
	i     int // fields appended
	count int // fields up to the last present one
}

// beginList appends the descriptor code and starts its list.
func beginList(dst []byte, code uint64) ([]byte, enc) {
	dst = amqp10.AppendDescriptor(dst, code)
	dst, c := amqp10.BeginList(dst)
	return dst, enc{c: c, last: len(dst)}
}

// present records that a field was appended.
func (e *enc) present(dst []byte) []byte {
	e.i++
	e.count, e.last = e.i, len(dst)
	return dst
}

// null appends an absent field.
func (e *enc) null(dst []byte) []byte {
	e.i++
	return append(dst, cNull)
}

// end drops the trailing nulls and finishes the list.
func (e *enc) end(dst []byte) []byte { return e.c.End(dst[:e.last], e.count) }

func (e *enc) uint(dst []byte, v uint32, present bool) []byte {
	if !present {
		return e.null(dst)
	}
	return e.present(amqp10.AppendUint(dst, v))
}

func (e *enc) ulong(dst []byte, v uint64, present bool) []byte {
	if !present {
		return e.null(dst)
	}
	return e.present(amqp10.AppendUlong(dst, v))
}

func (e *enc) ushort(dst []byte, v uint16, present bool) []byte {
	if !present {
		return e.null(dst)
	}
	return e.present(amqp10.AppendUshort(dst, v))
}

func (e *enc) ubyte(dst []byte, v uint8, present bool) []byte {
	if !present {
		return e.null(dst)
	}
	return e.present(amqp10.AppendUbyte(dst, v))
}

// boolean appends v, or null for false (the default of every boolean
// field but the mandatory role, which always takes boolOf).
func (e *enc) boolean(dst []byte, v bool) []byte {
	if !v {
		return e.null(dst)
	}
	return e.present(amqp10.AppendBool(dst, true))
}

func (e *enc) binary(dst, v []byte) []byte {
	if v == nil {
		return e.null(dst)
	}
	return e.present(amqp10.AppendBinary(dst, v))
}

// str appends a string field; "" is null unless the field is
// mandatory.
func (e *enc) str(dst []byte, v string, mandatory bool) ([]byte, error) {
	if v == "" && !mandatory {
		return e.null(dst), nil
	}
	if !utf8.ValidString(v) || uint64(len(v)) > math.MaxUint32 {
		return dst, fmt.Errorf("amqp10/frame: string field is not UTF-8 or too long: %w", amqp10.ErrUnsupported)
	}
	return e.present(amqp10.AppendString(dst, v)), nil
}

func (e *enc) symbol(dst []byte, v amqp10.Symbol) []byte {
	if v == "" {
		return e.null(dst)
	}
	return e.present(amqp10.AppendSymbol(dst, string(v)))
}

// symbols appends a multiple symbol field: null when empty, a single
// symbol for one, else an array in its smallest form.
func (e *enc) symbols(dst []byte, v []amqp10.Symbol) []byte {
	switch len(v) {
	case 0:
		return e.null(dst)
	case 1:
		return e.present(amqp10.AppendSymbol(dst, string(v[0])))
	}
	return e.present(appendSymbolArray(dst, v))
}

func appendSymbolArray(dst []byte, v []amqp10.Symbol) []byte {
	wide := false
	size := 2 // count and constructor in the 8-bit form
	for _, s := range v {
		if len(s) > math.MaxUint8 {
			wide = true
		}
		size += 1 + len(s)
	}
	if !wide && size <= math.MaxUint8 && len(v) <= math.MaxUint8 {
		dst = append(dst, cArray8, byte(size), byte(len(v)), cSym8)
		for _, s := range v {
			dst = append(append(dst, byte(len(s))), s...)
		}
		return dst
	}
	size = 4 + 1
	for _, s := range v {
		size += 4 + len(s)
	}
	dst = binary.BigEndian.AppendUint32(append(dst, cArray32), uint32(size))
	dst = append(binary.BigEndian.AppendUint32(dst, uint32(len(v))), cSym32)
	for _, s := range v {
		dst = append(binary.BigEndian.AppendUint32(dst, uint32(len(s))), s...)
	}
	return dst
}

// value appends a map or any other value; nil is null.
func (e *enc) value(dst []byte, v any) ([]byte, error) {
	switch m := v.(type) {
	case nil:
		return e.null(dst), nil
	case amqp10.Map:
		if m == nil {
			return e.null(dst), nil
		}
	}
	dst, err := amqp10.AppendValue(dst, v)
	if err != nil {
		return dst, err
	}
	return e.present(dst), nil
}
