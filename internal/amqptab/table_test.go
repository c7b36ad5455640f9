package amqptab

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/testutil"
)

// Each tag, as the one entry "k" of a table: the Go value, its encoding
// after the key, and the value it decodes to.
var tagCases = []struct {
	name  string
	value any
	enc   string // tag and value
}{
	{"t bool", true, `'t' 01`},
	{"t false", false, `'t' 00`},
	{"b int8", int8(-2), `'b' fe`},
	{"B uint8", uint8(200), `'B' c8`},
	{"s int16", int16(-2), `'s' fffe`},
	{"u uint16", uint16(65000), `'u' fde8`},
	{"I int32", int32(-2), `'I' fffffffe`},
	{"i uint32", uint32(4000000000), `'i' ee6b2800`},
	{"l int64", int64(-2), `'l' fffffffffffffffe`},
	{"f float32", float32(1.5), `'f' 3fc00000`},
	{"d float64", float64(-0.25), `'d' bfd0000000000000`},
	{"D decimal", Decimal{Scale: 2, Value: 12345}, `'D' 02 00003039`},
	{"S string", "héllo", `'S' 00000006 68 c3a9 'llo'`},
	{"x bytes", []byte{0, 1, 2}, `'x' 00000003 000102`},
	{"A array", []any{int32(1), "a"}, `'A' 0000000b 'I' 00000001 'S' 00000001 'a'`},
	{"F table", Table{"n": true}, `'F' 00000004 01 'n' 't' 01`},
	{"T timestamp", time.Unix(1700000000, 0).UTC(), `'T' 000000006553f100`},
	{"V void", nil, `'V'`},
}

// oneEntry wraps a tag+value encoding into the table {"k": value}.
func oneEntry(t *testing.T, enc string) []byte {
	body := append([]byte{1, 'k'}, testutil.HexBytes(t, enc)...)
	return append([]byte{0, 0, 0, byte(len(body))}, body...)
}

