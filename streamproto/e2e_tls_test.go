package streamproto

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// tlsTestBroker is a broker with plain and TLS stream listeners and the
// CA its certificates come from.
type tlsTestBroker struct {
	*testBroker
	ca *testutil.CA
}

func startTLSTestBroker(t *testing.T, opts tlsconf.Options, loginFrom string) *tlsTestBroker {
	t.Helper()
	return startTLSTestBrokerLogin(t, opts, tlsconf.CertLogin{From: loginFrom})
}

// startTLSTestBrokerLogin is startTLSTestBroker with where EXTERNAL
// takes the user name from.
func startTLSTestBrokerLogin(t *testing.T, opts tlsconf.Options, login tlsconf.CertLogin) *tlsTestBroker {
	t.Helper()
	ca := testutil.NewCA(t, "Warren test CA")
	srv := ca.Server(t, "localhost")
	opts.CACertFile, opts.CertFile, opts.KeyFile = ca.CAFile, srv.CertFile, srv.KeyFile
	r, err := tlsconf.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsTestBroker{startBroker(t, brokerOpts{tls: r.Config(), sasl: withExternal, certLogin: login}), ca}
}

// withExternal is auth_mechanisms with EXTERNAL, as
// rabbitmq_auth_mechanism_ssl's README configures it.
var withExternal = sasl.Config{Mechanisms: []string{sasl.Plain, sasl.AMQPlain, sasl.External}}

// env opens a Go stream client environment over TLS
// (rabbitmq-stream+tls://), with a client certificate for cn unless cn is
// empty and the EXTERNAL mechanism if external.
func (tb *tlsTestBroker) env(t *testing.T, cn string, external bool) (*stream.Environment, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: tb.ca.Pool(), ServerName: "localhost"}
	if cn != "" {
		cfg.Certificates = []tls.Certificate{tb.ca.Client(t, cn).TLS}
	}
	opts := stream.NewEnvironmentOptions().SetUri("rabbitmq-stream+tls://guest:guest@" + tb.tlsAddr + "/").SetTLSConfig(cfg)
	if external {
		opts.SetSaslConfiguration(stream.SaslConfigurationExternal)
	}
	env, err := stream.NewEnvironment(opts)
	if err == nil {
		t.Cleanup(func() { env.Close() })
	}
	return env, err
}

// Ensure the Go stream client publishes and consumes over TLS: the
// producer and consumer connect where Metadata says, which for a TLS
// client is the TLS listener (as stream.advertised_tls_port), and the
// connection is listed with its TLS details.
func TestTLSStreamClient(t *testing.T) {
	tb := startTLSTestBroker(t, tlsconf.Options{}, "")
	env, err := tb.env(t, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.DeclareStream("tls-s", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("tls-s", nil)
	if err != nil {
		t.Fatal(err)
	}
	confirms := p.NotifyPublishConfirmation()
	for i := range 10 {
		if err := p.Send(amqp.NewMessage(fmt.Appendf(nil, "m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 10; {
		for _, c := range <-confirms {
			if !c.IsConfirmed() {
				t.Fatalf("not confirmed: %+v", c)
			}
			n++
		}
	}
	_, sink := e2eSubscribe(t, env, "tls-s", stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if bodies, _ := sink.wait(t, 10); bodies[9] != "m9" {
		t.Fatalf("got %v", bodies)
	}
	for _, c := range tb.broker.Conns() {
		ci := c.Info()
		if !ci.SSL || ci.TLS == nil || ci.TLS.Protocol != "tlsv1.3" || ci.Port != tb.tlsPort(t) {
			t.Errorf("connection %s listed with ssl=%v %+v", ci.Name, ci.SSL, ci.TLS)
		}
	}
}

func (tb *tlsTestBroker) tlsPort(t *testing.T) int {
	_, p, _ := net.SplitHostPort(tb.tlsAddr)
	var port int
	fmt.Sscan(p, &port)
	return port
}

// Ensure SASL EXTERNAL with a client certificate logs the Go stream
// client in as the certificate's name, and an unknown user is refused
// with code 8 (authentication failure), as RabbitMQ's stream plugin does.
func TestTLSStreamExternal(t *testing.T) {
	tb := startTLSTestBroker(t, tlsconf.Options{VerifyPeer: true}, tlsconf.LoginFromCN)
	if _, err := tb.env(t, "alice", true); err == nil || !strings.Contains(err.Error(), "uthentication") {
		t.Fatalf("unknown user: %v, want an authentication failure", err)
	}
	if err := tb.broker.AddUser("alice", "unused"); err != nil {
		t.Fatal(err)
	}
	if err := tb.broker.SetPermissions("alice", "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	env, err := tb.env(t, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.DeclareStream("alice-s", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range tb.broker.Conns() {
		if ci := c.Info(); ci.User != "alice" || ci.AuthMechanism != "EXTERNAL" || ci.TLS.PeerCertSubject != "CN=alice,O=Warren tests" {
			t.Errorf("listed as %q by %s, %+v", ci.User, ci.AuthMechanism, ci.TLS)
		}
	}
}

// Ensure SaslHandshake lists EXTERNAL on TLS connections only, and
// SaslAuthenticate answers RabbitMQ's codes: mechanism not supported on
// a plain connection, authentication failure without a certificate.
func TestTLSStreamMechanisms(t *testing.T) {
	tb := startTLSTestBroker(t, tlsconf.Options{VerifyPeer: true}, "")
	mechanisms := func(c *rawConn) []string {
		code, r := c.call(wire.KeySaslHandshake, nil)
		if code != wire.CodeOK {
			t.Fatalf("SaslHandshake: code %d", code)
		}
		var out []string
		for n := r.u32(); n > 0; n-- {
			out = append(out, r.string())
		}
		return out
	}
	plain := rawDial(t, tb.addr)
	if got := strings.Join(mechanisms(plain), " "); got != "PLAIN AMQPLAIN" {
		t.Fatalf("plain: mechanisms %s", got)
	}
	if code, _ := plain.call(wire.KeySaslAuthenticate, rawBuf(nil).str("EXTERNAL").bin(nil)); code != wire.CodeSASLMechanismNotSupported {
		t.Fatalf("EXTERNAL on a plain connection: code %d, want %d", code, wire.CodeSASLMechanismNotSupported)
	}
	nc, err := tls.Dial("tcp", tb.tlsAddr, &tls.Config{RootCAs: tb.ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	secure := &rawConn{t: t, nc: nc}
	if got := strings.Join(mechanisms(secure), " "); got != "PLAIN AMQPLAIN EXTERNAL" {
		t.Fatalf("TLS: mechanisms %s", got)
	}
	if code, _ := secure.call(wire.KeySaslAuthenticate, rawBuf(nil).str("EXTERNAL").bin(nil)); code != wire.CodeAuthenticationFailure {
		t.Fatalf("EXTERNAL without a certificate: code %d, want %d", code, wire.CodeAuthenticationFailure)
	}
}
