package mgmt

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/queues"
)

// BenchmarkListQueues10k answers GET /api/queues over 10,000 queues: the
// whole list, and the first page sorted by depth as the console asks.
func BenchmarkListQueues10k(b *testing.B) {
	tb := startBroker(b)
	for i := range 10_000 {
		if _, _, _, err := tb.b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: fmt.Sprintf("q-%05d", i), Durable: true}}); err != nil {
			b.Fatal(err)
		}
	}
	tb.api.rates.tick()
	for _, c := range []struct{ name, query string }{
		{"all", ""},
		{"page-by-messages", "?page=1&page_size=100&sort=messages&sort_reverse=true"},
		{"page-filtered", "?page=1&page_size=100&name=q-09&columns=name,messages,consumers"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				req, _ := http.NewRequest("GET", tb.url+"/api/queues"+c.query, nil)
				req.SetBasicAuth("guest", "guest")
				res, err := http.DefaultClient.Do(req)
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

// BenchmarkPublishWhileScraped publishes 1 KiB transient messages with
// confirms (amqp091-go, 100 in flight) to 100 transient queues in turn,
// with and without a scraper fetching /api/overview and /api/queues
// every second as a monitoring system would: the API must not slow
// publishing. Transient, so that the broker's CPU, which the scraper
// competes for, sets the pace rather than fsync.
func BenchmarkPublishWhileScraped(b *testing.B) {
	for _, scrape := range []bool{false, true} {
		b.Run(fmt.Sprintf("scrape=%v", scrape), func(b *testing.B) {
			tb := startBroker(b)
			for i := range 100 {
				if _, _, _, err := tb.b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: fmt.Sprintf("q-%03d", i)}}); err != nil {
					b.Fatal(err)
				}
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				if !scrape {
					return
				}
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					for _, p := range []string{"/api/overview", "/api/queues"} {
						req, _ := http.NewRequest("GET", tb.url+p, nil)
						req.SetBasicAuth("guest", "guest")
						if res, err := http.DefaultClient.Do(req); err == nil {
							io.Copy(io.Discard, res.Body)
							res.Body.Close()
						}
					}
					select {
					case <-t.C:
					case <-stop:
						return
					}
				}
			}()
			conn, err := amqp091.Dial(tb.amqpURL("guest", "guest", "/"))
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
				err := ch.PublishWithContext(context.Background(), "", fmt.Sprintf("q-%03d", i%100), false, false,
					amqp091.Publishing{Body: body})
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
		})
	}
}
