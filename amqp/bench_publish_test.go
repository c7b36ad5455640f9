package amqp

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPublishNoConfirm is one publisher without confirms, as fast as
// the client writes, into a transient classic queue or a stream that
// nobody reads: the reader's hot path (parse, route, hand to the log),
// which publisher flow control sits on. It stops the clock when the
// broker has stored every message. Reports msgs/s.
func BenchmarkPublishNoConfirm(b *testing.B) {
	for _, bc := range []struct {
		dest string
		size int
	}{{"transient", 16}, {"transient", 1024}, {"stream", 1024}} {
		b.Run(fmt.Sprintf("%s/%dB", bc.dest, bc.size), func(b *testing.B) {
			tb := startBroker(b, brokerOpts{})
			c, err := amqp091.Dial(tb.url())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil {
				b.Fatal(err)
			}
			q := "bench"
			var stored func() int
			if bc.dest == "stream" {
				if _, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
					b.Fatal(err)
				}
				s, ok := tb.broker.LookupStream("/", q)
				if !ok {
					b.Fatal("no stream")
				}
				stored = func() int { return int(s.CommittedOffset() + 1) }
			} else {
				if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
				qq, err := tb.broker.Queue("/", q)
				if err != nil {
					b.Fatal(err)
				}
				stored = func() int { n, _ := qq.Counts(); return n }
			}
			body := make([]byte, bc.size)
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{Body: body}); err != nil {
					b.Fatal(err)
				}
			}
			for stored() < b.N {
				time.Sleep(100 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
