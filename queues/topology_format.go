package queues

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/warren-mq/warren/internal/erlterm"
	"github.com/warren-mq/warren/queues/internal/fieldval"
)

// AMQP field types as RabbitMQ names them and Erlang term formatting, for
// reply texts (package fieldval has the field values' semantics).

// fieldType returns RabbitMQ's name of a field value's type (see
// fieldval.Type).
func fieldType(v any) string { return fieldval.Type(v) }

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
	if x, ok := fieldval.Float(a); ok {
		if y, ok := fieldval.Float(b); ok {
			return x == y
		}
	}
	return fieldval.ExactEqual(a, b)
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
	if i, ok := fieldval.Int(v); ok {
		return string(i.AppendText(nil))
	}
	if m, ok := fieldval.AsMap(v); ok {
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
	if fieldval.IsDecimal(v) {
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
