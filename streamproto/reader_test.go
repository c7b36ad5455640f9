package streamproto

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/warren-mq/warren/streamproto/wire"
)

// Ensure every reader method decodes its field big-endian and advances
// exactly past it.
func TestWireReaderFields(t *testing.T) {
	in := []byte{
		0x7f,       // u8 127
		0x12, 0x34, // u16 0x1234
		0xde, 0xad, 0xbe, 0xef, // u32 0xdeadbeef
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // u64 0x0102030405060708
		0x00, 0x03, 'a', 'b', 'c', // string length 3, "abc"
		0xff, 0xff, // string length -1: null
		0x00, 0x00, // string length 0: ""
		0x00, 0x00, 0x00, 0x02, 'h', 'i', // bytes length 2, "hi"
		0xff, 0xff, 0xff, 0xff, // bytes length -1: null
		0x00, 0x00, 0x00, 0x01, // map count 1
		0x00, 0x01, 'k', //   key "k"
		0x00, 0x01, 'v', //   value "v"
		0x00, 0x00, 0x00, 0x02, // array count 2
		0x00, 0x01, 'x', //   "x"
		0x00, 0x00, //   ""
	}
	r := reader{b: in}
	if got := r.u8(); got != 0x7f {
		t.Errorf("u8 = %#x, want 0x7f", got)
	}
	if got := r.u16(); got != 0x1234 {
		t.Errorf("u16 = %#x, want 0x1234", got)
	}
	if got := r.u32(); got != 0xdeadbeef {
		t.Errorf("u32 = %#x, want 0xdeadbeef", got)
	}
	if got := r.u64(); got != 0x0102030405060708 {
		t.Errorf("u64 = %#x, want 0x0102030405060708", got)
	}
	if got := r.string(); got != "abc" {
		t.Errorf("string = %q, want abc", got)
	}
	if s, ok := r.stringBytes(); s != nil || ok {
		t.Errorf("null string = %q, %v; want nil, false", s, ok)
	}
	if s, ok := r.stringBytes(); len(s) != 0 || !ok {
		t.Errorf("empty string = %q, %v; want \"\", true", s, ok)
	}
	if got := r.bytes(); string(got) != "hi" {
		t.Errorf("bytes = %q, want hi", got)
	}
	if got := r.bytes(); got != nil {
		t.Errorf("null bytes = %q, want nil", got)
	}
	if got := r.stringMap(); len(got) != 1 || got["k"] != "v" {
		t.Errorf("stringMap = %v, want map[k:v]", got)
	}
	if got := r.stringArray(); !slices.Equal(got, []string{"x", ""}) {
		t.Errorf("stringArray = %q, want [x \"\"]", got)
	}
	if r.err != nil {
		t.Fatalf("err = %v, want nil", r.err)
	}
	if !r.empty() {
		t.Errorf("%d bytes left, want 0", len(r.b))
	}
}

// Ensure string and bytes results do not copy and cannot be appended to
// over the bytes that follow them in the frame.
func TestWireReaderSlicesAreCapped(t *testing.T) {
	in := []byte{
		0x00, 0x01, 'a', // string "a"
		0x00, 0x00, 0x00, 0x01, 'b', // bytes "b"
		'z', // the next field
	}
	r := reader{b: in}
	s, _ := r.stringBytes()
	p := r.bytes()
	if cap(s) != 1 || cap(p) != 1 {
		t.Fatalf("cap(string) = %d, cap(bytes) = %d, want 1 and 1", cap(s), cap(p))
	}
	_ = append(s, 'X')
	_ = append(p, 'Y')
	if in[3] != 0x00 || in[8] != 'z' {
		t.Fatalf("appending to a result overwrote the frame: % x", in)
	}
	if &s[0] != &in[2] || &p[0] != &in[7] {
		t.Errorf("string or bytes result was copied; want it to alias the frame")
	}
}

