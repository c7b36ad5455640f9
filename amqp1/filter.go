package amqp1

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
)

// Filters on a stream source, as RabbitMQ 4.1 takes them
// (rabbit_amqp_session:parse_filters, rabbit_amqp_filtex):
//
//   - rabbitmq:stream-offset-spec: where to start (offset.go's offsetArg);
//   - rabbitmq:stream-filter (a string or a list of strings) and
//     rabbitmq:stream-match-unfiltered (a boolean): the chunk Bloom
//     filters, as x-stream-filter and x-stream-match-unfiltered do for
//     AMQP 0-9-1 consumers. They skip chunks, not messages: a chunk that
//     may hold a wanted value is delivered whole;
//   - amqp:properties-filter (0x173) and amqp:application-properties-filter
//     (0x174), the property filter expressions of "AMQP Filter
//     Expressions Version 1.0" (working draft 09, §4): a map of field
//     names to reference values, evaluated on each message; the receiver
//     gets only the messages every field of every such filter matches.
//
// A filter is recognised by its descriptor (the filter-set key is the
// client's choice); a rabbitmq:stream-* key whose value is not described
// is taken as if described by its key (RabbitMQ's permitted
// amqp_filter_set_bug). A filter that is unknown, or whose value is not
// one RabbitMQ accepts, is left out of the attach reply's filter-set,
// which holds the filters in place (core §3.5.3). Of two property filters
// for the same section the last one counts, as in RabbitMQ.
//
// Matching (§4.1.1, RabbitMQ's match_simple_type): a null reference
// value matches any value present; a string reference "&p:x" matches a
// value with the prefix x, "&s:x" one with the suffix x, "&&x" the string
// "&x" (another string beginning with "&" makes the filter invalid);
// otherwise values match when Erlang's == says they are equal, values
// taken without their AMQP type as mc does: strings, symbols, binaries
// and uuids are bytes (the string "ab" equals the binary "ab"), integers
// of any width, timestamps and chars are integers, an integer equals a
// float of the same value.
//
// Properties-filter fields and the reference types RabbitMQ accepts:
// message-id and correlation-id (ulong, uuid, binary, string), user-id
// (binary), to, subject, reply-to, group-id, reply-to-group-id (string),
// content-type and content-encoding (symbol, matched exactly),
// absolute-expiry-time and creation-time (timestamp), group-sequence
// (uint). An absent property matches nothing. Application-properties
// filter keys are strings; a key absent from the message matches
// nothing, whatever the reference value.

// Filter descriptors. These constants are part of the wire format and
// must not be changed.
const (
	streamFilterName          = "rabbitmq:stream-filter"
	streamMatchUnfilteredName = "rabbitmq:stream-match-unfiltered"
	propertiesFilterName      = "amqp:properties-filter"
	propertiesFilterCode      = 0x173
	appPropertiesFilterName   = "amqp:application-properties-filter"
	appPropertiesFilterCode   = 0x174
	// capPropertyFilters is the capability a stream source offers.
	capPropertyFilters = "AMQP_FILTEX_PROP_V1_0"
	// maxFilterFields bounds the fields of one property filter
	// (filtex-v1.0-wd09 §7.1; RabbitMQ's MAX_FILTER_FIELDS).
	maxFilterFields = 16
)

// valKind is the kind of a reference value or of a message's value.
type valKind uint8

const (
	valAbsent  valKind = iota // a message value matched by nothing
	valNull                   // null: a reference matching any value present; a message's null
	valBytes                  // string, symbol, binary, uuid
	valInt                    // integer types, timestamp, char (in i)
	valBigUint                // an unsigned integer above MaxInt64 (in u)
	valFloat                  // float, double
	valBool
	valPrefix // reference "&p:"
	valSuffix // reference "&s:"
	valNever  // a reference no message value equals (a list, a map, ...)
)

// value is a reference value or a message's value, without its AMQP
// type. A reference's bytes are in s, a message's in raw (aliasing the
// record, so that matching allocates nothing).
type value struct {
	kind valKind
	s    string
	raw  []byte
	i    int64
	u    uint64
	f    float64
	b    bool
}

