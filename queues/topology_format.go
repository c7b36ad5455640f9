package queues

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/warren-mq/warren/internal/erlterm"
)

// AMQP field types as RabbitMQ names them, Erlang term formatting for
// reply texts, and the canonical encoding of binding identities.

// fieldType returns RabbitMQ's name of a field value's type
// (rabbit_binary_parser): the Go types of the AMQP front end's codec.
func fieldType(v any) string {
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
	if _, ok := asMap(v); ok {
		return "table"
	}
	if isDecimalField(v) {
		return "decimal"
	}
	return fmt.Sprintf("%T", v)
}

// isDecimalField recognises the front end's decimal type (a struct named
// Decimal with Scale and Value), which this package cannot import.
func isDecimalField(v any) bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Struct || t.Name() != "Decimal" {
		return false
	}
	_, s := t.FieldByName("Scale")
	_, u := t.FieldByName("Value")
	return s && u
}

// fieldClass is rabbit_misc:type_class: the integer types compare as one
// class, and so do the floats.
func fieldClass(t string) string {
	switch t {
	case "byte", "short", "signedint", "long", "decimal", "unsignedbyte", "unsignedshort", "unsignedint":
		return "int"
	case "float", "double":
		return "float"
	}
	return t
}

// fieldArgEqual is Erlang's == on two argument values of the same type class.
func fieldArgEqual(a, b any) bool {
	if x, ok := fieldFloat(a); ok {
		if y, ok := fieldFloat(b); ok {
			return x == y
		}
	}
	return fieldExactEqual(a, b)
}

// fieldArgText renders an argument as rabbit_misc:val/1 does in equivalence
// errors: "none" when absent, else "the value '…' of type '…'".
func fieldArgText(v any, present bool) string {
	if !present {
		return "none"
	}
	return fmt.Sprintf("the value '%s' of type '%s'", fieldBare(v), fieldType(v))
}

// fieldBare renders a value as rabbit_misc:val/1 does for a bare value
// (~ts for binaries, ~tp otherwise).
func fieldBare(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return termText(v)
}

// termAtom renders an atom as ~p does: quoted unless it is a plain one.
func termAtom(s string) string {
	plain := s != "" && s[0] >= 'a' && s[0] <= 'z'
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@'
	}
	if plain {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// termText renders a field value as Erlang's ~tp prints RabbitMQ's
// representation of it.
func termText(v any) string {
	switch x := v.(type) {
	case nil:
		return "undefined"
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return strconv.FormatInt(x.Unix(), 10) // AMQP timestamps are seconds
	case string:
		return termBinary(x)
	case []byte:
		return termBinary(string(x))
	case float32:
		return erlterm.Float(float64(x))
	case float64:
		return erlterm.Float(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = "{" + fieldType(e) + "," + termText(e) + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if i, ok := fieldInt(v); ok {
		if i.high {
			return strconv.FormatUint(uint64(i.v), 10)
		}
		return strconv.FormatInt(i.v, 10)
	}
	if m, ok := asMap(v); ok {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = "{" + termBinary(k) + "," + fieldType(m[k]) + "," + termText(m[k]) + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if isDecimalField(v) {
		rv := reflect.ValueOf(v)
		return fmt.Sprintf("{%v,%v}", rv.FieldByName("Scale"), rv.FieldByName("Value"))
	}
	return fmt.Sprint(v)
}

// termBinary renders a binary as ~tp does: <<"text">> when printable
// (<<"text"/utf8>> beyond ASCII), else its bytes.
func termBinary(s string) string {
	if s == "" {
		return "<<>>"
	}
	ascii, printable := true, utf8.ValidString(s)
	for _, r := range s {
		if r >= utf8.RuneSelf {
			ascii = false
		}
		if !unicode.IsPrint(r) && !strings.ContainsRune("\n\r\t\v\b\f\x1b", r) {
			printable = false
		}
	}
	if !printable {
		parts := make([]string, len(s))
		for i := 0; i < len(s); i++ {
			parts[i] = strconv.Itoa(int(s[i]))
		}
		return "<<" + strings.Join(parts, ",") + ">>"
	}
	q := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`,
		"\v", `\v`, "\b", `\b`, "\f", `\f`, "\x1b", `\e`).Replace(s)
	if ascii {
		return `<<"` + q + `">>`
	}
	return `<<"` + q + `"/utf8>>`
}

// bindingIdent is a binding's identity within its vhost: source,
// destination kind and name, key and arguments (typed, sorted by key),
// as RabbitMQ compares bindings. It is also the catalog key suffix.
func bindingIdent(def BindingDef) string {
	b := make([]byte, 0, 16+len(def.Source)+len(def.Dest)+len(def.Key))
	b = appendLP(b, def.Source)
	b = append(b, byte(def.DestKind))
	b = appendLP(b, def.Dest)
	b = appendLP(b, def.Key)
	b = appendCanonTable(b, def.Args)
	return string(b)
}

// appendLP appends s with a uvarint length prefix.
func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendCanonTable appends a table with its keys sorted, each value
// tagged with its AMQP type.
func appendCanonTable(b []byte, m map[string]any) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendLP(b, k)
		b = appendCanonValue(b, m[k])
	}
	return b
}

func appendCanonValue(b []byte, v any) []byte {
	b = appendLP(b, fieldType(v))
	switch x := v.(type) {
	case nil:
		return b
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case string:
		return appendLP(b, x)
	case []byte:
		return appendLP(b, string(x))
	case float32:
		return binary.BigEndian.AppendUint32(b, math.Float32bits(x))
	case float64:
		return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
	case []any:
		b = binary.AppendUvarint(b, uint64(len(x)))
		for _, e := range x {
			b = appendCanonValue(b, e)
		}
		return b
	}
	if i, ok := fieldInt(v); ok {
		return binary.BigEndian.AppendUint64(b, uint64(i.v))
	}
	if m, ok := asMap(v); ok {
		return appendCanonTable(b, m)
	}
	return appendLP(b, fmt.Sprintf("%#v", v))
}