// Ensure each fixed-size read past the end fails, returns zero, and leaves
// no bytes to read.
func TestWireReaderShort(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		read func(r *reader) uint64
	}{
		{"u8", nil, func(r *reader) uint64 { return uint64(r.u8()) }},
		{"u16", []byte{0x01}, func(r *reader) uint64 { return uint64(r.u16()) }},
		{"u32", []byte{0x01, 0x02, 0x03}, func(r *reader) uint64 { return uint64(r.u32()) }},
		{"u64", []byte{1, 2, 3, 4, 5, 6, 7}, func(r *reader) uint64 { return r.u64() }},
		{"string length", []byte{0x00}, func(r *reader) uint64 { return uint64(len(r.string())) }},
		{"bytes length", []byte{0x00, 0x00, 0x01}, func(r *reader) uint64 { return uint64(len(r.bytes())) }},
		{"count", []byte{0x00, 0x00}, func(r *reader) uint64 { return uint64(r.count(1)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reader{b: slices.Clone(tt.in)}
			if got := tt.read(&r); got != 0 {
				t.Errorf("got %d, want 0", got)
			}
			if !errors.Is(r.err, errMalformed) {
				t.Errorf("err = %v, want errMalformed", r.err)
			}
			if !r.empty() {
				t.Errorf("%d bytes left after the error, want 0", len(r.b))
			}
		})
	}
}

// Ensure the first error sticks: later reads return zero values, do not
// consume the bytes the failed read left behind, and keep the first error.
func TestWireReaderStickyError(t *testing.T) {
	in := []byte{
		0x00, 0x05, 'a', 'b', // string length 5, only 2 bytes follow
	}
	r := reader{b: in}
	if got := r.string(); got != "" {
		t.Fatalf("string = %q, want \"\"", got)
	}
	first := r.err
	if !errors.Is(first, errMalformed) {
		t.Fatalf("err = %v, want errMalformed", first)
	}
	if got := r.u8(); got != 0 {
		t.Errorf("u8 after error = %#x, want 0 (the bytes behind a failed read are not fields)", got)
	}
	if got := r.u16(); got != 0 {
		t.Errorf("u16 after error = %#x, want 0", got)
	}
	if got := r.u32(); got != 0 {
		t.Errorf("u32 after error = %#x, want 0", got)
	}
	if got := r.u64(); got != 0 {
		t.Errorf("u64 after error = %#x, want 0", got)
	}
	if s, ok := r.stringBytes(); s != nil || ok {
		t.Errorf("stringBytes after error = %q, %v; want nil, false", s, ok)
	}
	if got := r.bytes(); got != nil {
		t.Errorf("bytes after error = %q, want nil", got)
	}
	if got := r.count(1); got != 0 {
		t.Errorf("count after error = %d, want 0", got)
	}
	if got := r.stringMap(); got != nil {
		t.Errorf("stringMap after error = %v, want nil", got)
	}
	if got := r.stringArray(); len(got) != 0 {
		t.Errorf("stringArray after error = %q, want empty", got)
	}
	if r.err != first {
		t.Errorf("err = %v, want the first error %v", r.err, first)
	}
	// The error names the field and the bytes that were left.
	if want := "string: 2 bytes left: streamproto: malformed frame"; first.Error() != want {
		t.Errorf("err = %q, want %q", first.Error(), want)
	}
}

// Ensure lengths and counts are checked against the bytes left, and that
// negative lengths never slice backwards.
func TestWireReaderBounds(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		read    func(r *reader) int // length of what was read
		wantLen int                 // when there is no error
		wantErr bool
		left    int // bytes left when there is no error
	}{
		{"string past end", []byte{0x00, 0x03, 'a', 'b'}, readStringLen, 0, true, 0},
		{"string max length", []byte{0x7f, 0xff, 'a'}, readStringLen, 0, true, 0},
		{"string exact", []byte{0x00, 0x02, 'a', 'b'}, readStringLen, 2, false, 0},
		{"string null", []byte{0xff, 0xff, 'a'}, readStringLen, 0, false, 1},
		// RabbitMQ only defines -1; other negative lengths are malformed
		// (its parser does not match them: an unknown frame, 0x0d).
		{"string -2", []byte{0xff, 0xfe, 'a'}, readStringLen, 0, true, 0},
		{"string min", []byte{0x80, 0x00, 'a'}, readStringLen, 0, true, 0},
		{"bytes past end", []byte{0x00, 0x00, 0x00, 0x05, 1, 2, 3, 4}, readBytesLen, 0, true, 0},
		{"bytes max length", []byte{0x7f, 0xff, 0xff, 0xff, 1}, readBytesLen, 0, true, 0},
		{"bytes exact", []byte{0x00, 0x00, 0x00, 0x01, 9}, readBytesLen, 1, false, 0},
		{"bytes null", []byte{0xff, 0xff, 0xff, 0xff, 9}, readBytesLen, 0, false, 1},
		{"bytes -2", []byte{0xff, 0xff, 0xff, 0xfe, 9}, readBytesLen, 0, true, 0},
		{"bytes min", []byte{0x80, 0x00, 0x00, 0x00, 9}, readBytesLen, 0, true, 0},
		{"count negative", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, readCount4, 0, true, 0},
		{"count past end", []byte{0x00, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0}, readCount4, 0, true, 0},
		{"count fits", []byte{0x00, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 0}, readCount4, 2, false, 8},
		{"count max", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}, readCount4, 0, true, 0},
		{"map count past end", []byte{0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00}, readMapLen, 0, true, 0},
		{"map entry past end", []byte{0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 'k', 0x00, 0x05, 'v'}, readMapLen, 0, true, 0},
		{"array count past end", []byte{0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00}, readArrayLen, 0, true, 0},
		{"array negative", []byte{0x80, 0x00, 0x00, 0x00}, readArrayLen, 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reader{b: slices.Clone(tt.in)}
			n := tt.read(&r)
			if tt.wantErr {
				// What a failed map or array read returns is not
				// specified (callers check err); it just must not panic.
				if !errors.Is(r.err, errMalformed) {
					t.Fatalf("err = %v, want errMalformed", r.err)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("err = %v, want nil", r.err)
			}
			if n != tt.wantLen {
				t.Errorf("read %d, want %d", n, tt.wantLen)
			}
			if len(r.b) != tt.left {
				t.Errorf("%d bytes left, want %d", len(r.b), tt.left)
			}
		})
	}
}

