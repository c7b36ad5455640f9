package prom_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/mgmt/mgmttest"
	"github.com/warren-mq/warren/queues"
)

// BenchmarkPublishWhileScraped publishes 1 KiB transient messages with
// confirms (amqp091-go, 100 in flight) to 100 transient queues in turn,
// with and without Prometheus scraping /metrics and
// /metrics/per-object every second: the endpoint must not slow
// publishing. Transient, so that the broker's CPU, which a scrape
// competes for, sets the pace rather than fsync.
func BenchmarkPublishWhileScraped(b *testing.B) {
	for _, scrape := range []bool{false, true} {
		b.Run(fmt.Sprintf("scrape=%v", scrape), func(b *testing.B) {
			tb := mgmttest.Start(b)
			for i := range 100 {
				if _, _, _, err := tb.Broker.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: fmt.Sprintf("q-%03d", i)}}); err != nil {
					b.Fatal(err)
				}
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			scrapes := 0
			go func() {
				defer close(done)
				if !scrape {
					return
				}
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					for _, p := range []string{"/metrics", "/metrics/per-object"} {
						if res, err := http.Get(tb.MetricsURL + p); err == nil {
							io.Copy(io.Discard, res.Body)
							res.Body.Close()
							scrapes++
						}
					}
					select {
					case <-t.C:
					case <-stop:
						return
					}
				}
			}()
			conn, err := amqp091.Dial(amqpURL(tb))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				b.Fatal(err)
			}
			if err := ch.Confirm(false); err != nil {
				b.Fatal(err)
			}
			confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 256))
			body := make([]byte, 1024)
			inflight := 0
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := range b.N {
				if inflight == 100 {
					<-confirms
					inflight--
				}
				err := ch.PublishWithContext(context.Background(), "", fmt.Sprintf("q-%03d", i%100), false, false, amqp091.Publishing{Body: body})
				if err != nil {
					b.Fatal(err)
				}
				inflight++
			}
			for ; inflight > 0; inflight-- {
				<-confirms
			}
			b.StopTimer()
			close(stop)
			<-done
			b.ReportMetric(float64(scrapes), "scrapes")
		})
	}
}

// BenchmarkScrape10k answers a scrape of a node with 10,000 queues:
// the aggregated /metrics and the per-object one.
func BenchmarkScrape10k(b *testing.B) {
	tb := mgmttest.Start(b)
	for i := range 10_000 {
		if _, _, _, err := tb.Broker.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: fmt.Sprintf("q-%05d", i), Durable: true}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range []string{"/metrics", "/metrics/per-object"} {
		b.Run(p, func(b *testing.B) {
			var n int64
			for b.Loop() {
				res, err := http.Get(tb.MetricsURL + p)
				if err != nil {
					b.Fatal(err)
				}
				n, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
			b.ReportMetric(float64(n), "bytes/answer")
		})
	}
}
