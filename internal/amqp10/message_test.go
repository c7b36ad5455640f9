package amqp10

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
)

// The rabbitmq-stream-go-client's AMQP 1.0 codec (v1.8.3) is the
// reference implementation these tests check against: what it encodes
// we decode, and what we encode it decodes, field by field.

var (
	refCreated = time.UnixMilli(1_700_000_000_123).UTC()
	refExpiry  = time.UnixMilli(1_700_000_600_000).UTC()
)

// refMessage is a message using every section the client writes.
func refMessage() *streamamqp.Message {
	return &streamamqp.Message{
		Header: &streamamqp.MessageHeader{
			Durable: true, Priority: 7, TTL: 5 * time.Second, FirstAcquirer: true, DeliveryCount: 3,
		},
		DeliveryAnnotations: streamamqp.Annotations{"x-da": "d"},
		Annotations: streamamqp.Annotations{
			"x-exchange":    "ex",
			"x-routing-key": "rk",
			"x-count":       int64(5),
		},
		Properties: &streamamqp.MessageProperties{
			MessageID:          "m-1",
			UserID:             []byte("user"),
			To:                 "to",
			Subject:            "subject",
			ReplyTo:            "reply",
			CorrelationID:      uint64(42),
			ContentType:        "text/plain",
			ContentEncoding:    "gzip",
			AbsoluteExpiryTime: refExpiry,
			CreationTime:       refCreated,
			GroupID:            "group",
			GroupSequence:      9,
			ReplyToGroupID:     "reply-group",
		},
		ApplicationProperties: map[string]any{
			"s": "string", "i": int32(-5), "l": int64(1 << 40), "b": true,
			"d": 1.5, "bin": []byte{1, 2}, "u": uint64(7), "ub": uint8(200),
		},
		Data:   [][]byte{[]byte("hello "), []byte("world")},
		Footer: streamamqp.Annotations{"x-f": "footer"},
	}
}

// Ensure a message the stream client encodes decodes to the same fields.
func TestDecodeStreamClientMessage(t *testing.T) {
	ref := refMessage()
	b, err := ref.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	wantHeader := &Header{
		Set:     HeaderDurable | HeaderPriority | HeaderTTL | HeaderFirstAcquirer | HeaderDeliveryCount,
		Durable: true, Priority: 7, TTL: 5000, FirstAcquirer: true, DeliveryCount: 3,
	}
	if !reflect.DeepEqual(m.Header, wantHeader) {
		t.Fatalf("header: got %+v, want %+v", m.Header, wantHeader)
	}
	if v, ok := m.DeliveryAnnotations.Symbol("x-da"); !ok || v != "d" {
		t.Fatalf("delivery annotations: %v", m.DeliveryAnnotations)
	}
	for k, want := range map[string]any{"x-exchange": "ex", "x-routing-key": "rk", "x-count": int64(5)} {
		if v, ok := m.MessageAnnotations.Symbol(k); !ok || v != want {
			t.Fatalf("message annotation %s: got %#v, want %#v", k, v, want)
		}
	}
	wantProps := &Properties{
		Set:       PropMessageID | PropUserID | PropTo | PropSubject | PropReplyTo | PropCorrelationID | PropContentType | PropContentEncoding | PropAbsoluteExpiryTime | PropCreationTime | PropGroupID | PropGroupSequence | PropReplyToGroupID,
		MessageID: "m-1", UserID: []byte("user"), To: "to", Subject: "subject", ReplyTo: "reply",
		CorrelationID: uint64(42), ContentType: "text/plain", ContentEncoding: "gzip",
		AbsoluteExpiryTime: Timestamp(refExpiry.UnixMilli()), CreationTime: Timestamp(refCreated.UnixMilli()),
		GroupID: "group", GroupSequence: 9, ReplyToGroupID: "reply-group",
	}
	if !reflect.DeepEqual(m.Properties, wantProps) {
		t.Fatalf("properties:\n got %+v\nwant %+v", m.Properties, wantProps)
	}
	if len(m.ApplicationProperties) != len(ref.ApplicationProperties) {
		t.Fatalf("application properties: %v", m.ApplicationProperties)
	}
	for k, want := range ref.ApplicationProperties {
		if v, ok := m.ApplicationProperties.String(k); !ok || !reflect.DeepEqual(v, want) {
			t.Fatalf("application property %s: got %#v, want %#v", k, v, want)
		}
	}
	if m.Body.Kind != BodyData || len(m.Body.Data) != 2 || string(m.Body.Data[0]) != "hello " || string(m.Body.Data[1]) != "world" {
		t.Fatalf("body: %+v", m.Body)
	}
	if v, ok := m.Footer.Symbol("x-f"); !ok || v != "footer" {
		t.Fatalf("footer: %v", m.Footer)
	}
	// The body and footer are the encoded tail of the message.
	if !bytes.HasPrefix(m.BodyAndFooter, []byte{0x00, 0x53, 0x75}) || !bytes.HasSuffix(b, m.BodyAndFooter) {
		t.Fatalf("body and footer: % x", m.BodyAndFooter)
	}
}

