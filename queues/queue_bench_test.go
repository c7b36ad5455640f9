package queues

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// benchSink acks every 100 deliveries with one Ack (as a client acking
// with multiple=true) and signals when it has seen want.
type benchSink struct {
	q    *Queue
	ids  []uint64
	n    int
	want int
	done chan struct{}
}

func (s *benchSink) Deliver(d *Delivery) {
	s.ids = append(s.ids, d.ID)
	s.n++
	if len(s.ids) == 100 || s.n == s.want {
		s.q.Ack(s.ids...)
		s.ids = s.ids[:0]
	}
	if s.n == s.want {
		close(s.done)
	}
}

func (s *benchSink) Cancelled(*Queue, string) {}

// BenchmarkQueuePublishConsume measures a durable queue with one
// publisher (persistent messages, at most 10,000 unconfirmed) and one
// consumer (prefetch 1000, acking every 100).
func BenchmarkQueuePublishConsume(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			br, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			q, _, _, err := br.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "bench", Durable: true}})
			if err != nil {
				b.Fatal(err)
			}
			rec := EncodeRecord(nil, &Message{Exchange: "", RoutingKey: "bench", Props: []byte{0x10, 0x00, 0x02},
				Body: []byte(strings.Repeat("x", size)), Persistent: true})
			sink := &benchSink{q: q, want: b.N, done: make(chan struct{})}
			if _, err := q.Consume(ConsumerOptions{Tag: "c", Prefetch: 1000, Sink: sink}); err != nil {
				b.Fatal(err)
			}
			window := make(chan struct{}, 10_000)
			confirm := func(err error) {
				if err != nil {
					panic(err)
				}
				<-window
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				window <- struct{}{}
				q.Publish(rec, true, confirm)
			}
			<-sink.done
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}

// BenchmarkFanout measures one publisher (persistent 1 KiB messages, at
// most 1,000 unconfirmed, each confirmed once every queue has it)
// routing to n durable queues, each with a consumer (prefetch 1000,
// acking every 100): stored once with references (bodies.go). It
// reports routed messages (deliveries) per second and the bytes the
// queue and body logs hold per published byte.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{2, 10} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			br, err := Open(dir, Options{BodyReclaimInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			var dsts []Destination
			var sinks []*benchSink
			for i := range n {
				q, _, _, err := br.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: fmt.Sprint("fan", i), Durable: true}})
				if err != nil {
					b.Fatal(err)
				}
				d, _ := br.Destination("/", q.Def().Name)
				dsts = append(dsts, d)
				sink := &benchSink{q: q, want: b.N, done: make(chan struct{})}
				if _, err := q.Consume(ConsumerOptions{Tag: "c", Prefetch: 1000, Sink: sink}); err != nil {
					b.Fatal(err)
				}
				sinks = append(sinks, sink)
			}
			rec := EncodeRecord(nil, &Message{Exchange: "fan", Props: []byte{0x10, 0x00, 0x02},
				Body: []byte(strings.Repeat("x", 1024)), Persistent: true})
			window := make(chan struct{}, 1000)
			type pending struct{ left atomic.Int32 }
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				window <- struct{}{}
				p := &pending{}
				p.left.Store(int32(n))
				Publish(dsts, &Publishing{Record: rec, Persistent: true}, func(err error) {
					if err != nil {
						panic(err)
					}
					if p.left.Add(-1) == 0 {
						<-window
					}
				})
			}
			for _, s := range sinks {
				<-s.done
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "routed/s")
			stored := dirBytes(b, br.testBodyDir("/"))
			for _, d := range dsts {
				stored += dirBytes(b, br.testDir(d.Queue()))
			}
			b.ReportMetric(float64(stored)/float64(b.N*1024), "stored-B/B")
		})
	}
}
