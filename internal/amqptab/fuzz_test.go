package amqptab

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// Crashers found by these fuzzers live in testdata/fuzz/<Fuzz...>/ and
// run as ordinary test cases with `go test`.

// FuzzReadTable checks that ReadTable, ScanTable and CheckTable agree on
// what is a table, that errors wrap ErrMalformed, and that what decodes
// re-encodes sorted and stably.
func FuzzReadTable(f *testing.F) {
	for _, tc := range tagCases {
		b, _ := AppendTable(nil, Table{"k": tc.value, "z": []any{tc.value}})
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 13, 1, 'k', 'L', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 1, 'j', 'V', 0})
	f.Add(nestBytes(MaxDepth + 1))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 6, 1, 'k', 'S', 0, 0, 0})
	f.Add([]byte{0, 0, 0, 9, 1, 'a', 'A', 0, 0, 0, 2, 'V', 'V'})
	f.Fuzz(func(t *testing.T, b []byte) {
		t1, n, err := ReadTable(b)
		scanErr := ScanTable(b[:min(n, len(b))], func([]byte, byte, []byte) error { return nil })
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if scanErr != nil {
			t.Fatalf("ReadTable accepts what ScanTable rejects: %v", scanErr)
		}
		if n2, err := CheckTable(b); err != nil || n2 != n {
			t.Fatalf("ReadTable accepts %d bytes, CheckTable %d: %v", n, n2, err)
		}
		b2, err := AppendTable(nil, t1)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if ok, err := TableSorted(b2); !ok || err != nil {
			t.Fatalf("re-encoded table not sorted: %v", err)
		}
		t2, n2, err := ReadTable(b2)
		if err != nil || n2 != len(b2) {
			t.Fatalf("re-decode: %d, %v", n2, err)
		}
		b3, _ := AppendTable(nil, t2)
		if !bytes.Equal(b2, b3) {
			t.Fatalf("encoding not stable:\n%x\n%x", b2, b3)
		}
		if !reflect.DeepEqual(t1, t2) && !hasNaN(t1) {
			t.Fatalf("decode → encode → decode differs:\n%#v\n%#v", t1, t2)
		}
	})
}

func hasNaN(v any) bool {
	switch v := v.(type) {
	case float32:
		return v != v
	case float64:
		return v != v
	case Table:
		for _, x := range v {
			if hasNaN(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasNaN(x) {
				return true
			}
		}
	}
	return false
}
