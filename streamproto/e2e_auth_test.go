package streamproto

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// saslMechanisms runs PeerProperties and SaslHandshake on a raw
// connection and returns the mechanisms.
func saslMechanisms(t *testing.T, addr string) (*rawConn, []string) {
	t.Helper()
	c := rawDial(t, addr)
	c.peerProperties()
	r := c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	mechs := r.stringArray()
	if r.err != nil || !r.empty() {
		t.Fatalf("SaslHandshake response: err %v, %d bytes left", r.err, len(r.b))
	}
	return c, mechs
}

// Ensure auth_mechanisms decides what SaslHandshake lists, in the
// configured order, and that a mechanism not offered or unknown gets
// SASL_MECHANISM_NOT_SUPPORTED, as rabbit_stream_reader answers both.
func TestAuthMechanisms(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{sasl: sasl.Config{Mechanisms: []string{sasl.AMQPlain, sasl.Plain}}})
	if _, got := saslMechanisms(t, tb.addr); !slices.Equal(got, []string{"AMQPLAIN", "PLAIN"}) {
		t.Fatalf("mechanisms %q, want [AMQPLAIN PLAIN]", got)
	}
	if err := e2eConnect(tb, "guest", "guest"); err != nil {
		t.Fatal(err)
	}
	only := startBroker(t, brokerOpts{sasl: sasl.Config{Mechanisms: []string{sasl.AMQPlain}}})
	// The Go client speaks PLAIN (and EXTERNAL) only: no mechanism in common.
	if err := e2eConnect(only, "guest", "guest"); err == nil {
		t.Fatal("PLAIN client against AMQPLAIN only: connected")
	}
	for _, mech := range []string{"PLAIN", "ANONYMOUS", "EXTERNAL", "SCRAM-SHA-256"} {
		t.Run("refused="+mech, func(t *testing.T) {
			c, _ := saslMechanisms(t, only.addr)
			if code := c.authenticate(mech, plain("guest", "guest")); code != wire.CodeSASLMechanismNotSupported {
				t.Fatalf("code 0x%02x, want 0x%02x", uint16(code), uint16(wire.CodeSASLMechanismNotSupported))
			}
		})
	}
}

// Ensure ANONYMOUS is listed by default and logs in as guest from
// loopback, is not listed with anonymous_login_user = none, and keeps
// guest's loopback restriction: from another address it gets
// AUTHENTICATION_FAILURE_LOOPBACK.
func TestAuthAnonymous(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c, mechs := saslMechanisms(t, tb.addr)
	if !slices.Equal(mechs, []string{"PLAIN", "AMQPLAIN", "ANONYMOUS"}) {
		t.Fatalf("mechanisms %q, want RabbitMQ 4.x's [PLAIN AMQPLAIN ANONYMOUS]", mechs)
	}
	if code := c.authenticate(sasl.Anonymous, nil); code != wire.CodeOK {
		t.Fatalf("ANONYMOUS: code 0x%02x", uint16(code))
	}
	c.tune(1 << 20)
	c.expectCode(wire.KeyOpen, rawBuf(nil).str("/"), wire.CodeOK)
	conns := tb.broker.Conns()
	if len(conns) != 1 {
		t.Fatalf("%d connections listed, want 1", len(conns))
	}
	if ci := conns[0].Info(); ci.User != "guest" || ci.AuthMechanism != "ANONYMOUS" {
		t.Fatalf("listed as %q by %s, want guest by ANONYMOUS", ci.User, ci.AuthMechanism)
	}

	off := startBroker(t, brokerOpts{sasl: sasl.Config{AnonymousUser: sasl.AnonymousNone}})
	c, mechs = saslMechanisms(t, off.addr)
	if !slices.Equal(mechs, []string{"PLAIN", "AMQPLAIN"}) {
		t.Fatalf("anonymous_login_user = none: mechanisms %q", mechs)
	}
	if code := c.authenticate(sasl.Anonymous, nil); code != wire.CodeSASLMechanismNotSupported {
		t.Fatalf("ANONYMOUS not offered: code 0x%02x", uint16(code))
	}

	remote := startBroker(t, brokerOpts{listenIP: nonLoopbackIP(t)})
	c, _ = saslMechanisms(t, remote.addr)
	if code := c.authenticate(sasl.Anonymous, nil); code != wire.CodeAuthenticationLoopback {
		t.Fatalf("ANONYMOUS as guest from afar: code 0x%02x, want 0x%02x", uint16(code), uint16(wire.CodeAuthenticationLoopback))
	}
}

// nonLoopbackIP returns an IPv4 address of this machine that is not a
// loopback one; the test is skipped without one.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address to connect from")
	return ""
}

// Ensure stream.max_connections refuses Open on a listener past the
// limit with VIRTUAL_HOST_ACCESS_FAILURE, and a closed connection frees
// its place.
func TestStreamMaxConnections(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{connectionMax: 1})
	o := stream.NewEnvironmentOptions().SetHost(tb.host).SetPort(tb.port).SetUser("guest").SetPassword("guest").
		SetAddressResolver(stream.AddressResolver{Host: tb.host, Port: tb.port})
	// The Go environment closes its first connection once it has
	// checked it, so a raw connection holds the place.
	first := rawDial(t, tb.addr)
	first.handshake(1 << 20)
	if _, err := stream.NewEnvironment(o); !errors.Is(err, stream.VirtualHostAccessFailure) {
		t.Fatalf("second connection: %v, want VirtualHostAccessFailure", err)
	}
	first.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := e2eConnect(tb, "guest", "guest")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure ssl_cert_login_from = subject_alternative_name logs the Go
// stream client (EXTERNAL) in as the certificate's SAN of the configured
// type and index.
func TestTLSStreamExternalSAN(t *testing.T) {
	t.Parallel()
	tb := startTLSTestBrokerLogin(t, tlsconf.Options{VerifyPeer: true},
		tlsconf.CertLogin{From: tlsconf.LoginFromSAN, SANType: tlsconf.SANDNS, SANIndex: 1})
	if err := tb.broker.AddUser("second.example", "unused"); err != nil {
		t.Fatal(err)
	}
	if err := tb.broker.SetPermissions("second.example", "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	cert := tb.ca.ClientWith(t, "bob", func(c *x509.Certificate) { c.DNSNames = []string{"first.example", "second.example"} })
	cfg := &tls.Config{RootCAs: tb.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert.TLS}}
	opts := stream.NewEnvironmentOptions().SetUri("rabbitmq-stream+tls://" + tb.tlsAddr + "/").SetTLSConfig(cfg).
		SetSaslConfiguration(stream.SaslConfigurationExternal)
	env, err := stream.NewEnvironment(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.DeclareStream("san-s", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range tb.broker.Conns() {
		if ci := c.Info(); ci.User != "second.example" || ci.AuthMechanism != "EXTERNAL" {
			t.Errorf("listed as %q by %s, want second.example by EXTERNAL", ci.User, ci.AuthMechanism)
		}
	}
}
