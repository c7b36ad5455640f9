package streamproto

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warren-mq/warren/bench/leanstream"
	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/segment"
)

// BenchmarkPublishConsume is the stream protocol's end-to-end path in one
// process: a publisher sending 100-message frames with up to 20 frames
// unconfirmed, and a consumer on another connection reading from the
// first offset with 10 chunks of credit. The lean client keeps the
// client side light, so the server's per-message cost shows. Reports
// end-to-end msgs/s.
//
// Each size runs over plain TCP and over TLS (TLS 1.3, the server's
// default), one after the other; run the test binary repeatedly
// (-test.count 1) to alternate them, as -count N runs each N times in a
// row.
func BenchmarkPublishConsume(b *testing.B) {
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
			addr, clientTLS := benchServer(b, bc.tls)
			var confirmed atomic.Int64
			signal := make(chan struct{}, 1)
			pub, err := leanstream.DialConfig(b.Context(), leanstream.Config{Addr: addr, TLSConfig: clientTLS,
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
			sub, err := leanstream.DialConfig(b.Context(), leanstream.Config{Addr: addr, TLSConfig: clientTLS})
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
// port for a benchmark and returns its address and, withTLS, the
// listener serves TLS and the client config trusting it is returned.
func benchServer(b *testing.B, withTLS bool) (string, *tls.Config) {
	addr, clientTLS, _ := benchServerBroker(b, withTLS)
	return addr, clientTLS
}

// benchServerBroker is benchServer that also returns the broker.
func benchServerBroker(b *testing.B, withTLS bool) (string, *tls.Config, *queues.Broker) {
	b.Helper()
	br, err := queues.Open(b.TempDir(), queues.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var ln net.Listener
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		br.Close()
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	var clientTLS *tls.Config
	if withTLS {
		ca := testutil.NewCA(b, "bench CA")
		cert := ca.Server(b, "localhost")
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert.TLS}})
		clientTLS = &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	}
	srv, err := NewServer(Config{Broker: br, Advertise: addr, AdvertiseTLS: addr})
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
	return addr, clientTLS, br
}

// BenchmarkReplay is a consumer replaying a stream from first with the
// lean client and 10 chunks of credit (rabbitmq-stream-go-client's
// default), a credit back per chunk: 2,000 chunks of 100 records of
// body bytes (size=100: 10 KB chunks, what the Go client's producer
// makes; size=1000: 100 KB). With credit=1 the client holds one chunk
// of credit, so every chunk waits for its credit: the server is idle
// between two chunks, as with a client slower than the server (the Go
// client), and each chunk pays the server's wake-ups in full. An op is
// one replay of the whole stream; msgs/s is the replay rate,
// cpu-ns/msg the process's CPU time (client and server) per replayed
// message.
func BenchmarkReplay(b *testing.B) {
	const chunks, perChunk = 2000, 100
	for _, bc := range []struct {
		size   int
		credit uint16
	}{{100, 10}, {1000, 10}, {100, 1}} {
		size := bc.size
		name := fmt.Sprintf("chunk=%dKB", size*perChunk/1000)
		if bc.credit != 10 {
			name += fmt.Sprintf("/credit=%d", bc.credit)
		}
		b.Run(name, func(b *testing.B) {
			addr, _, br := benchServerBroker(b, false)
			if err := br.CreateStream("/", "replay", nil); err != nil {
				b.Fatal(err)
			}
			st, err := br.Stream("/", "replay")
			if err != nil {
				b.Fatal(err)
			}
			msgs := make([]osiris.Message, perChunk)
			for i := range msgs {
				msgs[i] = osiris.Message{Entry: segment.AppendSimpleEntry(nil, bytes.Repeat([]byte{'r'}, size))}
			}
			for range chunks {
				if _, err := st.Append(b.Context(), "", msgs...); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(chunks * perChunk * size))
			b.ReportAllocs()
			var cpu0 time.Duration
			for i := 0; b.Loop(); i++ {
				if i == 0 {
					cpu0 = processCPU() // b.Loop reset the timer: the setup is not counted
				}
				sub, err := leanstream.DialConfig(b.Context(), leanstream.Config{Addr: addr})
				if err != nil {
					b.Fatal(err)
				}
				var got atomic.Int64
				done := make(chan struct{})
				err = sub.Subscribe(1, "replay", leanstream.First(), bc.credit, func(c *leanstream.Chunk) {
					sub.Credit(1, 1)
					if got.Add(int64(c.NumRecords)) == chunks*perChunk {
						close(done)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				<-done
				sub.Close()
			}
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(b.N*chunks*perChunk)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*chunks*perChunk), "cpu-ns/msg")
		})
	}
}

// processCPU is the process's user and system CPU time so far: in a
// benchmark with client and server in one process, what a change saves
// shows here even when the wall time is bound by the client or the
// machine's other load.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
