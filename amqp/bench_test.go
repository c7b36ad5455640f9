package amqp

import (
	"context"
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/internal/tlsconf"
)

// BenchmarkClassic1p1c is issue 7's benchmark shape in one process: one
// publisher with confirms (up to 1000 in flight), one consumer with
// prefetch 1000 acking every 100 with multiple=true, persistent messages
// in a durable classic queue. Reports end-to-end msgs/s.
//
// Each size runs over plain TCP and over TLS (TLS 1.3), one after the
// other; run the test binary repeatedly (-test.count 1) to alternate
// them, as -count N runs each N times in a row.
func BenchmarkClassic1p1c(b *testing.B) {
	for _, bc := range []struct {
		size int
		tls  bool
	}{{16, false}, {16, true}, {1024, false}, {1024, true}} {
		size := bc.size
		name := fmt.Sprintf("%dB/tcp", size)
		if bc.tls {
			name = fmt.Sprintf("%dB/tls", size)
		}
		b.Run(name, func(b *testing.B) {
			var dial func() (*amqp091.Connection, error)
			if bc.tls {
				tb := startTLSBroker(b, tlsconf.Options{}, Config{})
				dial = func() (*amqp091.Connection, error) {
					return amqp091.DialTLS("amqps://guest:guest@"+tb.addr+"/", tb.clientTLS(b, ""))
				}
			} else {
				tb := startBroker(b, brokerOpts{})
				dial = func() (*amqp091.Connection, error) { return amqp091.Dial(tb.url()) }
			}
			pc, err := dial()
			if err != nil {
				b.Fatal(err)
			}
			defer pc.Close()
			cc, err := dial()
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			pch, _ := pc.Channel()
			cch, _ := cc.Channel()
			q := fmt.Sprintf("bench-%d", size)
			if _, err := pch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			pch.Confirm(false)
			confirms := pch.NotifyPublish(make(chan amqp091.Confirmation, 2000))
			cch.Qos(1000, 0, false)
			ds, err := cch.Consume(q, "", false, false, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, size)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 1; i <= b.N; i++ {
					d := <-ds
					if i%100 == 0 || i == b.N {
						d.Ack(true)
					}
				}
			}()
			b.SetBytes(int64(size))
			b.ResetTimer()
			inflight := 0
			for i := 0; i < b.N; i++ {
				for inflight >= 1000 {
					<-confirms
					inflight--
				}
				if err := pch.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{DeliveryMode: 2, Body: body}); err != nil {
					b.Fatal(err)
				}
				inflight++
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