func TestTableTags(t *testing.T) {
	for _, tc := range tagCases {
		t.Run(tc.name, func(t *testing.T) {
			want := oneEntry(t, tc.enc)
			got, err := AppendTable(nil, Table{"k": tc.value})
			if err != nil {
				t.Fatal(err)
			}
			testutil.AssertBytes(t, got, want)
			tab, n, err := ReadTable(append(want, 0xEE)) // a byte after the table is not its
			if err != nil || n != len(want) {
				t.Fatalf("ReadTable: n = %d, err = %v", n, err)
			}
			if !reflect.DeepEqual(tab, Table{"k": tc.value}) {
				t.Fatalf("ReadTable = %#v, want %#v", tab, Table{"k": tc.value})
			}
			// ScanTable and DecodeValue see the same value.
			err = ScanTable(want, func(key []byte, tag byte, value []byte) error {
				v, err := DecodeValue(tag, value)
				if err != nil {
					return err
				}
				if string(key) != "k" || !reflect.DeepEqual(v, tc.value) {
					t.Errorf("ScanTable: %q %c = %#v", key, tag, v)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Values AppendTable converts, and the L tag it reads but never writes.
func TestTableConversions(t *testing.T) {
	for _, tc := range []struct {
		in   any
		enc  string
		back any
	}{
		{int(-3), `'l' fffffffffffffffd`, int64(-3)},
		{uint64(7), `'l' 0000000000000007`, int64(7)},
		{uint64(math.MaxInt64), `'l' 7fffffffffffffff`, int64(math.MaxInt64)},
		{map[string]any{"n": true}, `'F' 00000004 01 'n' 't' 01`, Table{"n": true}},
		{Table{}, `'F' 00000000`, Table(nil)},
		{[]any{}, `'A' 00000000`, []any(nil)},
		{time.Unix(-1, 0), `'T' ffffffffffffffff`, time.Unix(-1, 0).UTC()}, // wraps, bit-exact
	} {
		got, err := AppendTable(nil, Table{"k": tc.in})
		if err != nil {
			t.Fatalf("%T: %v", tc.in, err)
		}
		testutil.AssertBytes(t, got, oneEntry(t, tc.enc))
		tab, _, err := ReadTable(got)
		if err != nil || !reflect.DeepEqual(tab["k"], tc.back) {
			t.Errorf("%T: read back %#v, %v; want %#v", tc.in, tab["k"], err, tc.back)
		}
	}
	tab, _, err := ReadTable(oneEntry(t, `'L' fffffffffffffffe`))
	if err != nil || tab["k"] != int64(-2) {
		t.Fatalf("L: %#v, %v", tab, err)
	}
}

func TestAppendTableErrors(t *testing.T) {
	for _, v := range []any{uint64(math.MaxInt64 + 1), struct{}{}, uint(1), []string{"a"}, map[string]string{}} {
		dst := []byte("keep")
		got, err := AppendTable(dst, Table{"k": v})
		if !errors.Is(err, ErrFieldType) || string(got) != "keep" {
			t.Errorf("%T: %q, %v; want ErrFieldType and dst unchanged", v, got, err)
		}
	}
	_, err := AppendTable(nil, Table{strings.Repeat("k", 256): 1})
	if !errors.Is(err, ErrFieldType) {
		t.Errorf("256-byte key: %v", err)
	}
	// A nested error names the path.
	_, err = AppendTable(nil, Table{"outer": Table{"inner": []any{1, struct{}{}}}})
	if !errors.Is(err, ErrFieldType) || !strings.Contains(err.Error(), `"outer"`) || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("nested: %v", err)
	}
	// A cycle is stopped by the depth limit.
	cyc := []any{nil}
	cyc[0] = cyc
	if _, err := AppendTable(nil, Table{"c": cyc}); !errors.Is(err, ErrFieldType) {
		t.Errorf("cycle: %v", err)
	}
}

// Keys are written in ascending byte order, whatever the map order.
func TestAppendTableSorted(t *testing.T) {
	tab := Table{"b": int32(1), "a": int32(2), "c": int32(3), "B": int32(4), "": int32(5), "aa": int32(6)}
	for range 20 { // map iteration order varies between runs
		b, err := AppendTable(nil, tab)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		if err := ScanTable(b, func(k []byte, _ byte, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(keys, ","); got != ",B,a,aa,b,c" {
			t.Fatalf("keys %q", got)
		}
		if ok, err := TableSorted(b); !ok || err != nil {
			t.Fatalf("TableSorted = %v, %v", ok, err)
		}
	}
}

func TestTableSorted(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{``, true},
		{`01 'a' 'V'`, true},
		{`01 'a' 'V' 01 'b' 'V'`, true},
		{`01 'b' 'V' 01 'a' 'V'`, false},
		{`01 'a' 'V' 01 'a' 'V'`, false}, // duplicate
		{`01 'a' 'V' 02 'aa' 'V'`, true},
		{`01 'B' 'V' 01 'a' 'V'`, true}, // bytewise: 'B' < 'a'
	} {
		body := testutil.HexBytes(t, tc.body)
		b := append([]byte{0, 0, 0, byte(len(body))}, body...)
		if got, err := TableSorted(b); got != tc.want || err != nil {
			t.Errorf("%s: TableSorted = %v, %v; want %v", tc.body, got, err, tc.want)
		}
	}
	if _, err := TableSorted([]byte{0, 0, 0, 3, 1, 'a', 'Z'}); !errors.Is(err, ErrMalformed) {
		t.Errorf("malformed: %v", err)
	}
}

func TestReadTableMalformed(t *testing.T) {
	for _, tc := range []struct {
		name, in, why string
	}{
		{"short length", `0000 00`, "truncated length"},
		{"length past end", `00000005 01 'k' 'V'`, "exceeds"},
		{"truncated key", `00000003 05 'ab'`, "truncated key"},
		{"missing tag", `00000002 01 'k'`, "truncated key or tag"},
		{"unknown tag", `00000003 01 'k' 'Z'`, "unknown field tag 'Z'"},
		{"0-9-1 U tag", `00000005 01 'k' 'U' 0001`, "unknown field tag 'U'"},
		{"truncated int", `00000005 01 'k' 'I' 0001`, "truncated value"},
		{"string past table", `00000007 01 'k' 'S' 00000009`, "truncated value"},
		{"bad nested", `0000000a 01 'k' 'F' 00000003 01 'k' 'Z'`, "unknown field tag 'Z'"},
		{"bad array", `00000008 01 'k' 'A' 00000001 'Z'`, "unknown field tag 'Z'"},
	} {
		_, _, err := ReadTable(testutil.HexBytes(t, tc.in))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: err = %v, want ErrMalformed with %q", tc.name, err, tc.why)
		}
		// CheckTable validates deeply without decoding and agrees.
		if _, err := CheckTable(testutil.HexBytes(t, tc.in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: CheckTable err = %v", tc.name, err)
		}
	}
}

func TestReadTableDuplicateFirstWins(t *testing.T) {
	tab, _, err := ReadTable(testutil.HexBytes(t, `0000000b 01 'k' 'B' 01 01 'k' 'B' 02 01 'j' 'V'`))
	if err != nil || !reflect.DeepEqual(tab, Table{"k": uint8(1), "j": nil}) {
		t.Fatalf("%#v, %v", tab, err)
	}
}

func TestReadTableEmpty(t *testing.T) {
	tab, n, err := ReadTable([]byte{0, 0, 0, 0})
	if tab != nil || n != 4 || err != nil {
		t.Fatalf("%#v, %d, %v", tab, n, err)
	}
}

// Decoded strings and byte slices do not alias the input.
func TestReadTableCopies(t *testing.T) {
	b, _ := AppendTable(nil, Table{"s": "abc", "x": []byte("def")})
	tab, _, err := ReadTable(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if tab["s"] != "abc" || string(tab["x"].([]byte)) != "def" {
		t.Fatalf("aliased: %#v", tab)
	}
}

// nest returns a table of total nesting depth n, alternating tables and
// arrays.
func nest(n int) Table {
	if n == 1 {
		return Table{"leaf": true}
	}
	if n == 2 {
		return Table{"a": []any{true}}
	}
	return Table{"t": nest(n - 1)}
}

// nestBytes encodes tables nested n deep without the encoder's limit.
func nestBytes(n int) []byte {
	body := []byte{1, 'l', 't', 1}
	if n > 1 {
		body = append([]byte{1, 'n', 'F'}, nestBytes(n-1)...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestTableDepth(t *testing.T) {
	b, err := AppendTable(nil, nest(MaxDepth))
	if err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	if _, _, err := ReadTable(b); err != nil {
		t.Fatalf("read depth %d: %v", MaxDepth, err)
	}
	if _, err := AppendTable(nil, nest(MaxDepth+1)); !errors.Is(err, ErrFieldType) {
		t.Fatalf("write depth %d: %v", MaxDepth+1, err)
	}

	ok := nestBytes(MaxDepth)
	if _, _, err := ReadTable(ok); err != nil {
		t.Fatalf("read %d: %v", MaxDepth, err)
	}
	deep := nestBytes(MaxDepth + 1)
	if _, _, err := ReadTable(deep); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("read %d: %v", MaxDepth+1, err)
	}
	if _, err := CheckTable(deep); !errors.Is(err, ErrMalformed) {
		t.Fatalf("CheckTable depth %d: %v", MaxDepth+1, err)
	}
	if n, err := CheckTable(ok); err != nil || n != len(ok) {
		t.Fatalf("CheckTable depth %d: %d of %d bytes, %v", MaxDepth, n, len(ok), err)
	}
}

func TestScanTable(t *testing.T) {
	b, _ := AppendTable(nil, Table{"CC": []any{"rk1", "rk2"}, "n": int32(7)})
	var ccRaw []byte
	err := ScanTable(b, func(key []byte, tag byte, value []byte) error {
		if string(key) == "CC" {
			if tag != 'A' {
				t.Errorf("CC tag %c", tag)
			}
			ccRaw = value
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The raw A value carries its length and goes to ScanArray.
	testutil.AssertBytes(t, ccRaw, testutil.HexBytes(t, `00000010 'S' 00000003 'rk1' 'S' 00000003 'rk2'`))
	var keys []string
	if err := ScanArray(ccRaw, func(tag byte, value []byte) error {
		keys = append(keys, string(value[4:]))
		return nil
	}); err != nil || strings.Join(keys, ",") != "rk1,rk2" {
		t.Fatalf("ScanArray: %v, %v", keys, err)
	}

	stop := errors.New("stop")
	if err := ScanTable(b, func([]byte, byte, []byte) error { return stop }); err != stop {
		t.Fatalf("callback error: %v", err)
	}
	if err := ScanTable(append(b, 0), func([]byte, byte, []byte) error { return nil }); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := DecodeValue('S', []byte{0, 0, 0, 1, 'a', 'b'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("DecodeValue trailing: %v", err)
	}

	allocs := testing.AllocsPerRun(100, func() {
		_ = ScanTable(b, func([]byte, byte, []byte) error { return nil })
		_, _ = TableSorted(b)
		_, _ = CheckTable(b)
	})
	if allocs != 0 {
		t.Fatalf("ScanTable/TableSorted/CheckTable allocs = %v, want 0", allocs)
	}
}