// Ensure a message we encode decodes in the stream client to the same
// fields.
func TestStreamClientDecodesMessage(t *testing.T) {
	m := &Message{
		Header: &Header{
			Set:     HeaderDurable | HeaderPriority | HeaderTTL | HeaderFirstAcquirer | HeaderDeliveryCount,
			Durable: true, Priority: 7, TTL: 5000, FirstAcquirer: true, DeliveryCount: 3,
		},
		MessageAnnotations: Map{
			{Symbol("x-exchange"), "ex"},
			{Symbol("x-routing-key"), "rk"},
			{Symbol("x-count"), int64(5)},
		},
		Properties: &Properties{
			Set:       PropMessageID | PropUserID | PropTo | PropSubject | PropReplyTo | PropCorrelationID | PropContentType | PropContentEncoding | PropAbsoluteExpiryTime | PropCreationTime | PropGroupID | PropGroupSequence | PropReplyToGroupID,
			MessageID: UUID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, UserID: []byte("user"),
			To: "to", Subject: "subject", ReplyTo: "reply", CorrelationID: []byte("corr"),
			ContentType: "text/plain", ContentEncoding: "gzip",
			AbsoluteExpiryTime: Timestamp(refExpiry.UnixMilli()), CreationTime: Timestamp(refCreated.UnixMilli()),
			GroupID: "group", GroupSequence: 9, ReplyToGroupID: "reply-group",
		},
		ApplicationProperties: Map{
			{"s", "string"}, {"i", int32(-500)}, {"si", int32(-5)}, {"l", int64(1 << 40)}, {"b", true}, {"f", false},
			{"d", 1.5}, {"bin", []byte{1, 2}}, {"u", uint64(7)}, {"ub", uint8(200)}, {"n", nil},
			{"ts", Timestamp(refCreated.UnixMilli())}, {"sh", int16(-300)},
		},
		Body:   Body{Kind: BodyData, Data: [][]byte{[]byte("hello "), []byte("world")}},
		Footer: Map{{Symbol("x-f"), "footer"}},
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var ref streamamqp.Message
	if err := ref.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	wantHeader := streamamqp.MessageHeader{Durable: true, Priority: 7, TTL: 5 * time.Second, FirstAcquirer: true, DeliveryCount: 3}
	if ref.Header == nil || *ref.Header != wantHeader {
		t.Fatalf("header: got %+v", ref.Header)
	}
	for k, want := range map[string]any{"x-exchange": "ex", "x-routing-key": "rk", "x-count": int64(5)} {
		if v := ref.Annotations[k]; v != want {
			t.Fatalf("annotation %s: got %#v, want %#v", k, v, want)
		}
	}
	p := ref.Properties
	if p == nil || p.MessageID != streamamqp.UUID(m.Properties.MessageID.(UUID)) || string(p.UserID) != "user" ||
		p.To != "to" || p.Subject != "subject" || p.ReplyTo != "reply" || !bytes.Equal(p.CorrelationID.([]byte), []byte("corr")) ||
		p.ContentType != "text/plain" || p.ContentEncoding != "gzip" || !p.AbsoluteExpiryTime.Equal(refExpiry) ||
		!p.CreationTime.Equal(refCreated) || p.GroupID != "group" || p.GroupSequence != 9 || p.ReplyToGroupID != "reply-group" {
		t.Fatalf("properties: %+v", p)
	}
	// The client reads smallint and smalllong without sign extension
	// (decode.go readInt32/readLong): -5, which RabbitMQ and we encode
	// as 0x54 0xfb, reads as 251 there, against RabbitMQ as against us.
	want := map[string]any{
		"s": "string", "i": int32(-500), "si": int32(251), "l": int64(1 << 40), "b": true, "f": false, "d": 1.5,
		"bin": []byte{1, 2}, "u": uint64(7), "ub": uint8(200), "n": nil, "sh": int16(-300),
	}
	for k, w := range want {
		if v, ok := ref.ApplicationProperties[k]; !ok || !reflect.DeepEqual(v, w) {
			t.Fatalf("application property %s: got %#v, want %#v", k, v, w)
		}
	}
	if ts, ok := ref.ApplicationProperties["ts"].(time.Time); !ok || !ts.Equal(refCreated) {
		t.Fatalf("application property ts: %#v", ref.ApplicationProperties["ts"])
	}
	if len(ref.Data) != 2 || string(ref.Data[0]) != "hello " || string(ref.Data[1]) != "world" {
		t.Fatalf("data: %q", ref.Data)
	}
	if ref.Footer["x-f"] != "footer" {
		t.Fatalf("footer: %v", ref.Footer)
	}
}

// Ensure an amqp-value body goes both ways.
func TestValueBodyWithStreamClient(t *testing.T) {
	ref := &streamamqp.Message{Value: "a value"}
	b, err := ref.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if m.Body.Kind != BodyValue || m.Body.Value != "a value" {
		t.Fatalf("body: %+v", m.Body)
	}
	m = Message{Body: Body{Kind: BodyValue, Value: Map{{Symbol("k"), []any{int64(1), "two"}}}}}
	if b, err = m.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	var back streamamqp.Message
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"k": []any{int64(1), "two"}}
	if !reflect.DeepEqual(back.Value, want) {
		t.Fatalf("value: got %#v, want %#v", back.Value, want)
	}
}

