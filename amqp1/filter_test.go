package amqp1

import (
	"math"
	"testing"

	"github.com/warren-mq/warren/internal/amqp10"
)

func propsFilter(m amqp10.Map) amqp10.Described {
	return amqp10.Described{Descriptor: uint64(propertiesFilterCode), Value: m}
}

func appFilter(m amqp10.Map) amqp10.Described {
	return amqp10.Described{Descriptor: amqp10.Symbol(appPropertiesFilterName), Value: m}
}

// filterMessage is the message the matcher tests filter.
func filterMessage(t *testing.T) []byte {
	t.Helper()
	m := amqp10.Message{
		Header:             &amqp10.Header{Set: amqp10.HeaderDurable, Durable: true},
		MessageAnnotations: amqp10.Map{{Key: amqp10.Symbol("x-exchange"), Value: ""}},
		Properties: &amqp10.Properties{
			Set: amqp10.PropMessageID | amqp10.PropUserID | amqp10.PropTo | amqp10.PropSubject | amqp10.PropReplyTo |
				amqp10.PropCorrelationID | amqp10.PropContentType | amqp10.PropContentEncoding |
				amqp10.PropAbsoluteExpiryTime | amqp10.PropCreationTime | amqp10.PropGroupID |
				amqp10.PropGroupSequence | amqp10.PropReplyToGroupID,
			MessageID: "order-42", UserID: []byte("guest"), To: "/exchanges/amq.topic/eu.de",
			Subject: "&weird", ReplyTo: "/queues/replies", CorrelationID: uint64(7),
			ContentType: "application/json", ContentEncoding: "gzip", AbsoluteExpiryTime: 2000,
			CreationTime: 1000, GroupID: "g1", GroupSequence: 3, ReplyToGroupID: "rg",
		},
		ApplicationProperties: amqp10.Map{
			{Key: "region", Value: "eu-west"},
			{Key: "n", Value: int64(5)},
			{Key: "f", Value: 2.5},
			{Key: "u", Value: uint8(9)},
			{Key: "big", Value: uint64(math.MaxUint64)},
			{Key: "ok", Value: true},
			{Key: "bin", Value: []byte("raw")},
			{Key: "sym", Value: amqp10.Symbol("s")},
			{Key: "null", Value: nil},
			{Key: "ts", Value: amqp10.Timestamp(77)},
			{Key: "region", Value: "dup"}, // the first counts
		},
		Body: amqp10.Body{Kind: amqp10.BodyData, Data: [][]byte{[]byte("body")}},
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Ensure the property filter expressions match as RabbitMQ's
// rabbit_amqp_filtex does: exact values, prefixes and suffixes, the &&
// escape, null, numbers across types, strings equal to binaries.
func TestPropertyFilterMatch(t *testing.T) {
	msg := filterMessage(t)
	sym := func(s string) amqp10.Symbol { return amqp10.Symbol(s) }
	for _, tc := range []struct {
		name   string
		filter amqp10.Described
		want   bool
	}{
		{"message-id", propsFilter(amqp10.Map{{Key: sym("message-id"), Value: "order-42"}}), true},
		{"message-id other", propsFilter(amqp10.Map{{Key: sym("message-id"), Value: "order-43"}}), false},
		{"message-id prefix", propsFilter(amqp10.Map{{Key: sym("message-id"), Value: "&p:order-"}}), true},
		{"message-id as binary", propsFilter(amqp10.Map{{Key: sym("message-id"), Value: []byte("order-42")}}), true},
		{"correlation-id ulong", propsFilter(amqp10.Map{{Key: sym("correlation-id"), Value: uint64(7)}}), true},
		{"correlation-id string", propsFilter(amqp10.Map{{Key: sym("correlation-id"), Value: "7"}}), false},
		{"user-id", propsFilter(amqp10.Map{{Key: sym("user-id"), Value: []byte("guest")}}), true},
		{"to suffix", propsFilter(amqp10.Map{{Key: sym("to"), Value: "&s:.de"}}), true},
		{"to suffix other", propsFilter(amqp10.Map{{Key: sym("to"), Value: "&s:.fr"}}), false},
		{"subject escaped", propsFilter(amqp10.Map{{Key: sym("subject"), Value: "&&weird"}}), true},
		{"reply-to prefix", propsFilter(amqp10.Map{{Key: sym("reply-to"), Value: "&p:/queues/"}}), true},
		{"content-type", propsFilter(amqp10.Map{{Key: sym("content-type"), Value: sym("application/json")}}), true},
		{"content-type no affix", propsFilter(amqp10.Map{{Key: sym("content-type"), Value: sym("&p:application")}}), false},
		{"content-encoding", propsFilter(amqp10.Map{{Key: sym("content-encoding"), Value: sym("gzip")}}), true},
		{"absolute-expiry-time", propsFilter(amqp10.Map{{Key: sym("absolute-expiry-time"), Value: amqp10.Timestamp(2000)}}), true},
		{"creation-time", propsFilter(amqp10.Map{{Key: sym("creation-time"), Value: amqp10.Timestamp(1001)}}), false},
		{"group-id", propsFilter(amqp10.Map{{Key: sym("group-id"), Value: "g1"}}), true},
		{"group-sequence", propsFilter(amqp10.Map{{Key: sym("group-sequence"), Value: uint32(3)}}), true},
		{"reply-to-group-id", propsFilter(amqp10.Map{{Key: sym("reply-to-group-id"), Value: "rg"}}), true},
		{"all of them", propsFilter(amqp10.Map{{Key: sym("subject"), Value: "&&weird"}, {Key: sym("group-id"), Value: "g1"}}), true},
		{"one of them fails", propsFilter(amqp10.Map{{Key: sym("subject"), Value: "&&weird"}, {Key: sym("group-id"), Value: "g2"}}), false},
		{"empty prefix", propsFilter(amqp10.Map{{Key: sym("subject"), Value: "&p:"}}), true},

		{"app string", appFilter(amqp10.Map{{Key: "region", Value: "eu-west"}}), true},
		{"app first of duplicates", appFilter(amqp10.Map{{Key: "region", Value: "dup"}}), false},
		{"app prefix", appFilter(amqp10.Map{{Key: "region", Value: "&p:eu-"}}), true},
		{"app suffix", appFilter(amqp10.Map{{Key: "region", Value: "&s:east"}}), false},
		{"app long", appFilter(amqp10.Map{{Key: "n", Value: int64(5)}}), true},
		{"app int vs long", appFilter(amqp10.Map{{Key: "n", Value: int32(5)}}), true},
		{"app double vs long", appFilter(amqp10.Map{{Key: "n", Value: 5.0}}), true},
		{"app long vs double", appFilter(amqp10.Map{{Key: "f", Value: int64(2)}}), false},
		{"app double", appFilter(amqp10.Map{{Key: "f", Value: 2.5}}), true},
		{"app ulong vs ubyte", appFilter(amqp10.Map{{Key: "u", Value: uint64(9)}}), true},
		{"app big ulong", appFilter(amqp10.Map{{Key: "big", Value: uint64(math.MaxUint64)}}), true},
		{"app big ulong vs long", appFilter(amqp10.Map{{Key: "big", Value: int64(-1)}}), false},
		{"app bool", appFilter(amqp10.Map{{Key: "ok", Value: true}}), true},
		{"app bool false", appFilter(amqp10.Map{{Key: "ok", Value: false}}), false},
		{"app string vs binary", appFilter(amqp10.Map{{Key: "bin", Value: "raw"}}), true},
		{"app binary vs symbol", appFilter(amqp10.Map{{Key: "sym", Value: []byte("s")}}), true},
		{"app null matches any", appFilter(amqp10.Map{{Key: "n", Value: nil}}), true},
		{"app null matches null", appFilter(amqp10.Map{{Key: "null", Value: nil}}), true},
		{"app string vs null", appFilter(amqp10.Map{{Key: "null", Value: ""}}), false},
		{"app null needs the key", appFilter(amqp10.Map{{Key: "missing", Value: nil}}), false},
		{"app timestamp vs long", appFilter(amqp10.Map{{Key: "ts", Value: int64(77)}}), true},
		{"app list never", appFilter(amqp10.Map{{Key: "n", Value: []any{int64(5)}}}), false},
		{"app two keys", appFilter(amqp10.Map{{Key: "ok", Value: true}, {Key: "u", Value: int64(9)}}), true},
		{"app same key twice", appFilter(amqp10.Map{{Key: "n", Value: int64(5)}, {Key: "n", Value: "&p:"}}), false},
		{"props and absent field", propsFilter(amqp10.Map{{Key: sym("to"), Value: "&p:"}}), true},
	} {
		section, props, app, ok := parsePropertyFilter(tc.filter)
		if !ok {
			t.Errorf("%s: filter refused", tc.name)
			continue
		}
		f := &propertyFilter{props: props, app: app}
		if (section == sectionProperties) != (props != nil) {
			t.Errorf("%s: section %d, props %v", tc.name, section, props)
		}
		if got := f.match(msg); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if p, app, err := amqp10.ReadProperties(msg); err != nil || f.matchMessage(p, app) != tc.want {
			t.Errorf("%s: on the decoded message: got %v (%v), want %v", tc.name, !tc.want, err, tc.want)
		}
	}
}

// Ensure filters RabbitMQ refuses are refused (and so left out of the
// attach reply).
func TestPropertyFilterRefused(t *testing.T) {
	sym := func(s string) amqp10.Symbol { return amqp10.Symbol(s) }
	many := amqp10.Map{}
	for i := range maxFilterFields + 1 {
		many = append(many, amqp10.MapEntry{Key: string(rune('a' + i)), Value: int64(i)})
	}
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"not described", amqp10.Map{{Key: sym("subject"), Value: "x"}}},
		{"other descriptor", amqp10.Described{Descriptor: uint64(0x0000468C00000003), Value: amqp10.Map{{Key: sym("subject"), Value: "x"}}}},
		{"empty", propsFilter(amqp10.Map{})},
		{"not a map", amqp10.Described{Descriptor: amqp10.Symbol(propertiesFilterName), Value: "subject"}},
		{"too many fields", appFilter(many)},
		{"unknown field", propsFilter(amqp10.Map{{Key: sym("priority"), Value: uint8(1)}})},
		{"string field name", propsFilter(amqp10.Map{{Key: "subject", Value: "x"}})},
		{"subject of the wrong type", propsFilter(amqp10.Map{{Key: sym("subject"), Value: sym("x")}})},
		{"content-type as string", propsFilter(amqp10.Map{{Key: sym("content-type"), Value: "text/plain"}})},
		{"group-sequence as ulong", propsFilter(amqp10.Map{{Key: sym("group-sequence"), Value: uint64(1)}})},
		{"creation-time as long", propsFilter(amqp10.Map{{Key: sym("creation-time"), Value: int64(1)}})},
		{"message-id as long", propsFilter(amqp10.Map{{Key: sym("message-id"), Value: int64(1)}})},
		{"bad modifier", propsFilter(amqp10.Map{{Key: sym("subject"), Value: "&x:y"}})},
		{"bad app modifier", appFilter(amqp10.Map{{Key: "k", Value: "&"}})},
		{"symbol app key", appFilter(amqp10.Map{{Key: sym("k"), Value: "v"}})},
	} {
		if _, _, _, ok := parsePropertyFilter(tc.v); ok {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// Ensure the filter-set is read as RabbitMQ reads it: unknown filters
// and bad values left out of the echo, the last property filter of a
// section counting, a rabbitmq:stream-* value that is not described
// taken as described by its key, the Bloom filter's arguments.
func TestParseSourceFilters(t *testing.T) {
	sym := func(s string) amqp10.Symbol { return amqp10.Symbol(s) }
	desc := func(name string, v any) amqp10.Described { return amqp10.Described{Descriptor: sym(name), Value: v} }
	first := appFilter(amqp10.Map{{Key: "k", Value: "first"}})
	last := appFilter(amqp10.Map{{Key: "k", Value: "last"}})
	fs := amqp10.Map{
		{Key: sym("offset"), Value: desc(streamOffsetFilter, "first")},
		{Key: sym("unknown"), Value: desc("x:unknown", "v")},
		{Key: sym("f1"), Value: desc(streamFilterName, []any{"a", int64(1), "b"})},
		{Key: sym(streamMatchUnfilteredName), Value: true}, // not described
		{Key: sym("bad-filter"), Value: desc(streamFilterName, int64(3))},
		{Key: sym("app1"), Value: first},
		{Key: sym("props"), Value: propsFilter(amqp10.Map{{Key: sym("subject"), Value: "s"}})},
		{Key: sym("app2"), Value: last},
		{Key: "not-a-symbol", Value: desc(streamFilterName, "z")},
	}
	sf, aerr := parseSourceFilters(fs)
	if aerr != nil {
		t.Fatal(aerr)
	}
	var keys []string
	for _, e := range sf.echo {
		keys = append(keys, string(e.Key.(amqp10.Symbol)))
	}
	if got, want := keys, []string{"offset", "f1", streamMatchUnfilteredName, "props", "app2"}; !equalStrings(got, want) {
		t.Errorf("echoed %v, want %v", got, want)
	}
	if d, ok := sf.echo[2].Value.(amqp10.Described); !ok || d.Descriptor != sym(streamMatchUnfilteredName) || d.Value != true {
		t.Errorf("match-unfiltered echoed as %#v", sf.echo[2].Value)
	}
	if f, ok := sf.args["x-stream-filter"].([]any); !ok || len(f) != 2 || f[0] != "a" || f[1] != "b" {
		t.Errorf("x-stream-filter %#v", sf.args["x-stream-filter"])
	}
	if sf.args["x-stream-match-unfiltered"] != true || sf.args["x-stream-offset"] != "first" {
		t.Errorf("args %v", sf.args)
	}
	if sf.prop == nil || len(sf.prop.props) != 1 || len(sf.prop.app) != 1 || sf.prop.app[0].ref.s != "last" {
		t.Errorf("property filter %+v", sf.prop)
	}
	if _, aerr := parseSourceFilters(amqp10.Map{{Key: sym("o"), Value: desc(streamOffsetFilter, []any{})}}); aerr == nil {
		t.Error("a bad offset spec was accepted")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// filterSeedMessage is a message with properties and application
// properties for the fuzz corpus.
var filterSeedMessage = func() []byte {
	m := amqp10.Message{
		Properties:            &amqp10.Properties{Set: amqp10.PropMessageID | amqp10.PropSubject, MessageID: uint64(1), Subject: "xy"},
		ApplicationProperties: amqp10.Map{{Key: "k", Value: "vv"}, {Key: "n", Value: 1.5}, {Key: "z", Value: nil}},
		Body:                  amqp10.Body{Kind: amqp10.BodyValue, Value: "b"},
	}
	b, _ := m.MarshalBinary()
	return b
}()

// FuzzPropertiesFilter parses any encoded filter value as a filter-set
// entry's value and matches it against a message: neither may panic, and
// an accepted filter holds at most maxFilterFields fields; on a message
// that decodes, the scan of its encoding agrees with the decoded match.
func FuzzPropertiesFilter(f *testing.F) {
	for _, d := range []amqp10.Described{
		propsFilter(amqp10.Map{{Key: amqp10.Symbol("subject"), Value: "&p:x"}, {Key: amqp10.Symbol("message-id"), Value: uint64(1)}}),
		appFilter(amqp10.Map{{Key: "k", Value: "&s:v"}, {Key: "n", Value: 1.5}, {Key: "z", Value: nil}}),
		{Descriptor: uint64(appPropertiesFilterCode), Value: amqp10.Map{{Key: "k", Value: []any{true}}}},
	} {
		b, err := amqp10.AppendValue(nil, d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte{0x00, 0x53, 0x75, 0xa0, 0x02, 'h', 'i'})
		f.Add(b, filterSeedMessage)
	}
	f.Fuzz(func(t *testing.T, filter, msg []byte) {
		v, _, err := amqp10.Decode(filter)
		if err != nil {
			return
		}
		_, props, app, ok := parsePropertyFilter(v)
		if !ok {
			return
		}
		if len(props)+len(app) == 0 || len(props)+len(app) > maxFilterFields {
			t.Fatalf("accepted a filter of %d fields", len(props)+len(app))
		}
		pf := &propertyFilter{props: props, app: app}
		got := pf.match(msg)
		// The decoded message is the reference for the encoded scan.
		if p, a, err := amqp10.ReadProperties(msg); err == nil {
			var m amqp10.Message
			if m.UnmarshalBinary(msg) == nil {
				if want := pf.matchMessage(p, a); got != want {
					t.Fatalf("match on the encoding %v, on the decoded message %v", got, want)
				}
			}
		}
		parseSourceFilters(amqp10.Map{{Key: amqp10.Symbol("f"), Value: v}})
	})
}

// The decoded match: the reference the encoded scan (propertyFilter.match)
// is tested against.

// msgValue is simple for a message's decoded value: bytes in raw.
func msgValue(v any) value {
	x := simple(v)
	if x.kind == valBytes {
		x.raw, x.s = []byte(x.s), ""
	}
	return x
}

// propValue is a message's decoded property field, valAbsent when not
// set.
func propValue(p *amqp10.Properties, f amqp10.PropField) value {
	if p == nil || p.Set&f == 0 {
		return value{kind: valAbsent}
	}
	switch f {
	case amqp10.PropMessageID:
		return msgValue(p.MessageID)
	case amqp10.PropUserID:
		return msgValue(p.UserID)
	case amqp10.PropTo:
		return msgValue(p.To)
	case amqp10.PropSubject:
		return msgValue(p.Subject)
	case amqp10.PropReplyTo:
		return msgValue(p.ReplyTo)
	case amqp10.PropCorrelationID:
		return msgValue(p.CorrelationID)
	case amqp10.PropContentType:
		return msgValue(amqp10.Symbol(p.ContentType))
	case amqp10.PropContentEncoding:
		return msgValue(amqp10.Symbol(p.ContentEncoding))
	case amqp10.PropAbsoluteExpiryTime:
		return msgValue(p.AbsoluteExpiryTime)
	case amqp10.PropCreationTime:
		return msgValue(p.CreationTime)
	case amqp10.PropGroupID:
		return msgValue(p.GroupID)
	case amqp10.PropGroupSequence:
		return msgValue(p.GroupSequence)
	case amqp10.PropReplyToGroupID:
		return msgValue(p.ReplyToGroupID)
	}
	return value{kind: valAbsent}
}

// matchMessage reports whether a decoded message's properties and
// application properties pass the filter: the reference for match,
// which reads the encoding.
func (f *propertyFilter) matchMessage(p *amqp10.Properties, app amqp10.Map) bool {
	for _, e := range f.props {
		if !e.ref.matches(propValue(p, e.field)) {
			return false
		}
	}
	for _, e := range f.app {
		v, ok := app.String(e.key)
		if !ok || !e.ref.matches(msgValue(v)) {
			return false
		}
	}
	return true
}
