package nodenet

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSend measures frames from one node to another over loopback
// TCP, Send to handler, at several payload sizes.
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{64, 1024, 64 << 10} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			var lns [2]net.Listener
			peers := map[string]string{}
			for i, name := range []string{"n1", "n2"} {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				lns[i] = ln
				peers[name] = ln.Addr().String()
			}
			var got atomic.Int64
			up := make(chan struct{}, 1)
			var nets [2]*Net
			for i, name := range []string{"n1", "n2"} {
				n, err := New(Config{Cluster: "bench", Name: name, Peers: peers, Listener: lns[i],
					OnReachable: func(string) { up <- struct{}{} }, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				n.Handle(LaneRaft, func(string, []byte) { got.Add(1) })
				if err := n.Start(); err != nil {
					b.Fatal(err)
				}
				defer n.Close()
				nets[i] = n
			}
			<-up
			payload := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for {
					err := nets[0].Send("n2", LaneRaft, payload)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrQueueFull) {
						b.Fatal(err)
					}
					runtime.Gosched()
				}
			}
			for got.Load() < int64(b.N) {
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
}
