// Package mgmttest starts a whole Warren in a test: the model, AMQP
// 0-9-1 and 1.0 (on one port), the stream protocol, the management API
// and the Prometheus endpoint on free loopback ports, for tests of
// programs that talk to the API (warrenctl), with injected memory and
// disk readings for its resource alarms.
package mgmttest

import (
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/amqp1"
	"github.com/warren-mq/warren/mgmt"
	"github.com/warren-mq/warren/mgmt/prom"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
	"github.com/warren-mq/warren/streamproto"
	"github.com/warren-mq/warren/superstream"
)

// Broker is a running Warren; it stops when the test ends.
type Broker struct {
	Broker     *queues.Broker
	API        *mgmt.Server
	AMQPAddr   string // host:port
	StreamAddr string // host:port, also what stream clients are told
	URL        string // the API's base URL, http://host:port
	MetricsURL string // the Prometheus endpoint's base URL, http://host:port

	// Readings are what the broker's alarm monitor reads instead of the
	// process's memory and the disk's free space; Monitor.Check applies
	// a change at once (else the monitor's next reading does). The
	// limits are MemoryLimit and the default free disk limit, 50 MB.
	Readings *Readings
	Monitor  *alarm.Monitor

	stops []func()
}

// Readings are injected memory and disk readings, in bytes.
type Readings struct {
	MemUsed, DiskFree atomic.Uint64
}

// The test broker's alarm limits and its readings at start (well within
// them).
const (
	MemoryLimit     = 1 << 30
	StartMemUsed    = 100 << 20
	StartDiskFree   = 100 << 30
	totalTestMemory = 4 << 30
)

// Start starts a Warren with a fresh data directory (WARREN_TEST_LOG=1
// logs to stderr).
func Start(t testing.TB) *Broker {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("WARREN_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	dataDir := t.TempDir()
	b, err := queues.Open(dataDir, queues.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	tb := &Broker{Broker: b, Readings: &Readings{}}
	tb.stops = append(tb.stops, func() { b.Close() })
	t.Cleanup(tb.stop)
	tb.Readings.MemUsed.Store(StartMemUsed)
	tb.Readings.DiskFree.Store(StartDiskFree)
	tb.Monitor, err = alarm.Start(b.Alarms(), alarm.Config{
		Limits:       alarm.Limits{MemoryAbsolute: MemoryLimit},
		ReadMemory:   func() (uint64, error) { return tb.Readings.MemUsed.Load(), nil },
		ReadDiskFree: func() (uint64, error) { return tb.Readings.DiskFree.Load(), nil },
		TotalMemory:  func() (uint64, error) { return totalTestMemory, nil },
		Logger:       logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	tb.stops = append(tb.stops, tb.Monitor.Stop)
	var lns []net.Listener
	for range 4 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		tb.stops = append(tb.stops, func() { ln.Close() })
	}
	aln, sln, hln, pln := lns[0], lns[1], lns[2], lns[3]
	super := superstream.NewManager(b)
	asrv := amqp.NewServer(amqp.Config{Broker: b, Logger: logger,
		AMQP10: amqp1.NewServer(amqp1.Config{Broker: b, Logger: logger, SilentCloseDelay: -1}).Handoff})
	ssrv, err := streamproto.NewServer(streamproto.Config{Broker: b, Logger: logger, Advertise: sln.Addr().String(), SuperStreams: super})
	if err != nil {
		t.Fatal(err)
	}
	tb.API = mgmt.New(mgmt.Config{
		Broker: b, SuperStreams: super, ConsumerGroups: ssrv.ConsumerGroups, Logger: logger, Node: "warren@test",
		Listeners: []mgmt.Listener{{Protocol: "amqp", Addr: aln.Addr()}, {Protocol: "stream", Addr: sln.Addr()}, {Protocol: "http", Addr: hln.Addr()}},
	})
	psrv := prom.New(prom.Config{Broker: b, Node: "warren@test", Logger: logger, DataDir: dataDir})
	for i, srv := range []interface {
		Serve(net.Listener) error
		Close() error
	}{asrv, ssrv, tb.API, psrv} {
		done := make(chan struct{})
		go func() { srv.Serve(lns[i]); close(done) }()
		tb.stops = append(tb.stops, func() { srv.Close(); <-done })
	}
	tb.AMQPAddr, tb.StreamAddr, tb.URL = aln.Addr().String(), sln.Addr().String(), "http://"+hln.Addr().String()
	tb.MetricsURL = "http://" + pln.Addr().String()
	return tb
}

func (tb *Broker) stop() {
	for i := len(tb.stops) - 1; i >= 0; i-- {
		tb.stops[i]()
	}
	tb.stops = nil
}