// matches reports whether message value v matches reference value r.
func (r value) matches(v value) bool {
	if v.kind == valAbsent {
		return false
	}
	switch r.kind {
	case valNull:
		return true
	case valPrefix:
		return v.kind == valBytes && len(v.raw) >= len(r.s) && string(v.raw[:len(r.s)]) == r.s
	case valSuffix:
		return v.kind == valBytes && len(v.raw) >= len(r.s) && string(v.raw[len(v.raw)-len(r.s):]) == r.s
	case valBytes:
		return v.kind == valBytes && string(v.raw) == r.s
	case valBool:
		return v.kind == valBool && v.b == r.b
	case valInt, valBigUint, valFloat:
		return numEqual(r, v)
	}
	return false
}

// numEqual is Erlang's == on numbers: integers by value, an integer and
// a float as floats.
func numEqual(a, b value) bool {
	switch {
	case a.kind == valInt && b.kind == valInt:
		return a.i == b.i
	case a.kind == valBigUint && b.kind == valBigUint:
		return a.u == b.u
	case a.kind == valFloat && b.kind == valFloat:
		return a.f == b.f
	case a.kind == valFloat:
		f, ok := asFloat(b)
		return ok && f == a.f
	case b.kind == valFloat:
		f, ok := asFloat(a)
		return ok && f == b.f
	}
	return false
}

func asFloat(v value) (float64, bool) {
	switch v.kind {
	case valInt:
		return float64(v.i), true
	case valBigUint:
		return float64(v.u), true
	}
	return 0, false
}

// simple returns a decoded AMQP value without its type, as a message's
// value: valAbsent for what mc leaves out of a simple map (decimals,
// compounds, described values).
func simple(v any) value {
	switch x := v.(type) {
	case nil:
		return value{kind: valNull}
	case string:
		return value{kind: valBytes, s: x}
	case amqp10.Symbol:
		return value{kind: valBytes, s: string(x)}
	case []byte:
		return value{kind: valBytes, s: string(x)}
	case amqp10.UUID:
		return value{kind: valBytes, s: string(x[:])}
	case bool:
		return value{kind: valBool, b: x}
	case uint8:
		return value{kind: valInt, i: int64(x)}
	case uint16:
		return value{kind: valInt, i: int64(x)}
	case uint32:
		return value{kind: valInt, i: int64(x)}
	case uint64:
		if x > math.MaxInt64 {
			return value{kind: valBigUint, u: x}
		}
		return value{kind: valInt, i: int64(x)}
	case int8:
		return value{kind: valInt, i: int64(x)}
	case int16:
		return value{kind: valInt, i: int64(x)}
	case int32:
		return value{kind: valInt, i: int64(x)}
	case int64:
		return value{kind: valInt, i: x}
	case amqp10.Timestamp:
		return value{kind: valInt, i: int64(x)}
	case amqp10.Char:
		return value{kind: valInt, i: int64(x)}
	case float32:
		return value{kind: valFloat, f: float64(x)}
	case float64:
		return value{kind: valFloat, f: x}
	}
	return value{kind: valAbsent}
}

// rawValue is a message's value from its encoding, bytes aliasing it.
func rawValue(item []byte) value {
	if b, ok := amqp10.BytesOf(item); ok {
		return value{kind: valBytes, raw: b}
	}
	v, _, err := amqp10.Decode(item)
	if err != nil {
		return value{kind: valAbsent}
	}
	return simple(v)
}

// stringRef parses a string reference value's modifier prefix
// (filtex-v1.0-wd09 §4.1.1, RabbitMQ's parse_string_modifier_prefix).
func stringRef(s string) (value, bool) {
	switch {
	case strings.HasPrefix(s, "&s:"):
		return value{kind: valSuffix, s: s[3:]}, true
	case strings.HasPrefix(s, "&p:"):
		return value{kind: valPrefix, s: s[3:]}, true
	case strings.HasPrefix(s, "&&"):
		return value{kind: valBytes, s: s[1:]}, true
	case strings.HasPrefix(s, "&"):
		return value{}, false
	}
	return value{kind: valBytes, s: s}, true
}

// propExpr is one field of a properties filter.
type propExpr struct {
	field amqp10.PropField
	ref   value
}

// appExpr is one key of an application-properties filter.
type appExpr struct {
	key string
	ref value
}

// propertyFilter is a receiver's property filter expressions: a message
// passes when it matches every one.
type propertyFilter struct {
	props []propExpr // nil: no properties filter
	app   []appExpr  // nil: no application-properties filter
}

// filterSection is which section a property filter reads.
type filterSection uint8

