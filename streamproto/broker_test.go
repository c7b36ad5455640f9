package streamproto

import (
	"cmp"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
)

// testBroker is a broker with a stream server on a free loopback port.
type testBroker struct {
	dir    string
	broker *queues.Broker
	srv    *Server
	addr   string // host:port of the stream listener
	// tlsAddr is the TLS listener's host:port, with brokerOpts.tls.
	tlsAddr string
	host    string
	port    int
	done    chan error
}

type brokerOpts struct {
	dir       string // reuse a data directory (restart tests)
	heartbeat uint32
	frameMax  uint32
	stream    osiris.Options
	// tls, if set, adds a TLS listener, advertised to TLS clients.
	tls       *tls.Config
	sasl      sasl.Config
	certLogin tlsconf.CertLogin
	// connectionMax is the server's ConnectionMax.
	connectionMax int
	// listenIP is the plain listener's address; 127.0.0.1 when empty.
	listenIP string
	// silentClose and handshake are the server's SilentCloseDelay
	// (0: none in tests) and HandshakeTimeout.
	silentClose time.Duration
	handshake   time.Duration
	// publishCredit is the server's PublishCredit (0: the default).
	publishCredit int64
}

// startBroker starts a broker; it is stopped at the end of the test.
func startBroker(t *testing.T, o brokerOpts) *testBroker {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	b, err := queues.Open(o.dir, queues.Options{StreamOptions: o.stream})
	if err != nil {
		t.Fatalf("queues.Open: %v", err)
	}
	ip := cmp.Or(o.listenIP, "127.0.0.1")
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	tb := &testBroker{dir: o.dir, broker: b, addr: ln.Addr().String(), done: make(chan error, 1)}
	tb.host = ip
	tb.port = ln.Addr().(*net.TCPAddr).Port
	var tln net.Listener
	if o.tls != nil {
		if tln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			b.Close()
			t.Fatal(err)
		}
		tb.tlsAddr = tln.Addr().String()
	}
	silent := o.silentClose
	if silent == 0 {
		silent = -1 // refusals answer at once in tests
	}
	tb.srv, err = NewServer(Config{Broker: b, Advertise: tb.addr, Heartbeat: o.heartbeat, FrameMax: o.frameMax,
		AdvertiseTLS: tb.tlsAddr, SASL: o.sasl, CertLogin: o.certLogin, ConnectionMax: o.connectionMax, SilentCloseDelay: silent, HandshakeTimeout: o.handshake,
		PublishCredit: o.publishCredit})
	if err != nil {
		t.Fatal(err)
	}
	go func() { tb.done <- tb.srv.Serve(ln) }()
	if tln != nil {
		go tb.srv.Serve(tls.NewListener(tln, o.tls))
	}
	t.Cleanup(tb.stop)
	return tb
}

// stop shuts the broker down (idempotent).
func (tb *testBroker) stop() {
	if tb.srv == nil {
		return
	}
	tb.srv.Close()
	<-tb.done
	tb.broker.Close()
	tb.srv = nil
}
