// Package mgmttest starts a whole Warren in a test: the model, AMQP
// 0-9-1, the stream protocol, the management API and the Prometheus
// endpoint on free loopback ports, for tests of programs that talk to the API (warrenctl).
package mgmttest

import (
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/mgmt"
	"github.com/warren-mq/warren/mgmt/prom"
	"github.com/warren-mq/warren/queues"
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

	stops []func()
}

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
	tb := &Broker{Broker: b}
	tb.stops = append(tb.stops, func() { b.Close() })
	t.Cleanup(tb.stop)
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
	asrv := amqp.NewServer(amqp.Config{Broker: b, Logger: logger})
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
