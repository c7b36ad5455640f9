package msgconv

import (
	"testing"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqptab"
)

// Stream records come from disk and from any stream client: converting
// one for an AMQP 0-9-1 consumer must not fail, and its properties must
// be valid 0-9-1.
func FuzzStreamDeliver(f *testing.F) {
	props, _ := wire.AppendProperties(nil, &wire.Properties{
		Flags: wire.FlagContentType | wire.FlagHeaders | wire.FlagMessageID, ContentType: "t", MessageID: "m",
		Headers: wire.Table{"k": "v", "x-a": []any{int32(1)}, "CC": []any{"c"}, "d": amqptab.Decimal{Scale: 2, Value: 7},
			"t": wire.Table{"b": []byte{1}}},
	})
	rec, _, _ := AppendAMQP10(nil, "ex", "rk", props, []byte("body"))
	f.Add(rec)
	v, _ := (&amqp10.Message{Body: amqp10.Body{Kind: amqp10.BodyValue, Value: amqp10.Map{{Key: "k", Value: amqp10.Array{int64(1)}}}}}).MarshalBinary()
	f.Add(v)
	f.Add([]byte("not amqp"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		d := StreamRecordTo091(rec, 42, "s", nil)
		p, err := wire.ParseProperties(d.Props)
		if err != nil {
			t.Fatalf("properties do not parse: %v", err)
		}
		if p.Headers["x-stream-offset"] != int64(42) {
			t.Fatalf("x-stream-offset %#v", p.Headers["x-stream-offset"])
		}
	})
}

// Any properties the publish path accepts convert to an AMQP 1.0
// message that decodes, with the body intact.
func FuzzStreamPublish(f *testing.F) {
	props, _ := wire.AppendProperties(nil, &wire.Properties{
		Flags:       wire.FlagContentType | wire.FlagHeaders | wire.FlagCorrelationID | wire.FlagTimestamp | wire.FlagReplyTo,
		ContentType: "t", CorrelationID: "urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e", Timestamp: 5, ReplyTo: "r q",
		Headers: wire.Table{"k": "v", "x-stream-filter-value": "f", "t": wire.Table{"n": nil}},
	})
	f.Add(props, []byte("body"))
	props, _ = wire.AppendProperties(nil, &wire.Properties{Flags: wire.FlagHeaders,
		Headers: wire.Table{"d": amqptab.Decimal{Scale: 3, Value: 1 << 31}, "x-t": wire.Table{"d": amqptab.Decimal{}}, "a": []any{[]byte{0}}}})
	f.Add(props, []byte("body"))
	f.Fuzz(func(t *testing.T, props, body []byte) {
		if _, err := wire.ScanProperties(props); err != nil {
			return
		}
		out, _, err := AppendAMQP10(nil, "ex", "rk", props, body)
		if err != nil {
			return
		}
		var m amqp10.Message
		if err := m.UnmarshalBinary(out); err != nil {
			t.Fatalf("converted message does not decode: %v\n% x", err, out)
		}
		d := StreamRecordTo091(out, 0, "s", nil)
		if _, err := wire.ParseProperties(d.Props); err != nil {
			t.Fatal(err)
		}
		if p, _ := wire.ParseProperties(props); p.Type != amqp10Type && string(d.Body) != string(body) {
			t.Fatalf("body %q, want %q", d.Body, body)
		}
	})
}