func readStringLen(r *reader) int { s, _ := r.stringBytes(); return len(s) }
func readBytesLen(r *reader) int  { return len(r.bytes()) }
func readCount4(r *reader) int    { return r.count(4) }
func readMapLen(r *reader) int    { return len(r.stringMap()) }
func readArrayLen(r *reader) int  { return len(r.stringArray()) }

// Ensure a count or length far beyond the bytes left fails without
// allocating anything proportional to it.
func TestWireReaderHugeCountsDoNotAllocate(t *testing.T) {
	count := []byte{0x7f, 0xff, 0xff, 0xff, 0x00, 0x01, 'a', 0x00, 0x01, 'b'} // i32 2^31-1, then 6 bytes
	tests := []struct {
		name string
		in   []byte
		read func(r *reader)
	}{
		{"stringArray", count, func(r *reader) { r.stringArray() }},
		{"stringMap", count, func(r *reader) { r.stringMap() }},
		{"bytes", count, func(r *reader) { r.bytes() }},
		{"count", count, func(r *reader) { r.count(1) }},
		{"string", []byte{0x7f, 0xff, 'a', 'b'}, func(r *reader) { r.string() }}, // i16 32767, then 2 bytes
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const runs = 100
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				r := reader{b: tt.in}
				tt.read(&r)
				if r.err == nil {
					t.Fatal("no error for a length past the end")
				}
			}
			runtime.ReadMemStats(&after)
			// The error value costs a few hundred bytes; anything sized
			// from the declared length would cost kilobytes to gigabytes.
			if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 2048 {
				t.Errorf("%d bytes allocated per read, want at most 2048", perRun)
			}
		})
	}
}

// Ensure what the appenders write, the reader reads back.
func TestWireRoundTrip(t *testing.T) {
	m := map[string]string{"product": "Warren", "version": ServerVersion, "empty": ""}
	keys := []string{"empty", "product", "version"}
	var b []byte
	b = wire.AppendU16(b, 0xfffe)
	b = wire.AppendU32(b, 0x80000001)
	b = wire.AppendU64(b, 1<<63)
	b = wire.AppendString(b, "stream-é")
	b = wire.AppendStringMap(b, keys, m)
	r := reader{b: b}
	if got := r.u16(); got != 0xfffe {
		t.Errorf("u16 = %#x", got)
	}
	if got := r.u32(); got != 0x80000001 {
		t.Errorf("u32 = %#x", got)
	}
	if got := r.u64(); got != 1<<63 {
		t.Errorf("u64 = %#x", got)
	}
	if got := r.string(); got != "stream-é" {
		t.Errorf("string = %q", got)
	}
	got := r.stringMap()
	if len(got) != len(m) || got["product"] != "Warren" || got["version"] != ServerVersion || got["empty"] != "" {
		t.Errorf("stringMap = %v, want %v", got, m)
	}
	if r.err != nil || !r.empty() {
		t.Errorf("err = %v, %d bytes left", r.err, len(r.b))
	}
}
