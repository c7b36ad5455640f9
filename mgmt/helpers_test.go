package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/amqp1"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
	"github.com/warren-mq/warren/superstream"
)

// wait bounds every wait for the broker in these tests.
const wait = 10 * time.Second

// testBroker is a broker with the AMQP, stream and HTTP listeners on free
// loopback ports.
type testBroker struct {
	t                  testing.TB
	b                  *queues.Broker
	api                *Server
	amqpAddr, streamAd string
	url                string
	stops              []func()
}

func startBroker(t testing.TB) *testBroker {
	t.Helper()
	return startBrokerWith(t, brokerOpts{})
}

// brokerOpts are test hooks and limits for startBrokerWith.
type brokerOpts struct {
	stream        osiris.Options                               // the broker's StreamOptions (BeforeCycle)
	publishCredit int64                                        // both front ends' PublishCredit (0: the default)
	peers         func() []Peer                                // Config.Peers
	forget        func(ctx context.Context, node string) error // Config.Forget
}

func startBrokerWith(t testing.TB, o brokerOpts) *testBroker {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("WARREN_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := queues.Open(t.TempDir(), queues.Options{Logger: logger, StreamOptions: o.stream})
	if err != nil {
		t.Fatal(err)
	}
	tb := &testBroker{t: t, b: b}
	tb.stops = append(tb.stops, func() { b.Close() })
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.stop()
			t.Fatal(err)
		}
		return ln
	}
	super := superstream.NewManager(b)
	aln, sln, hln := listen(), listen(), listen()
	asrv := amqp.NewServer(amqp.Config{Broker: b, Logger: logger, PublishCredit: o.publishCredit,
		AMQP10: amqp1.NewServer(amqp1.Config{Broker: b, Logger: logger, SilentCloseDelay: -1}).Handoff})
	ssrv, err := streamproto.NewServer(streamproto.Config{Broker: b, Logger: logger, Advertise: sln.Addr().String(), SuperStreams: super, SilentCloseDelay: -1,
		PublishCredit: o.publishCredit})
	if err != nil {
		t.Fatal(err)
	}
	tb.api = New(Config{
		Broker: b, SuperStreams: super, ConsumerGroups: ssrv.ConsumerGroups, Logger: logger, Node: "warren@test",
		StatsInterval: -1, // the tests take the samples
		Peers:         o.peers,
		Forget:        o.forget,
		Listeners:     []Listener{{"amqp", aln.Addr()}, {"stream", sln.Addr()}, {"http", hln.Addr()}},
	})
	serve := func(srv interface {
		Serve(net.Listener) error
		Close() error
	}, ln net.Listener) {
		done := make(chan struct{})
		go func() { srv.Serve(ln); close(done) }()
		tb.stops = append(tb.stops, func() { srv.Close(); <-done })
	}
	serve(asrv, aln)
	serve(ssrv, sln)
	serve(tb.api, hln)
	tb.amqpAddr, tb.streamAd = aln.Addr().String(), sln.Addr().String()
	tb.url = "http://" + hln.Addr().String()
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) stop() {
	for i := len(tb.stops) - 1; i >= 0; i-- {
		tb.stops[i]()
	}
	tb.stops = nil
}

func (tb *testBroker) amqpURL(user, pass, vhost string) string {
	return "amqp://" + user + ":" + pass + "@" + tb.amqpAddr + "/" + strings.ReplaceAll(vhost, "/", "%2F")
}

// resp is an answer: its status, body and headers.
type resp struct {
	code   int
	body   []byte
	header http.Header
}

func (r resp) json(t testing.TB) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("answer %d is not JSON: %v: %q", r.code, err, r.body)
	}
	return v
}

func (r resp) obj(t testing.TB) map[string]any {
	t.Helper()
	o, ok := r.json(t).(map[string]any)
	if !ok {
		t.Fatalf("answer is not an object: %s", r.body)
	}
	return o
}

func (r resp) list(t testing.TB) []map[string]any {
	t.Helper()
	l, ok := r.json(t).([]any)
	if !ok {
		t.Fatalf("answer is not a list: %s", r.body)
	}
	out := make([]map[string]any, len(l))
	for i, e := range l {
		out[i] = e.(map[string]any)
	}
	return out
}

// call makes a request as user:pass ("" user: no credentials).
func (tb *testBroker) call(method, path, user, pass string, body any, hdr ...string) resp {
	tb.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			tb.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, tb.url+path, rd)
	if err != nil {
		tb.t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: wait}
	res, err := c.Do(req)
	if err != nil {
		tb.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.t.Fatal(err)
	}
	return resp{res.StatusCode, b, res.Header}
}

// guest calls as the default administrator.
func (tb *testBroker) guest(method, path string, body any, hdr ...string) resp {
	tb.t.Helper()
	return tb.call(method, path, "guest", "guest", body, hdr...)
}

// want checks an answer's status and, for errors, its body.
func want(t testing.TB, r resp, code int, errBody ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d: %s", r.code, code, r.body)
	}
	if len(errBody) == 2 {
		o := r.obj(t)
		if o["error"] != errBody[0] || o["reason"] != errBody[1] {
			t.Fatalf("error body %s, want error %q reason %q", r.body, errBody[0], errBody[1])
		}
	}
}

func num(t testing.TB, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%v: %v", v, err)
	}
	return i
}

func names(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it["name"].(string)
	}
	return out
}
