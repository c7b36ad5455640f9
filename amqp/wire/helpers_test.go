package wire

import (
	"fmt"
	"reflect"
)

// allMethods returns a new zero value of every method NewMethod knows, in
// id order, found by trying every class and method id.
func allMethods() []Method {
	var ms []Method
	for c := range 256 {
		for m := range 256 {
			if x := NewMethod(uint16(c), uint16(m)); x != nil {
				ms = append(ms, x)
			}
		}
	}
	return ms
}

// fillMethod sets every field of the method struct m points to to a
// value derived from the field index and the pattern: non-zero integers
// of full width, bits on (pattern 0) or alternating (patterns 1 and 2),
// strings naming the field, a small table.
func fillMethod(m Method, pattern int) {
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		n := uint64(i + 1 + pattern)
		switch f.Kind() {
		case reflect.Uint8:
			f.SetUint(0x80 | n)
		case reflect.Uint16:
			f.SetUint(0x8000 | n<<8 | n)
		case reflect.Uint32:
			f.SetUint(0x80000000 | n<<16 | n)
		case reflect.Uint64:
			f.SetUint(0x8000000000000000 | n<<32 | n)
		case reflect.Bool:
			f.SetBool(pattern == 0 || (i+pattern)%2 == 0)
		case reflect.String:
			f.SetString(fmt.Sprintf("%s-%d-é", v.Type().Field(i).Name, pattern))
		case reflect.Map:
			f.Set(reflect.ValueOf(Table{
				"field":   int32(i),
				"pattern": int64(pattern),
				"nested":  Table{"s": "x"},
			}))
		default:
			panic("fillMethod: unexpected kind " + f.Kind().String())
		}
	}
}
