package msgconv

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqp10"
)

func props091(t *testing.T, p wire.Properties) []byte {
	t.Helper()
	b, err := wire.AppendProperties(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Ensure an AMQP 0-9-1 message converts to the bytes RabbitMQ stores:
// mc_amqpl:convert_to(mc_amqp) then mc_amqp:protocol_state, encoded by
// amqp10_binary_generator.
func TestStreamConvertGolden(t *testing.T) {
	props := props091(t, wire.Properties{
		Flags:       wire.FlagContentType | wire.FlagDeliveryMode | wire.FlagMessageID | wire.FlagHeaders,
		ContentType: "text/plain", DeliveryMode: 2, MessageID: "id",
		Headers: wire.Table{"a": "b", "x-f": int64(1)},
	})
	got, filter, err := AppendAMQP10(nil, "ex", "rk", props, []byte("hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x00, 0x53, 0x70, // header
		0xc0, 0x06, 0x05, // list8, size 6, 5 fields
		0x41,       // durable: delivery-mode 2
		0x40, 0x40, // priority, ttl: absent
		0x41,             // first-acquirer true
		0x43,             // delivery-count 0
		0x00, 0x53, 0x72, // message-annotations
		0xc1, 0x2b, 0x06, // map8, size 43, 3 entries
		0xa3, 0x0a, 'x', '-', 'e', 'x', 'c', 'h', 'a', 'n', 'g', 'e', 0xa1, 0x02, 'e', 'x',
		0xa3, 0x0d, 'x', '-', 'r', 'o', 'u', 't', 'i', 'n', 'g', '-', 'k', 'e', 'y', 0xa1, 0x02, 'r', 'k',
		0xa3, 0x03, 'x', '-', 'f', 0x55, 0x01, // the x- header, a long
		0x00, 0x53, 0x73, // properties
		0xc0, 0x16, 0x07, // list8, size 22, 7 fields
		0xa1, 0x02, 'i', 'd', // message-id
		0x40, 0x40, 0x40, 0x40, 0x40, // user-id, to, subject, reply-to, correlation-id
		0xa3, 0x0a, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n', // content-type, a symbol
		0x00, 0x53, 0x74, // application-properties
		0xc1, 0x07, 0x02, 0xa1, 0x01, 'a', 0xa1, 0x01, 'b',
		0x00, 0x53, 0x75, 0xa0, 0x02, 'h', 'i', // data
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
	if filter != nil {
		t.Fatalf("filter %q", filter)
	}
	// The stream client reads it.
	var m streamamqp.Message
	if err := m.UnmarshalBinary(got); err != nil {
		t.Fatal(err)
	}
	if m.Properties.ContentType != "text/plain" || m.ApplicationProperties["a"] != "b" || m.Annotations["x-f"] != int64(1) || string(m.GetData()) != "hi" {
		t.Fatalf("client read %+v", m)
	}
}

// Ensure the filter value comes from a UTF-8 x-stream-filter-value
// header only.
func TestStreamConvertFilterValue(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []byte
	}{
		{"red", []byte("red")},
		{"", []byte{}},
		{int32(1), nil},
		{"a\x00b", nil},
		{[]byte("red"), nil},
	} {
		props := props091(t, wire.Properties{Flags: wire.FlagHeaders, Headers: wire.Table{"x-stream-filter-value": tc.v}})
		_, f, err := AppendAMQP10(nil, "", "s", props, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f, tc.want) || (f == nil) != (tc.want == nil) {
			t.Fatalf("%#v: filter %q, want %q", tc.v, f, tc.want)
		}
	}
}

// deliver10 encodes m and converts it for a 0-9-1 consumer at offset 7
// of stream "s".
func deliver10(t *testing.T, m *amqp10.Message) (Delivery, wire.Properties) {
	t.Helper()
	rec, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	d := StreamRecordTo091(rec, 7, "s", nil)
	p, err := wire.ParseProperties(d.Props)
	if err != nil {
		t.Fatal(err)
	}
	return d, p
}

// Ensure AMQP 1.0 messages convert for AMQP 0-9-1 consumers as
// mc_amqpl:convert_from does.
func TestStreamConvertDeliver(t *testing.T) {
	data := amqp10.Body{Kind: amqp10.BodyData, Data: [][]byte{[]byte("a"), []byte("b")}}
	uuid := amqp10.UUID{0x0f, 0x8f, 0xad, 0x5b, 0xd9, 0xcb, 0x46, 0x9f, 0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e}
	long := string(bytes.Repeat([]byte("i"), 300))

	t.Run("ids", func(t *testing.T) {
		d, p := deliver10(t, &amqp10.Message{
			Properties: &amqp10.Properties{Set: amqp10.PropMessageID | amqp10.PropCorrelationID, MessageID: uuid, CorrelationID: uint64(99)},
			Body:       data,
		})
		if p.MessageID != "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e" || p.CorrelationID != "99" || string(d.Body) != "ab" {
			t.Fatalf("%+v body %q", p, d.Body)
		}
		_, p = deliver10(t, &amqp10.Message{
			Properties: &amqp10.Properties{Set: amqp10.PropMessageID | amqp10.PropCorrelationID, MessageID: []byte{1, 2}, CorrelationID: long},
			Body:       data,
		})
		if p.Flags&(wire.FlagMessageID|wire.FlagCorrelationID) != 0 ||
			!bytes.Equal(p.Headers["x-message-id"].([]byte), []byte{1, 2}) || p.Headers["x-correlation-id"] != long {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("x-basic fallbacks", func(t *testing.T) {
		_, p := deliver10(t, &amqp10.Message{
			MessageAnnotations: amqp10.Map{
				{Key: amqp10.Symbol("x-basic-delivery-mode"), Value: uint8(2)},
				{Key: amqp10.Symbol("x-basic-priority"), Value: uint8(5)},
				{Key: amqp10.Symbol("x-basic-expiration"), Value: "1000"},
				{Key: amqp10.Symbol("x-basic-type"), Value: "kind"},
			},
			Body: data,
		})
		if p.DeliveryMode != 2 || p.Priority != 5 || p.Expiration != "1000" || p.Type != "kind" || len(p.Headers) != 1 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("header wins", func(t *testing.T) {
		_, p := deliver10(t, &amqp10.Message{
			Header: &amqp10.Header{Set: amqp10.HeaderDurable | amqp10.HeaderPriority | amqp10.HeaderTTL, Durable: false, Priority: 1, TTL: 50},
			MessageAnnotations: amqp10.Map{
				{Key: amqp10.Symbol("x-basic-delivery-mode"), Value: uint8(2)},
				{Key: amqp10.Symbol("x-basic-priority"), Value: uint8(5)},
			},
			Body: data,
		})
		if p.DeliveryMode != 1 || p.Priority != 1 || p.Expiration != "50" {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("headers", func(t *testing.T) {
		ts := amqp10.Timestamp(1_700_000_000_999)
		d, p := deliver10(t, &amqp10.Message{
			MessageAnnotations: amqp10.Map{
				{Key: amqp10.Symbol("x-exchange"), Value: "ex"},
				{Key: amqp10.Symbol("x-routing-key"), Value: "rk"},
				{Key: amqp10.Symbol("x-cc"), Value: []any{"c1", "c2"}},
				{Key: amqp10.Symbol("x-opt-rabbitmq-received-time"), Value: ts},
				{Key: amqp10.Symbol("x-stream-offset"), Value: int64(1000)}, // ours wins
				{Key: amqp10.Symbol("x-death"), Value: "internal"},
				{Key: amqp10.Symbol("x-tbl"), Value: amqp10.Map{{Key: amqp10.Symbol("k"), Value: uint64(3)}}},
				{Key: amqp10.Symbol("not-x"), Value: "dropped"},
				{Key: amqp10.Symbol("x-char"), Value: amqp10.Char('c')}, // no 0-9-1 type
			},
			ApplicationProperties: amqp10.Map{
				{Key: "x-tbl", Value: "annotation wins"},
				{Key: "ts", Value: ts},
				{Key: "bin", Value: []byte("raw")},
				{Key: "u64", Value: uint64(1 << 40)},
				{Key: "sym", Value: amqp10.Symbol("s")},
			},
			Body: data,
		})
		if d.Exchange != "ex" || d.Key != "rk" {
			t.Fatalf("exchange %q key %q", d.Exchange, d.Key)
		}
		want := wire.Table{
			"x-stream-offset": int64(7), "CC": []any{"c1", "c2"}, "timestamp_in_ms": int64(ts),
			"x-tbl": wire.Table{"k": int64(3)}, "ts": time.Unix(1_700_000_000, 0).UTC(), "bin": []byte("raw"),
			"u64": int64(1 << 40), "sym": "s",
		}
		if !reflect.DeepEqual(p.Headers, want) {
			t.Fatalf("headers\n got %#v\nwant %#v", p.Headers, want)
		}
	})
	t.Run("properties", func(t *testing.T) {
		_, p := deliver10(t, &amqp10.Message{
			Properties: &amqp10.Properties{
				Set:    amqp10.PropUserID | amqp10.PropReplyTo | amqp10.PropContentType | amqp10.PropContentEncoding | amqp10.PropCreationTime | amqp10.PropGroupID | amqp10.PropSubject | amqp10.PropTo,
				UserID: []byte("u"), ReplyTo: "/queues/a%20b", ContentType: "ct", ContentEncoding: "ce",
				CreationTime: 1_500, GroupID: "g", Subject: "dropped", To: "dropped",
			},
			Body: data,
		})
		if p.UserID != "u" || p.ReplyTo != "a b" || p.ContentType != "ct" || p.ContentEncoding != "ce" ||
			p.Timestamp != 1 || p.AppID != "g" {
			t.Fatalf("%+v", p)
		}
		_, p = deliver10(t, &amqp10.Message{Properties: &amqp10.Properties{Set: amqp10.PropReplyTo, ReplyTo: "/exchanges/x"}, Body: data})
		if p.ReplyTo != "/exchanges/x" {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("amqp-value body", func(t *testing.T) {
		m := &amqp10.Message{
			MessageAnnotations: amqp10.Map{{Key: amqp10.Symbol("x-basic-type"), Value: "ignored"}},
			Body:               amqp10.Body{Kind: amqp10.BodyValue, Value: "v"},
			Footer:             amqp10.Map{{Key: amqp10.Symbol("f"), Value: true}},
		}
		d, p := deliver10(t, m)
		want, _ := (&amqp10.Message{Body: m.Body, Footer: m.Footer}).MarshalBinary()
		if p.Type != "amqp-1.0" || !bytes.Equal(d.Body, want) {
			t.Fatalf("type %q body % x", p.Type, d.Body)
		}
		// Published back over 0-9-1 with that type, the sections are the
		// body again.
		out, _, err := AppendAMQP10(nil, "", "s", d.Props, d.Body)
		if err != nil {
			t.Fatal(err)
		}
		var back amqp10.Message
		if err := back.UnmarshalBinary(out); err != nil || back.Body.Kind != amqp10.BodyValue || back.Body.Value != "v" {
			t.Fatalf("back: %+v %v", back.Body, err)
		}
	})
	t.Run("not AMQP 1.0", func(t *testing.T) {
		d := StreamRecordTo091([]byte("raw bytes"), 3, "s", nil)
		p, err := wire.ParseProperties(d.Props)
		if err != nil {
			t.Fatal(err)
		}
		if string(d.Body) != "raw bytes" || d.Key != "s" || !reflect.DeepEqual(p.Headers, wire.Table{"x-stream-offset": int64(3)}) {
			t.Fatalf("%+v %+v", d, p)
		}
	})
}

// Ensure reply-to quoting is uri_string:quote's and round trips.
func TestStreamConvertReplyTo(t *testing.T) {
	for in, want := range map[string]string{
		"q":                     "q",
		"a b/c":                 "a%20b%2Fc",
		"amq.rabbitmq.reply-to": "amq.rabbitmq.reply-to",
		"é~_":                   "%C3%A9~_",
	} {
		if got := quoteURI(in); got != want {
			t.Fatalf("quote(%q) = %q, want %q", in, got, want)
		}
		if back, ok := unquoteURI(want); !ok || back != in {
			t.Fatalf("unquote(%q) = %q, %v", want, back, ok)
		}
	}
	if _, ok := unquoteURI("a%2"); ok {
		t.Fatal("bad escape accepted")
	}
}

func BenchmarkStreamConvert(b *testing.B) {
	props, _ := wire.AppendProperties(nil, &wire.Properties{
		Flags:       wire.FlagContentType | wire.FlagDeliveryMode | wire.FlagHeaders,
		ContentType: "text/plain", DeliveryMode: 2, Headers: wire.Table{"k": "v", "n": int32(1)},
	})
	body := bytes.Repeat([]byte("x"), 100)
	rec, _, _ := AppendAMQP10(nil, "ex", "rk", props, body)
	b.Run("publish", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf, _, _ = AppendAMQP10(buf[:0], "ex", "rk", props, body)
		}
	})
	b.Run("deliver", func(b *testing.B) {
		b.ReportAllocs()
		var pb []byte
		for b.Loop() {
			d := StreamRecordTo091(rec, 1, "s", pb)
			pb = d.Props[:0]
		}
	})
}