const (
	sectionProperties filterSection = iota + 1
	sectionAppProperties
)

// propFields are the properties-filter field names.
var propFields = map[amqp10.Symbol]amqp10.PropField{
	"message-id":           amqp10.PropMessageID,
	"user-id":              amqp10.PropUserID,
	"to":                   amqp10.PropTo,
	"subject":              amqp10.PropSubject,
	"reply-to":             amqp10.PropReplyTo,
	"correlation-id":       amqp10.PropCorrelationID,
	"content-type":         amqp10.PropContentType,
	"content-encoding":     amqp10.PropContentEncoding,
	"absolute-expiry-time": amqp10.PropAbsoluteExpiryTime,
	"creation-time":        amqp10.PropCreationTime,
	"group-id":             amqp10.PropGroupID,
	"group-sequence":       amqp10.PropGroupSequence,
	"reply-to-group-id":    amqp10.PropReplyToGroupID,
}

// parsePropertyFilter parses a filter-set value as a property filter
// expression (RabbitMQ's rabbit_amqp_filtex:validate): the section it
// filters and its fields; false when it is not one, or not one RabbitMQ
// accepts.
func parsePropertyFilter(v any) (filterSection, []propExpr, []appExpr, bool) {
	d, ok := v.(amqp10.Described)
	if !ok {
		return 0, nil, nil, false
	}
	m, ok := d.Value.(amqp10.Map)
	if !ok || len(m) == 0 || len(m) > maxFilterFields {
		return 0, nil, nil, false
	}
	switch d.Descriptor {
	case amqp10.Symbol(propertiesFilterName), uint64(propertiesFilterCode):
		props, ok := parseProps(m)
		return sectionProperties, props, nil, ok
	case amqp10.Symbol(appPropertiesFilterName), uint64(appPropertiesFilterCode):
		app, ok := parseAppProps(m)
		return sectionAppProperties, nil, app, ok
	}
	return 0, nil, nil, false
}

func parseProps(m amqp10.Map) ([]propExpr, bool) {
	out := make([]propExpr, 0, len(m))
	for _, e := range m {
		k, ok := e.Key.(amqp10.Symbol)
		if !ok {
			return nil, false
		}
		field, ok := propFields[k]
		if !ok {
			return nil, false
		}
		var ref value
		switch field {
		case amqp10.PropMessageID, amqp10.PropCorrelationID:
			switch x := e.Value.(type) {
			case string:
				ref, ok = stringRef(x)
			case uint64, amqp10.UUID, []byte:
				ref = simple(x)
			default:
				ok = false
			}
		case amqp10.PropUserID:
			var b []byte
			b, ok = e.Value.([]byte)
			ref = value{kind: valBytes, s: string(b)}
		case amqp10.PropTo, amqp10.PropSubject, amqp10.PropReplyTo, amqp10.PropGroupID, amqp10.PropReplyToGroupID:
			var s string
			if s, ok = e.Value.(string); ok {
				ref, ok = stringRef(s)
			}
		case amqp10.PropContentType, amqp10.PropContentEncoding:
			var s amqp10.Symbol
			s, ok = e.Value.(amqp10.Symbol)
			ref = value{kind: valBytes, s: string(s)}
		case amqp10.PropAbsoluteExpiryTime, amqp10.PropCreationTime:
			var t amqp10.Timestamp
			t, ok = e.Value.(amqp10.Timestamp)
			ref = value{kind: valInt, i: int64(t)}
		case amqp10.PropGroupSequence:
			var n uint32
			n, ok = e.Value.(uint32)
			ref = value{kind: valInt, i: int64(n)}
		}
		if !ok {
			return nil, false
		}
		out = append(out, propExpr{field: field, ref: ref})
	}
	return out, true
}

func parseAppProps(m amqp10.Map) ([]appExpr, bool) {
	out := make([]appExpr, 0, len(m))
	for _, e := range m {
		k, ok := e.Key.(string)
		if !ok {
			return nil, false
		}
		var ref value
		if s, isString := e.Value.(string); isString {
			if ref, ok = stringRef(s); !ok {
				return nil, false
			}
		} else {
			ref = simple(e.Value)
			if ref.kind == valAbsent {
				ref.kind = valNever // a list, a map, a decimal: equal to no simple value
			}
		}
		out = append(out, appExpr{key: k, ref: ref})
	}
	return out, true
}

