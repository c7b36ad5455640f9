package definitions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
)

// The values of a definitions document that are more than one JSON type:
// tags (an array or a comma-separated string), limits (an object or a
// list of pairs) and arguments (AMQP field tables as JSON objects).

// Tags are user or virtual host tags.
type Tags []string

// UnmarshalJSON takes an array of strings or a comma-separated string
// ("a, b"), as RabbitMQ's tag parsers do; null is no tags given.
func (t *Tags) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = splitTags(s)
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("tags must be an array of strings or a comma-separated string, not %s", jsonKind(b))
	}
	out := Tags{}
	for _, tag := range list {
		if tag = strings.TrimSpace(tag); tag != "" {
			out = append(out, tag)
		}
	}
	*t = out
	return nil
}

func splitTags(s string) Tags {
	out := Tags{}
	for tag := range strings.SplitSeq(s, ",") {
		if tag = strings.TrimSpace(tag); tag != "" {
			out = append(out, tag)
		}
	}
	return out
}

// Limits are user or virtual host limits: integers by name (a negative
// value is no limit).
type Limits map[string]int64

// UnmarshalJSON takes an object of integers, or a list of [name, value]
// pairs as RabbitMQ 3.x's rabbitmqctl export_definitions writes a
// vhost's limits ([] when it has none).
func (l *Limits) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	out := Limits{}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err == nil {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			n, err := limitValue(k, obj[k])
			if err != nil {
				return err
			}
			out[k] = n
		}
		*l = out
		return nil
	}
	var pairs [][]json.RawMessage
	if err := json.Unmarshal(b, &pairs); err != nil {
		return fmt.Errorf("limits must be an object or a list of [name, value] pairs, not %s", jsonKind(b))
	}
	for _, p := range pairs {
		var k string
		if len(p) != 2 || json.Unmarshal(p[0], &k) != nil {
			return fmt.Errorf("limits must be an object or a list of [name, value] pairs")
		}
		n, err := limitValue(k, p[1])
		if err != nil {
			return err
		}
		out[k] = n
	}
	*l = out
	return nil
}

// limitValue reads one limit; the text is rabbit_parameter_validation's.
func limitValue(name string, raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s should be a number, actually was %s", name, raw)
	}
	return n, nil
}

// Arguments are the arguments of a queue, an exchange or a binding: an
// AMQP field table as a JSON object. Parsed, as RabbitMQ converts them
// (rabbit_misc:to_amqp_table), an integer is an int64 (long), another
// number a float64 (double), and strings, booleans, arrays ([]any) and
// objects (map[string]any) are longstr, bool, array and table; null is
// refused. An export also holds the other types of the broker's tables,
// which marshal as RabbitMQ exports them: every integer as a number, a
// byte array as a string, a timestamp as seconds, a decimal as a number.
// Floats marshal with a decimal point, so that they parse back as
// floats.
type Arguments map[string]any

// UnmarshalJSON converts a JSON object as RabbitMQ does.
func (a *Arguments) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("arguments must be an object, not %s", jsonKind(b))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := fromJSON(m[k])
		if err != nil {
			return fmt.Errorf("argument %q: %w", k, err)
		}
		m[k] = v
	}
	*a = m
	return nil
}

// fromJSON converts a value decoded with UseNumber.
func fromJSON(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("null is not allowed") // RabbitMQ: null_not_allowed
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s is out of range", x)
		}
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := fromJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := fromJSON(e)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", k, err)
			}
			out[k] = c
		}
		return out, nil
	}
	return v, nil // string, bool
}

// MarshalJSON writes the arguments as RabbitMQ exports them; nil is {}.
func (a Arguments) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(a))
	for k, v := range a {
		m[k] = toJSON(v)
	}
	return json.Marshal(m)
}

// jsonFloat is a float that marshals with a decimal point or an exponent.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, fmt.Errorf("definitions: %v has no JSON form", x)
	}
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return []byte(s), nil
}

// toJSON returns v as RabbitMQ's rabbit_misc:amqp_table exports it.
func toJSON(v any) any {
	switch x := v.(type) {
	case float64:
		return jsonFloat(x)
	case float32:
		return jsonFloat(x)
	case []byte:
		return string(x)
	case time.Time:
		return x.Unix()
	case amqptab.Decimal:
		return jsonFloat(float64(x.Value) / math.Pow10(int(x.Scale)))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = toJSON(e)
		}
		return out
	}
	return v
}

// jsonKind names the JSON type of a raw value, for errors.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
