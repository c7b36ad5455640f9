package amqp1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/queues"
)

const wait = 10 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if leaks := testutil.LeakedGoroutines("github.com/Azure/go-amqp", "github.com/rabbitmq/amqp091-go", "warren/amqp1."); leaks != "" {
		fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
		code = 1
	}
	os.Exit(code)
}

// testBroker is a broker with an AMQP listener (0-9-1) that hands AMQP
// 1.0 connections to this package, as the daemon wires them.
type testBroker struct {
	t      testing.TB
	broker *queues.Broker
	srv    *amqp.Server
	addr   string
	done   chan error
}

func startBroker(t testing.TB, cfg Config) *testBroker {
	t.Helper()
	return startBrokerTLS(t, cfg, nil)
}

// startBrokerTLS is startBroker with a TLS listener when tlsCfg is set.
func startBrokerTLS(t testing.TB, cfg Config, tlsCfg *tls.Config) *testBroker {
	t.Helper()
	b, err := queues.Open(t.TempDir(), queues.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	cfg.Broker = b
	if cfg.SilentCloseDelay == 0 {
		cfg.SilentCloseDelay = -1
	}
	var logger *slog.Logger
	if os.Getenv("WARREN_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.Logger = logger
	}
	srv := amqp.NewServer(amqp.Config{Broker: b, Logger: logger, SilentCloseDelay: -1, ConnectionMax: cfg.ConnectionMax, AMQP10: NewServer(cfg).Handoff})
	tb := &testBroker{t: t, broker: b, srv: srv, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { tb.done <- srv.Serve(ln) }()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) stop() {
	tb.srv.Close()
	if err := <-tb.done; err != nil && !errors.Is(err, amqp.ErrServerClosed) {
		tb.t.Errorf("Serve: %v", err)
	}
	if err := tb.broker.Close(); err != nil {
		tb.t.Errorf("broker close: %v", err)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// dial opens an AMQP 1.0 connection as guest, and a session.
func (tb *testBroker) dial(t testing.TB, o *goamqp.ConnOptions) (*goamqp.Conn, *goamqp.Session) {
	t.Helper()
	if o == nil {
		o = &goamqp.ConnOptions{}
	}
	if o.SASLType == nil {
		o.SASLType = goamqp.SASLTypePlain("guest", "guest")
	}
	if o.HostName == "" {
		o.HostName = "vhost:/"
	}
	c, err := goamqp.Dial(ctxT(t), "amqp://"+tb.addr, o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := c.NewSession(ctxT(t), nil)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	return c, s
}

// channel opens an AMQP 0-9-1 connection and channel.
func (tb *testBroker) channel(t testing.TB) *amqp091.Channel {
	t.Helper()
	c, err := amqp091.Dial("amqp://guest:guest@" + tb.addr + "/")
	if err != nil {
		t.Fatalf("dial 0-9-1: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

// counts returns a classic or quorum queue's ready and unacked counts.
func (tb *testBroker) ready(t testing.TB, name string) int {
	t.Helper()
	q, err := tb.broker.Queue("/", name)
	if err != nil {
		t.Fatalf("queue %s: %v", name, err)
	}
	ready, _ := q.Counts()
	return ready
}

// rawConn is a hand-driven AMQP 1.0 client for what go-amqp will not
// send.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	r  *frame.Reader
}

func (tb *testBroker) raw(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(wait))
	return &rawConn{t: t, nc: nc, r: frame.NewReader(bufio.NewReader(nc), 1<<20)}
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

func (rc *rawConn) send(p frame.Performative) {
	rc.t.Helper()
	b, err := frame.AppendFrame(nil, 0, p)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(b)
}

// next reads the next performative that is not a heartbeat.
func (rc *rawConn) next() (frame.Performative, error) {
	for {
		f, err := rc.r.ReadFrame()
		if err != nil {
			return nil, err
		}
		if f.Empty() {
			continue
		}
		p, _, err := frame.Decode(f.Type, f.Body)
		return p, err
	}
}

// open runs SASL PLAIN as guest and open.
func (rc *rawConn) open(o *frame.Open) {
	rc.t.Helper()
	rc.write(frame.AppendProtocolHeader(nil, frame.ProtocolSASL))
	if h, err := rc.r.ReadProtocolHeader(); err != nil || h.ID() != frame.ProtocolSASL {
		rc.t.Fatalf("SASL header: %v %v", h, err)
	}
	if _, err := rc.next(); err != nil { // mechanisms
		rc.t.Fatal(err)
	}
	rc.send(&frame.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00guest\x00guest")})
	if p, err := rc.next(); err != nil || p.(*frame.SASLOutcome).Code != frame.SASLOK {
		rc.t.Fatalf("outcome %#v, %v", p, err)
	}
	rc.write(frame.AppendProtocolHeader(nil, frame.ProtocolAMQP))
	if _, err := rc.r.ReadProtocolHeader(); err != nil {
		rc.t.Fatal(err)
	}
	rc.send(o)
	if p, err := rc.next(); err != nil {
		rc.t.Fatal(err)
	} else if _, ok := p.(*frame.Open); !ok {
		rc.t.Fatalf("got %#v, want open", p)
	}
}

// closeError reads until a close and returns its error.
func (rc *rawConn) closeError() *frame.Error {
	rc.t.Helper()
	for {
		p, err := rc.next()
		if err != nil {
			rc.t.Fatalf("waiting for close: %v", err)
		}
		if c, ok := p.(*frame.Close); ok {
			if c.Error == nil {
				rc.t.Fatal("close without an error")
			}
			return c.Error
		}
	}
}
