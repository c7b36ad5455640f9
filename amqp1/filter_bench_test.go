package amqp1

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
)

// benchRecord is a stream record as an AMQP 1.0 publisher leaves it:
// annotations, properties, application properties, a 100-byte body.
func benchRecord(b testing.TB, region string, i int) []byte {
	m := amqp10.Message{
		MessageAnnotations: amqp10.Map{
			{Key: amqp10.Symbol("x-exchange"), Value: ""},
			{Key: amqp10.Symbol("x-routing-key"), Value: "s"},
			{Key: amqp10.Symbol("x-stream-filter-value"), Value: region},
		},
		Properties: &amqp10.Properties{Set: amqp10.PropMessageID | amqp10.PropSubject | amqp10.PropContentType,
			MessageID: fmt.Sprintf("id-%d", i), Subject: "order.created", ContentType: "application/json"},
		ApplicationProperties: amqp10.Map{{Key: "region", Value: region}, {Key: "n", Value: int64(i)}},
		Body:                  amqp10.Body{Kind: amqp10.BodyData, Data: [][]byte{make([]byte, 100)}},
	}
	out, err := m.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkPropertyFilterMatch measures the per-message cost of the
// property filter expressions on a stream record.
func BenchmarkPropertyFilterMatch(b *testing.B) {
	rec := benchRecord(b, "eu", 1)
	for _, bc := range []struct {
		name string
		f    amqp10.Described
	}{
		{"app", appFilter(amqp10.Map{{Key: "region", Value: "eu"}})},
		{"props-prefix", propsFilter(amqp10.Map{{Key: amqp10.Symbol("subject"), Value: "&p:order."}})},
		{"app-miss", appFilter(amqp10.Map{{Key: "region", Value: "us"}, {Key: "n", Value: int64(1)}})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, props, app, ok := parsePropertyFilter(bc.f)
			if !ok {
				b.Fatal("filter refused")
			}
			f := &propertyFilter{props: props, app: app}
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				f.match(rec)
			}
		})
	}
}

// countSink counts deliveries and tells done after want.
type countSink struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (s *countSink) Deliver(*queues.Delivery) {
	if s.n.Add(1) == s.want {
		close(s.done)
	}
}

func (s *countSink) Cancelled(*queues.Queue, string) {}

// BenchmarkStreamFilterScan reads a stream of 1001 chunks of 100
// messages, one chunk in 10 holding region "a" (filter value and
// application property), through the consumer an AMQP 1.0 receiver
// gets, until it has the 10,100 "a" messages: with the Bloom filter and
// the application-properties filter (the chunks of "b" are skipped
// unread), with the application-properties filter only (every chunk is
// read and every message matched), and with no filter (every message
// delivered). chunks/op counts the chunks read, msgs-matched/op the
// messages the property filter looked at.
func BenchmarkStreamFilterScan(b *testing.B) {
	const chunks, perChunk = 1001, 100
	tb := startBroker(b, Config{})
	declare(b, tb.channel(b), "s", amqp091.Table{"x-queue-type": "stream"})
	st, ok := tb.broker.LookupStream("/", "s")
	if !ok {
		b.Fatal("no stream")
	}
	for c := range chunks {
		region := "b"
		if c%10 == 0 {
			region = "a"
		}
		msgs := make([]osiris.Message, perChunk)
		for i := range msgs {
			rec := benchRecord(b, region, c*perChunk+i)
			entry := binary.BigEndian.AppendUint32(nil, uint32(len(rec)))
			msgs[i] = osiris.Message{Entry: append(entry, rec...), Filter: []byte(region)}
		}
		done := make(chan osiris.Result, 1)
		if err := st.Submit(&osiris.Batch{Messages: msgs, Done: func(r osiris.Result) { done <- r }}); err != nil {
			b.Fatal(err)
		}
		if r := <-done; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	appA := appFilter(amqp10.Map{{Key: "region", Value: "a"}})
	for _, bc := range []struct {
		name  string
		bloom bool
		prop  bool
		want  int64
	}{
		{"bloom+app", true, true, (chunks/10 + 1) * perChunk},
		{"app-only", false, true, (chunks/10 + 1) * perChunk},
		{"none", false, false, chunks * perChunk},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var matched atomic.Int64
			var match func([]byte) bool
			if bc.prop {
				_, props, app, _ := parsePropertyFilter(appA)
				f := &propertyFilter{props: props, app: app}
				match = func(rec []byte) bool { matched.Add(1); return f.match(rec) }
			}
			args := map[string]any{"x-stream-offset": "first"}
			if bc.bloom {
				args["x-stream-filter"] = "a"
			}
			b.ReportAllocs()
			runs := 0
			for b.Loop() {
				runs++
				sink := &countSink{want: bc.want, done: make(chan struct{})}
				sub, err := tb.broker.Consume("/", "s", queues.ConsumerOptions{
					Tag: "b", Sink: sink, Credited: true, Credit: 1 << 30, Match: match,
				}, args)
				if err != nil {
					b.Fatal(err)
				}
				<-sink.done
				sub.Stop()
			}
			m := float64(matched.Load()) / float64(runs)
			b.ReportMetric(m, "msgs-matched/op")
			chunksRead := m / perChunk
			if !bc.prop {
				chunksRead = float64(bc.want) / perChunk
			}
			b.ReportMetric(chunksRead, "chunks/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs)/float64(bc.want), "ns/delivered")
		})
	}
}
