// Package fieldval is what the broker model knows about AMQP field values
// (the values of argument tables and message headers) beyond their codec:
// the type names RabbitMQ prints, the equality Erlang's =:= gives them,
// their integers of any width, and a canonical encoding that identifies a
// table by its content. The routing index (queues/route) and the rest of
// the model (queues) both need these, so they live below both.
//
// Values have the Go types of the AMQP front end's table codec: bool,
// int8 … int64, uint8 … uint32, float32, float64, string, []byte, []any,
// map[string]any (or a named map type of it), time.Time, nil, and the
// front end's decimal (a struct named Decimal with Scale and Value, which
// this package recognises by shape since it cannot import the front end).
// int, uint and uint64, which tables built in Go code hold, are integers
// too.
//
// The canonical encoding (AppendValue, AppendTable, AppendString) is on
// disk: a binding's identity, and so its catalog key, is built from it.
// Do not change it.
//
//	string   uvarint length, bytes
//	value    type name (a string, as Type gives it), then by type:
//	           void: nothing; bool: one byte 0 or 1;
//	           longstr, binary: a string;
//	           float, double: the IEEE bits, big-endian u32 or u64;
//	           array: uvarint count, values;
//	           integers and timestamp: u64 big-endian (a timestamp's seconds);
//	           table: a table;
//	           anything else: a string of Go's %#v
//	table    uvarint count, then per key in sorted order: key (a string), value
package fieldval

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
)

// Type returns RabbitMQ's name of a field value's type
// (rabbit_binary_parser): the Go types of the AMQP front end's codec.
func Type(v any) string {
	switch v.(type) {
	case nil:
		return "void"
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int, uint, uint64: // the codec writes int and uint64 as 'l'
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case []any:
		return "array"
	case time.Time:
		return "timestamp"
	}
	if _, ok := AsMap(v); ok {
		return "table"
	}
	if IsDecimal(v) {
		return "decimal"
	}
	return fmt.Sprintf("%T", v)
}

// IsDecimal recognises the front end's decimal type (a struct named
// Decimal with Scale and Value), which this package cannot import.
func IsDecimal(v any) bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Struct || t.Name() != "Decimal" {
		return false
	}
	_, s := t.FieldByName("Scale")
	_, u := t.FieldByName("Value")
	return s && u
}

var mapType = reflect.TypeOf(map[string]any(nil))

// AsMap converts a named map[string]any type to a plain map.
func AsMap(v any) (map[string]any, bool) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Map || !rv.Type().ConvertibleTo(mapType) {
		return nil, false
	}
	return rv.Convert(mapType).Interface().(map[string]any), true
}

// Integer is an AMQP integer of any width (a uint64 above MaxInt64 kept
// apart from the negative int64 with the same bits).
type Integer struct {
	v    int64
	high bool // v is a uint64 above math.MaxInt64, bits in v
}

// Int returns an integer field's value; a timestamp is its seconds.
func Int(v any) (Integer, bool) {
	switch x := v.(type) {
	case int8:
		return Integer{v: int64(x)}, true
	case uint8:
		return Integer{v: int64(x)}, true
	case int16:
		return Integer{v: int64(x)}, true
	case uint16:
		return Integer{v: int64(x)}, true
	case int32:
		return Integer{v: int64(x)}, true
	case uint32:
		return Integer{v: int64(x)}, true
	case int64:
		return Integer{v: x}, true
	case int:
		return Integer{v: int64(x)}, true
	case uint:
		return Integer{v: int64(x), high: uint64(x) > math.MaxInt64}, true
	case uint64:
		return Integer{v: int64(x), high: x > math.MaxInt64}, true
	case time.Time:
		return Integer{v: x.Unix()}, true
	}
	return Integer{}, false
}

// AppendText appends i in decimal.
func (i Integer) AppendText(b []byte) []byte {
	if i.high {
		return strconv.AppendUint(b, uint64(i.v), 10)
	}
	return strconv.AppendInt(b, i.v, 10)
}

// Float returns a float field's value.
func Float(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// ExactEqual is Erlang's =:= on the values of two AMQP fields, their
// types left out: integers of any width are equal when their values are,
// an integer never equals a float, a longstr and a byte array compare by
// bytes; the elements of arrays and tables compare with their types
// (TypedEqual).
func ExactEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case []byte:
			return x == string(y)
		}
		return false
	case []byte:
		switch y := b.(type) {
		case string:
			return string(x) == y
		case []byte:
			return string(x) == string(y)
		}
		return false
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case float32:
		y, ok := Float(b)
		return ok && math.Float64bits(float64(x)) == math.Float64bits(y)
	case float64:
		y, ok := Float(b)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !TypedEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if x, ok := Int(a); ok {
		y, ok := Int(b)
		return ok && x == y
	}
	if x, ok := AsMap(a); ok {
		y, ok := AsMap(b)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !TypedEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// TypedEqual compares two AMQP fields with their types, as the elements
// of arrays and tables are compared.
func TypedEqual(a, b any) bool {
	return Type(a) == Type(b) && ExactEqual(a, b)
}

// AppendString appends s with a uvarint length prefix.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendTable appends a table with its keys sorted, each value tagged
// with its AMQP type.
func AppendTable(b []byte, m map[string]any) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = AppendString(b, k)
		b = AppendValue(b, m[k])
	}
	return b
}

// AppendValue appends a value tagged with its AMQP type.
func AppendValue(b []byte, v any) []byte {
	b = AppendString(b, Type(v))
	switch x := v.(type) {
	case nil:
		return b
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case string:
		return AppendString(b, x)
	case []byte:
		return AppendString(b, string(x))
	case float32:
		return binary.BigEndian.AppendUint32(b, math.Float32bits(x))
	case float64:
		return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
	case []any:
		b = binary.AppendUvarint(b, uint64(len(x)))
		for _, e := range x {
			b = AppendValue(b, e)
		}
		return b
	}
	if i, ok := Int(v); ok {
		return binary.BigEndian.AppendUint64(b, uint64(i.v))
	}
	if m, ok := AsMap(v); ok {
		return AppendTable(b, m)
	}
	return AppendString(b, fmt.Sprintf("%#v", v))
}

// ParseMaxAge parses RabbitMQ's max-age form, of the x-max-age argument
// and the max-age policy key: a positive integer and a unit, Y (365 days),
// M (30 days), D, h, m or s. It reports false for anything else, and for
// an age that does not fit a time.Duration.
func ParseMaxAge(s string) (time.Duration, bool) {
	if len(s) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'Y':
		unit = 365 * 24 * time.Hour
	case 'M':
		unit = 30 * 24 * time.Hour
	case 'D':
		unit = 24 * time.Hour
	case 'h':
		unit = time.Hour
	case 'm':
		unit = time.Minute
	case 's':
		unit = time.Second
	default:
		return 0, false
	}
	if n > int64(1<<63-1)/int64(unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}
