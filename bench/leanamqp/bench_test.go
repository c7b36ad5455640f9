package leanamqp

import (
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// BenchmarkAppendPublish measures encoding one 100-byte publish into
// the write buffer, as PublishBatch does (writes go to a sink).
func BenchmarkAppendPublish(b *testing.B) {
	c := newConn(sinkConn{}, Config{Timeout: time.Second})
	body := make([]byte, 100)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for i := 0; b.Loop(); i++ {
		c.appendPublishLocked("", "perf-queue", true, body)
		if i%100 == 99 {
			c.wbuf = c.wbuf[:0]
		}
	}
}

// BenchmarkPublishBatch measures PublishBatch of 100 messages per op
// into a sink connection, per message.
func BenchmarkPublishBatch(b *testing.B) {
	c := newConn(sinkConn{}, Config{Timeout: time.Second})
	body := make([]byte, 100)
	fill := func(i int, body []byte) { body[0] = byte(i) }
	b.ReportAllocs()
	for b.Loop() {
		if err := c.PublishBatch("", "perf-queue", false, body, 100, fill); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/msg")
}

// cyclicReader replays data forever.
type cyclicReader struct {
	data []byte
	off  int
}

func (r *cyclicReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

// BenchmarkDeliveryParse measures reading and assembling one delivery
// of a 100-byte body (method, header and body frames) and calling the
// delivery callback.
func BenchmarkDeliveryParse(b *testing.B) {
	body := make([]byte, 100)
	var stream []byte
	for i := range 64 {
		out := wire.AppendMethodFrame(nil, 1, &wire.BasicDeliver{ConsumerTag: "perf-0", DeliveryTag: uint64(i + 1), RoutingKey: "perf-queue"})
		out = wire.AppendHeaderFrame(out, 1, wire.ClassBasic, uint64(len(body)), []byte{0x10, 0, 2})
		stream = append(stream, wire.AppendBodyFrames(out, 1, body, 0)...)
	}
	var got int
	c := newConn(sinkConn{}, Config{Timeout: time.Second,
		OnDelivery: func(tag uint64, redelivered bool, body []byte) { got += len(body) }})
	c.fr = wire.NewFrameReader(&cyclicReader{data: stream}, DefaultFrameMax+wire.FrameOverhead)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		for range 3 {
			f, err := c.fr.ReadFrame(c.frameMax)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.handle(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	if got == 0 {
		b.Fatal("no deliveries")
	}
}
