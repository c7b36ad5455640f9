package amqp

import (
	"bufio"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// tlsBroker is a broker serving amqps with a server certificate of ca.
type tlsBroker struct {
	*testBroker
	ca *testutil.CA
}

// startTLSBroker starts a broker on amqps with opts (its certificate
// files are filled in).
func startTLSBroker(t testing.TB, opts tlsconf.Options, cfg Config) *tlsBroker {
	t.Helper()
	ca := testutil.NewCA(t, "Warren test CA")
	srv := ca.Server(t, "localhost")
	opts.CACertFile, opts.CertFile, opts.KeyFile = ca.CAFile, srv.CertFile, srv.KeyFile
	r, err := tlsconf.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsBroker{startBroker(t, brokerOpts{tls: r.Config(), cfg: cfg}), ca}
}

// clientTLS is a client config trusting the broker's CA, presenting a
// certificate for cn unless cn is empty.
func (tb *tlsBroker) clientTLS(t testing.TB, cn string) *tls.Config {
	cfg := &tls.Config{RootCAs: tb.ca.Pool(), ServerName: "localhost"}
	if cn != "" {
		cfg.Certificates = []tls.Certificate{tb.ca.Client(t, cn).TLS}
	}
	return cfg
}

// connInfo is the broker's listing of its one connection.
func connInfo(t *testing.T, b *queues.Broker) queues.ConnInfo {
	t.Helper()
	conns := b.Conns()
	if len(conns) != 1 {
		t.Fatalf("%d connections listed, want 1", len(conns))
	}
	return conns[0].Info()
}

// Ensure amqp091-go's DialTLS logs in with a password over TLS, messages
// go round, and the connection is listed with its TLS details.
func TestTLSPlain(t *testing.T) {
	tb := startTLSBroker(t, tlsconf.Options{}, Config{})
	c, err := amqp091.DialTLS("amqps://guest:guest@"+tb.addr+"/", tb.clientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte("over tls")}); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deliveries:
		if string(d.Body) != "over tls" {
			t.Fatalf("got %q", d.Body)
		}
	case <-time.After(wait):
		t.Fatal("no delivery")
	}
	ci := connInfo(t, tb.broker)
	if !ci.SSL || ci.TLS == nil || ci.TLS.Protocol != "tlsv1.3" || ci.TLS.Cipher == "" || ci.TLS.PeerCertSubject != "" || ci.AuthMechanism != "PLAIN" {
		t.Fatalf("listed as ssl=%v %+v, mechanism %s", ci.SSL, ci.TLS, ci.AuthMechanism)
	}
}

