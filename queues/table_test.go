package queues

import (
	"bytes"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
)

type namedTable map[string]any

func TestArgsRoundTrip(t *testing.T) {
	in := map[string]any{
		"b": int8(-1), "B": uint8(2), "s": int16(-3), "u": uint16(4), "I": int32(-5),
		"i": uint32(6), "l": int64(-7), "f": float32(1.5), "d": 2.25, "S": "str",
		"x": []byte{1, 2}, "t": true, "V": nil,
		"T": time.Unix(1700000000, 0).UTC(),
		"A": []any{int32(1), "two", map[string]any{"k": int64(3)}},
		"F": namedTable{"nested": int16(9)},
	}
	enc, err := encodeArgs(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeArgs(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := normalizeArgs(in)
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v\nwant %#v", out, want)
	}
	if _, ok := out["F"].(map[string]any); !ok {
		t.Fatalf("named table not normalised: %T", out["F"])
	}
	if got, _ := decodeArgs(nil); got != nil {
		t.Fatalf("empty decode = %v", got)
	}
}

// decimalArgs is the table whose encoding testdata/args-decimal-66935e1.hex
// holds: decimals at the top level, in a nested table and in an array.
// The file was written by encodeArgs at commit 66935e1, when the decimal
// was amqp/wire.Decimal, registered by the AMQP front end with
// gob.Register, as
//
//	encodeArgs(map[string]any{
//		"x-dec":    wire.Decimal{Scale: 2, Value: 12345},
//		"x-nested": wire.Table{"d": wire.Decimal{Scale: 0, Value: 1}},
//		"x-list":   []any{wire.Decimal{Scale: 9, Value: 4294967295}, "s"},
//		"x-int":    int32(7),
//	})
var decimalArgs = map[string]any{
	"x-dec":    amqptab.Decimal{Scale: 2, Value: 12345},
	"x-nested": map[string]any{"d": amqptab.Decimal{Scale: 0, Value: 1}},
	"x-list":   []any{amqptab.Decimal{Scale: 9, Value: 4294967295}, "s"},
	"x-int":    int32(7),
}

// Ensure a catalog written before the decimal moved to internal/amqptab
// still decodes, to the same values.
func TestArgsDecodeOldDecimal(t *testing.T) {
	raw, err := os.ReadFile("testdata/args-decimal-66935e1.hex")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(decimalGobName)) {
		t.Fatalf("fixture lacks the name %q", decimalGobName)
	}
	got, err := decodeArgs(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, decimalArgs) {
		t.Fatalf("got %#v\nwant %#v", got, decimalArgs)
	}
}

// Ensure encodeArgs writes the decimal under the old name, so that a
// catalog written now also decodes with the code of before the move.
func TestArgsDecimalGobName(t *testing.T) {
	enc, err := encodeArgs(map[string]any{"d": amqptab.Decimal{Scale: 1, Value: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(decimalGobName)) || bytes.Contains(enc, []byte("internal/amqptab")) {
		t.Fatalf("encoding does not name the decimal %q: %q", decimalGobName, enc)
	}
	got, err := decodeArgs(enc)
	if err != nil || !reflect.DeepEqual(got, map[string]any{"d": amqptab.Decimal{Scale: 1, Value: 5}}) {
		t.Fatalf("round trip: %#v, %v", got, err)
	}
}

// Ensure a durable queue declared with decimal arguments comes back with
// them after a restart, with nothing but queues registering the type.
func TestDecimalArgSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	args := map[string]any{
		"dec":    amqptab.Decimal{Scale: 3, Value: 1 << 31},
		"nested": amqptab.Table{"d": amqptab.Decimal{Scale: 1, Value: 2}},
	}
	declareWith(t, b, "dq", true, args)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	q, err := b.Queue("/", "dq")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.Def().Args, normalizeArgs(args); !reflect.DeepEqual(got, want) {
		t.Fatalf("args after restart: got %#v, want %#v", got, want)
	}
}