// Ensure the bytes of a message as RabbitMQ stores one published over
// AMQP 0-9-1 (header, message annotations, properties, application
// properties, data) are what we encode and what the client reads.
func TestMessageGolden(t *testing.T) {
	m := &Message{
		Header: &Header{Set: HeaderDurable | HeaderPriority | HeaderTTL | HeaderFirstAcquirer | HeaderDeliveryCount,
			Durable: true, FirstAcquirer: true, Priority: 0, TTL: 0},
		MessageAnnotations: Map{{Symbol("x-exchange"), ""}, {Symbol("x-routing-key"), "q"}},
		Properties: &Properties{Set: PropMessageID | PropContentType,
			MessageID: "id", ContentType: "text/plain"},
		ApplicationProperties: Map{{"k", "v"}},
		Body:                  Body{Kind: BodyData, Data: [][]byte{[]byte("hi")}},
	}
	m.Header.Set &^= HeaderPriority | HeaderTTL // null in the middle
	want := []byte{
		0x00, 0x53, 0x70, // header
		0xc0, 0x06, 0x05, // list8: size 6, 5 fields
		0x41,             // durable true
		0x40,             // priority null
		0x40,             // ttl null
		0x41,             // first-acquirer true
		0x43,             // delivery-count uint 0
		0x00, 0x53, 0x72, // message-annotations
		0xc1, 0x21, 0x04, // map8: size 33, 2 entries
		0xa3, 0x0a, 'x', '-', 'e', 'x', 'c', 'h', 'a', 'n', 'g', 'e', // sym8 "x-exchange"
		0xa1, 0x00, // str8 ""
		0xa3, 0x0d, 'x', '-', 'r', 'o', 'u', 't', 'i', 'n', 'g', '-', 'k', 'e', 'y', // sym8 "x-routing-key"
		0xa1, 0x01, 'q', // str8 "q"
		0x00, 0x53, 0x73, // properties
		0xc0, 0x16, 0x07, // list8: size 22, 7 fields
		0xa1, 0x02, 'i', 'd', // message-id str8 "id"
		0x40, 0x40, 0x40, 0x40, 0x40, // user-id, to, subject, reply-to, correlation-id null
		0xa3, 0x0a, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n', // content-type sym8
		0x00, 0x53, 0x74, // application-properties
		0xc1, 0x07, 0x02, // map8: size 7, 1 entry
		0xa1, 0x01, 'k', 0xa1, 0x01, 'v', // "k" => "v"
		0x00, 0x53, 0x75, // data
		0xa0, 0x02, 'h', 'i', // vbin8 "hi"
	}
	got, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
	var back Message
	if err := back.UnmarshalBinary(want); err != nil {
		t.Fatal(err)
	}
	back.BodyAndFooter = nil
	if !reflect.DeepEqual(&back, m) {
		t.Fatalf("decoded %+v, want %+v", back, m)
	}
	var ref streamamqp.Message
	if err := ref.UnmarshalBinary(want); err != nil {
		t.Fatal(err)
	}
	if h := ref.Header; h == nil || !h.Durable || !h.FirstAcquirer || h.Priority != 4 {
		t.Fatalf("client header: %+v", h) // null priority reads as the default 4
	}
	if p := ref.Properties; p.MessageID != "id" || p.ContentType != "text/plain" {
		t.Fatalf("client properties: %+v", p)
	}
	if ref.ApplicationProperties["k"] != "v" || ref.Annotations["x-routing-key"] != "q" {
		t.Fatalf("client sections: %v %v", ref.ApplicationProperties, ref.Annotations)
	}
	if len(ref.Data) != 1 || string(ref.Data[0]) != "hi" {
		t.Fatalf("client data: %q", ref.Data)
	}
}