// match reports whether a stream record (an AMQP 1.0 message) passes
// the filter; a record whose sections do not decode passes none. It
// reads only the fields the filter names, from their encoding, and
// allocates nothing for strings and binaries.
func (f *propertyFilter) match(record []byte) bool {
	props, app, err := amqp10.RawSections(record)
	if err != nil {
		return false
	}
	if len(f.props) > 0 {
		// A property's index in the list is its PropField bit.
		var fields [13][]byte
		i := 0
		if props == nil || amqp10.Items(props, func(item []byte) bool {
			if i < len(fields) {
				fields[i] = item
			}
			i++
			return i < len(fields)
		}) != nil {
			return false
		}
		for _, e := range f.props {
			item := fields[bits.TrailingZeros16(uint16(e.field))]
			v := value{kind: valAbsent}
			if item != nil {
				v = rawValue(item)
				if v.kind == valNull {
					v.kind = valAbsent // a null field is an absent one
				}
			}
			if !e.ref.matches(v) {
				return false
			}
		}
	}
	if len(f.app) > 0 {
		if app == nil {
			return false
		}
		// The first entry of a key counts; one match per filter key.
		var found, matched uint32
		var key []byte
		isKey := true
		err := amqp10.Items(app, func(item []byte) bool {
			if isKey {
				isKey = false
				key, _ = amqp10.StringBytes(item)
				return true
			}
			isKey = true
			if key == nil {
				return true
			}
			for j, e := range f.app {
				if found&(1<<j) == 0 && string(key) == e.key {
					found |= 1 << j
					if e.ref.matches(rawValue(item)) {
						matched |= 1 << j
					}
				}
			}
			return true
		})
		if err != nil || matched != 1<<len(f.app)-1 {
			return false
		}
	}
	return true
}

// sourceFilters is what a stream source's filter-set asks for.
type sourceFilters struct {
	args map[string]any  // x-stream-offset, x-stream-filter, x-stream-match-unfiltered
	prop *propertyFilter // nil: no property filter
	echo amqp10.Map      // the filters in place, in the client's order
}

// parseSourceFilters reads a stream source's filter-set as
// rabbit_amqp_session:parse_filter does: from the last entry to the
// first, so that of two property filters for one section the last
// counts, and of two values for one consumer argument the first.
func parseSourceFilters(fs amqp10.Map) (sourceFilters, *amqpError) {
	sf := sourceFilters{args: map[string]any{}}
	var sections [3]bool
	var echo amqp10.Map
	for i := len(fs) - 1; i >= 0; i-- {
		e := fs[i]
		k, ok := e.Key.(amqp10.Symbol)
		if !ok {
			continue
		}
		d, described := e.Value.(amqp10.Described)
		if !described && strings.HasPrefix(string(k), "rabbitmq:stream-") {
			d = amqp10.Described{Descriptor: k, Value: e.Value}
			e.Value, described = d, true
		}
		if !described {
			continue
		}
		switch d.Descriptor {
		case amqp10.Symbol(streamOffsetFilter):
			v, ok := offsetArg(d.Value)
			if !ok {
				return sf, &amqpError{cond: frame.CondInvalidField, desc: fmt.Sprintf("Attach refused: bad %s filter value %v", streamOffsetFilter, d.Value)}
			}
			sf.args["x-stream-offset"] = v
		case amqp10.Symbol(streamFilterName):
			switch x := d.Value.(type) {
			case string:
				sf.args["x-stream-filter"] = x
			case []any:
				values := []any{}
				for _, v := range x {
					if s, ok := v.(string); ok {
						values = append(values, s)
					}
				}
				sf.args["x-stream-filter"] = values
			default:
				continue
			}
		case amqp10.Symbol(streamMatchUnfilteredName):
			b, ok := d.Value.(bool)
			if !ok {
				continue
			}
			sf.args["x-stream-match-unfiltered"] = b
		default:
			section, props, app, ok := parsePropertyFilter(d)
			if !ok || sections[section] {
				continue
			}
			sections[section] = true
			if sf.prop == nil {
				sf.prop = &propertyFilter{}
			}
			if props != nil {
				sf.prop.props = props
			} else {
				sf.prop.app = app
			}
		}
		echo = append(echo, e)
	}
	slices.Reverse(echo)
	sf.echo = echo
	return sf, nil
}
