package amqp

import (
	"context"
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkClassic1p1c is issue 7's benchmark shape in one process: one
// publisher with confirms (up to 1000 in flight), one consumer with
// prefetch 1000 acking every 100 with multiple=true, persistent messages
// in a durable classic queue. Reports end-to-end msgs/s.
func BenchmarkClassic1p1c(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			tb := startBroker(b, brokerOpts{})
			pc, err := amqp091.Dial(tb.url())
			if err != nil {
				b.Fatal(err)
			}
			defer pc.Close()
			cc, err := amqp091.Dial(tb.url())
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
