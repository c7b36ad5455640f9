package streamproto

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/warren-mq/warren/bench/leanstream"
	"github.com/warren-mq/warren/queues"
)

// BenchmarkPublishConsume is the stream protocol's end-to-end path in one
// process: a publisher sending 100-message frames with up to 20 frames
// unconfirmed, and a consumer on another connection reading from the
// first offset with 10 chunks of credit. The lean client keeps the
// client side light, so the server's per-message cost shows. Reports
// end-to-end msgs/s.
func BenchmarkPublishConsume(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			addr := benchServer(b)
			var confirmed atomic.Int64
			signal := make(chan struct{}, 1)
			pub, err := leanstream.DialConfig(b.Context(), leanstream.Config{Addr: addr,
				OnConfirm: func(_ uint8, ids []uint64) {
					confirmed.Add(int64(len(ids)))
					select {
					case signal <- struct{}{}:
					default:
					}
				}})
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			sub, err := leanstream.Dial(addr, "guest", "guest", "/")
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			if err := pub.Create("bench", nil); err != nil {
				b.Fatal(err)
			}
			if err := pub.DeclarePublisher(1, "", "bench"); err != nil {
				b.Fatal(err)
			}
			var consumed atomic.Int64
			done := make(chan struct{})
			n := int64(b.N)
			err = sub.Subscribe(1, "bench", leanstream.First(), 10, func(c *leanstream.Chunk) {
				sub.Credit(1, 1)
				if consumed.Add(int64(c.NumRecords)) >= n {
					select {
					case <-done:
					default:
						close(done)
					}
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			body := make([]byte, size)
			var batch leanstream.Batch
			b.SetBytes(int64(size))
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				for int64(sent)-confirmed.Load() >= 2000 {
					<-signal
				}
				batch.Reset()
				for i := 0; i < 100 && sent < b.N; i++ {
					batch.Add(uint64(sent), body)
					sent++
				}
				if err := pub.Publish(1, &batch); err != nil {
					b.Fatal(err)
				}
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// benchServer starts a broker with a stream listener on a free loopback
// port for a benchmark and returns its address.
func benchServer(b *testing.B) string {
	b.Helper()
	br, err := queues.Open(b.TempDir(), queues.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		br.Close()
		b.Fatal(err)
	}
	srv, err := NewServer(Config{Broker: br, Advertise: ln.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	b.Cleanup(func() {
		srv.Close()
		<-done
		br.Close()
	})
	return ln.Addr().String()
}