// Ensure SASL EXTERNAL logs in as the client certificate's subject
// (distinguished_name, RabbitMQ's default) or common name, and refuses
// a user that does not exist as RabbitMQ does.
func TestTLSExternal(t *testing.T) {
	for _, tc := range []struct {
		from, user string
	}{
		{"", "CN=alice,O=Warren tests"},
		{tlsconf.LoginFromCN, "alice"},
	} {
		t.Run("from="+tc.from, func(t *testing.T) {
			tb := startTLSBroker(t, tlsconf.Options{VerifyPeer: true}, Config{SASL: withExternal, CertLogin: tlsconf.CertLogin{From: tc.from}})
			url := "amqps://" + tb.addr + "/"
			// Unknown user: refused, and the socket closed, as for a
			// wrong password (amqp091-go does not announce
			// authentication_failure_close).
			if _, err := amqp091.DialTLS_ExternalAuth(url, tb.clientTLS(t, "alice")); !errors.Is(err, amqp091.ErrCredentials) {
				t.Fatalf("unknown user: %v, want ErrCredentials", err)
			}
			if err := tb.broker.AddUser(tc.user, ""); err != nil {
				t.Fatal(err)
			}
			if err := tb.broker.SetPermissions(tc.user, "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
				t.Fatal(err)
			}
			c, err := amqp091.DialTLS_ExternalAuth(url, tb.clientTLS(t, "alice"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ch.QueueDeclare("alice-q", false, true, false, false, nil); err != nil {
				t.Fatal(err)
			}
			ci := connInfo(t, tb.broker)
			if ci.User != tc.user || ci.AuthMechanism != "EXTERNAL" || ci.TLS.PeerCertSubject != "CN=alice,O=Warren tests" ||
				ci.TLS.PeerCertIssuer != "CN=Warren test CA,O=Warren tests" || ci.TLS.PeerCertValidity == "" {
				t.Fatalf("listed as %q by %s, %+v", ci.User, ci.AuthMechanism, ci.TLS)
			}
		})
	}
}

// withExternal is auth_mechanisms with EXTERNAL, as
// rabbitmq_auth_mechanism_ssl's README configures it.
var withExternal = sasl.Config{Mechanisms: []string{sasl.Plain, sasl.AMQPlain, sasl.External}}

// rawTLSDial is rawDial over TLS.
func rawTLSDial(t *testing.T, addr string, cfg *tls.Config) *rawClient {
	t.Helper()
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(wait))
	return &rawClient{t: t, nc: nc, w: bufio.NewWriter(nc), fr: wire.NewFrameReader(nc, 64<<10)}
}

// Ensure connection.start offers EXTERNAL on TLS connections when
// configured (as RabbitMQ with rabbitmq_auth_mechanism_ssl does, with or without a
// client certificate) and a client that hears why gets RabbitMQ's
// refusals: an unknown user, no certificate, an unverified one.
func TestTLSExternalRefusals(t *testing.T) {
	try := func(t *testing.T, tb *tlsBroker, cfg *tls.Config, mechanisms string) {
		t.Helper()
		c := rawTLSDial(t, tb.addr, cfg)
		c.write(wire.ProtocolHeader[:])
		_, m := c.method()
		if got := m.(*wire.ConnectionStart).Mechanisms; got != mechanisms {
			t.Fatalf("mechanisms %q, want %q", got, mechanisms)
		}
		c.send(0, &wire.ConnectionStartOk{
			ClientProperties: wire.Table{"capabilities": wire.Table{"authentication_failure_close": true}},
			Mechanism:        "EXTERNAL", Response: "", Locale: "en_US",
		})
		c.expectClose(0, 403, "ACCESS_REFUSED - Login was refused using authentication mechanism EXTERNAL. For details see the broker logfile.")
		c.expectEOF()
	}
	verified := startTLSBroker(t, tlsconf.Options{VerifyPeer: true}, Config{SASL: withExternal})
	t.Run("unknown user", func(t *testing.T) { try(t, verified, verified.clientTLS(t, "nobody"), "PLAIN AMQPLAIN EXTERNAL") })
	t.Run("no certificate", func(t *testing.T) { try(t, verified, verified.clientTLS(t, ""), "PLAIN AMQPLAIN EXTERNAL") })
	// verify_none: the broker asks for no certificate; a guest user
	// named as a client's subject still cannot log in without one.
	unverified := startTLSBroker(t, tlsconf.Options{}, Config{SASL: withExternal, CertLogin: tlsconf.CertLogin{From: tlsconf.LoginFromCN}})
	t.Run("verify_none", func(t *testing.T) { try(t, unverified, unverified.clientTLS(t, "guest"), "PLAIN AMQPLAIN EXTERNAL") })
}

// Ensure verify_peer with fail_if_no_peer_cert refuses a client without
// a certificate, and TLS 1.1 is refused.
func TestTLSRefusals(t *testing.T) {
	tb := startTLSBroker(t, tlsconf.Options{VerifyPeer: true, FailIfNoPeerCert: true}, Config{})
	url := "amqps://guest:guest@" + tb.addr + "/"
	// TLS 1.3 ends the client's handshake before the server has checked
	// its certificate: the refusal is an alert or a closed socket,
	// whichever the client reads first. TLS 1.2 fails the handshake.
	if _, err := amqp091.DialTLS(url, tb.clientTLS(t, "")); err == nil {
		t.Fatal("no client certificate: accepted")
	}
	tls12 := tb.clientTLS(t, "")
	tls12.MaxVersion = tls.VersionTLS12
	if _, err := amqp091.DialTLS(url, tls12); err == nil || !strings.Contains(err.Error(), "handshake failure") {
		t.Fatalf("no client certificate, TLS 1.2: %v, want a handshake failure", err)
	}
	if n := len(tb.broker.Conns()); n != 0 {
		t.Fatalf("%d connections listed after the refusals", n)
	}
	c, err := amqp091.DialTLS(url, tb.clientTLS(t, "alice"))
	if err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	c.Close()
	old := tb.clientTLS(t, "alice")
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := amqp091.DialTLS(url, old); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1: %v, want a protocol version alert", err)
	}
}