// Ensure malformed messages are refused.
func TestUnmarshalMalformed(t *testing.T) {
	data := []byte{0x00, 0x53, 0x75, 0xa0, 0x01, 'x'}
	value := []byte{0x00, 0x53, 0x77, 0x40}
	tests := []struct {
		name string
		in   []byte
	}{
		{"not described", []byte{0x40}},
		{"unknown descriptor", []byte{0x00, 0x53, 0x99, 0x40}},
		{"repeated header", []byte{0x00, 0x53, 0x70, 0x45, 0x00, 0x53, 0x70, 0x45}},
		{"data then value", append(append([]byte{}, data...), value...)},
		{"two values", append(append([]byte{}, value...), value...)},
		{"data not binary", []byte{0x00, 0x53, 0x75, 0x40}},
		{"header field type", []byte{0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x43}},
		{"properties not a list", []byte{0x00, 0x53, 0x73, 0x41}},
		{"annotations not a map", []byte{0x00, 0x53, 0x72, 0x45}},
		{"truncated", data[:5]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			if err := m.UnmarshalBinary(tc.in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

// Ensure symbolic section descriptors are understood.
func TestSymbolicDescriptors(t *testing.T) {
	b := AppendSymbol([]byte{0x00}, "amqp:data:binary")
	b = AppendBinary(b, []byte("x"))
	var m Message
	if err := m.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if m.Body.Kind != BodyData || string(m.Body.Data[0]) != "x" {
		t.Fatalf("body: %+v", m.Body)
	}
}

func BenchmarkMessage(b *testing.B) {
	m := &Message{
		Header:                &Header{Set: HeaderDurable | HeaderFirstAcquirer | HeaderDeliveryCount, Durable: true, FirstAcquirer: true},
		MessageAnnotations:    Map{{Symbol("x-exchange"), ""}, {Symbol("x-routing-key"), "q"}},
		Properties:            &Properties{Set: PropMessageID | PropContentType, MessageID: "id", ContentType: "text/plain"},
		ApplicationProperties: Map{{"k", "v"}},
		Body:                  Body{Kind: BodyData, Data: [][]byte{bytes.Repeat([]byte("x"), 100)}},
	}
	enc, _ := m.MarshalBinary()
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = m.AppendTo(buf[:0])
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		var d Message
		for b.Loop() {
			_ = d.UnmarshalBinary(enc)
		}
	})
}
