package amqp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// anonymousAuth is SASL ANONYMOUS for amqp091-go, which has none: the
// response is a trace string the server ignores.
type anonymousAuth struct{}

func (anonymousAuth) Mechanism() string { return sasl.Anonymous }
func (anonymousAuth) Response() string  { return "warren test" }

// startMechanisms opens a raw connection and returns connection.start's
// mechanisms.
func startMechanisms(t *testing.T, addr string) (*rawClient, string) {
	t.Helper()
	c := rawDial(t, addr)
	c.write(wire.ProtocolHeader[:])
	_, m := c.method()
	start, ok := m.(*wire.ConnectionStart)
	if !ok {
		t.Fatalf("got %s, want connection.start", m.MethodName())
	}
	return c, start.Mechanisms
}

// Ensure auth_mechanisms decides what connection.start offers, in the
// configured order, and that a mechanism not offered (or unknown) fails
// the handshake as RabbitMQ's command_invalid in its starting state:
// no connection.close, the socket closed.
func TestAuthMechanisms(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{SASL: sasl.Config{Mechanisms: []string{sasl.AMQPlain, sasl.Plain}}}})
	if _, got := startMechanisms(t, tb.addr); got != "AMQPLAIN PLAIN" {
		t.Fatalf("mechanisms %q, want %q", got, "AMQPLAIN PLAIN")
	}
	c, err := amqp091.Dial("amqp://guest:guest@" + tb.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	only := startBroker(t, brokerOpts{cfg: Config{SASL: sasl.Config{Mechanisms: []string{sasl.AMQPlain}}}})
	// amqp091-go's URL credentials are PLAIN only: no mechanism in common.
	if _, err := amqp091.Dial("amqp://guest:guest@" + only.addr + "/"); !errors.Is(err, amqp091.ErrSASL) {
		t.Fatalf("PLAIN against AMQPLAIN only: %v, want ErrSASL", err)
	}
	c, err = amqp091.DialConfig("amqp://"+only.addr+"/", amqp091.Config{
		SASL: []amqp091.Authentication{&amqp091.AMQPlainAuth{Username: "guest", Password: "guest"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for _, mech := range []string{"PLAIN", "ANONYMOUS", "EXTERNAL", "SCRAM-SHA-256"} {
		t.Run("refused="+mech, func(t *testing.T) {
			rc, _ := startMechanisms(t, only.addr)
			rc.send(0, startOk(mech, "\x00guest\x00guest", true))
			rc.expectEOF()
		})
	}
}

// Ensure ANONYMOUS is offered by default and logs in as guest from
// loopback, is not offered with anonymous_login_user = none, refuses
// (403) an anonymous user that does not exist, and that guest's
// loopback restriction holds for it: from another address it is refused
// as RabbitMQ refuses it.
func TestAuthAnonymous(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	if _, got := startMechanisms(t, tb.addr); got != "PLAIN AMQPLAIN ANONYMOUS" {
		t.Fatalf("mechanisms %q, want RabbitMQ 4.x's PLAIN AMQPLAIN ANONYMOUS", got)
	}
	c, err := amqp091.DialConfig("amqp://"+tb.addr+"/", amqp091.Config{SASL: []amqp091.Authentication{anonymousAuth{}}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("anon-q", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if ci := connInfo(t, tb.broker); ci.User != "guest" || ci.AuthMechanism != "ANONYMOUS" {
		t.Fatalf("listed as %q by %s, want guest by ANONYMOUS", ci.User, ci.AuthMechanism)
	}
	c.Close()

	off := startBroker(t, brokerOpts{cfg: Config{SASL: sasl.Config{AnonymousUser: sasl.AnonymousNone}}})
	if _, got := startMechanisms(t, off.addr); got != "PLAIN AMQPLAIN" {
		t.Fatalf("anonymous_login_user = none: mechanisms %q, want PLAIN AMQPLAIN", got)
	}
	if _, err := amqp091.DialConfig("amqp://"+off.addr+"/", amqp091.Config{SASL: []amqp091.Authentication{anonymousAuth{}}}); !errors.Is(err, amqp091.ErrSASL) {
		t.Fatalf("ANONYMOUS not offered: %v, want ErrSASL", err)
	}

	nobody := startBroker(t, brokerOpts{cfg: Config{SASL: sasl.Config{AnonymousUser: "nobody", AnonymousPass: "x"}}})
	rc, _ := startMechanisms(t, nobody.addr)
	rc.send(0, startOk(sasl.Anonymous, "", true))
	rc.expectClose(0, 403, "ACCESS_REFUSED - Login was refused using authentication mechanism ANONYMOUS. For details see the broker logfile.")

	ip := nonLoopbackIP(t)
	remote := startBroker(t, brokerOpts{listen: net.JoinHostPort(ip, "0")})
	rc, _ = startMechanisms(t, remote.addr)
	rc.send(0, startOk(sasl.Anonymous, "", true))
	rc.expectClose(0, 403, "ACCESS_REFUSED - user 'guest' can only connect via localhost")
}

// nonLoopbackIP returns an IPv4 address of this machine that is not a
// loopback one, so that a connection to it comes from a non-loopback
// address; the test is skipped without one.
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

// Ensure connection_max refuses connection.open on a listener past the
// limit with RabbitMQ's 530 and text, and a closed connection frees its
// place.
func TestConnectionMax(t *testing.T) {
	tb := startBroker(t, brokerOpts{cfg: Config{ConnectionMax: 1}})
	url := "amqp://guest:guest@" + tb.addr + "/"
	first, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = amqp091.Dial(url)
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 530 || ae.Reason != "NOT_ALLOWED - connection refused: node connection limit (1) is reached" {
		t.Fatalf("second connection: %v, want 530 node connection limit", err)
	}
	first.Close()
	deadline := time.Now().Add(wait)
	for {
		c, err := amqp091.Dial(url)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	zero := startBroker(t, brokerOpts{cfg: Config{ConnectionMax: -1}})
	_, err = amqp091.Dial("amqp://guest:guest@" + zero.addr + "/")
	if !errors.As(err, &ae) || ae.Code != 530 || ae.Reason != "NOT_ALLOWED - connection refused: node connection limit (0) is reached" {
		t.Fatalf("connection_max = 0: %v, want 530", err)
	}
}

// Ensure channel_max_per_node counts every connection's channels and
// refuses channel.open past it with RabbitMQ's 530 and text.
func TestChannelMaxPerNode(t *testing.T) {
	tb := startBroker(t, brokerOpts{queues: queues.Options{ChannelMaxPerNode: 2}, cfg: Config{Node: "warren@test"}})
	url := "amqp://guest:guest@" + tb.addr + "/"
	a, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ch, err := a.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Channel(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Channel()
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 530 || ae.Reason != "NOT_ALLOWED - number of channels opened on node 'warren@test' has reached the maximum allowed limit of 2" {
		t.Fatalf("third channel: %v, want 530 node channel limit", err)
	}
	// b is closed by the refusal, its channel with it; a may open another.
	ch.Close()
	deadline := time.Now().Add(wait)
	for {
		if _, err := a.Channel(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after channels closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure ssl_cert_login_from = subject_alternative_name logs an
// amqp091-go EXTERNAL client in as the certificate's SAN of the
// configured type and index.
func TestTLSExternalSAN(t *testing.T) {
	for _, tc := range []struct {
		login tlsconf.CertLogin
		user  string
	}{
		{tlsconf.CertLogin{From: tlsconf.LoginFromSAN}, "first.example"},
		{tlsconf.CertLogin{From: tlsconf.LoginFromSAN, SANType: tlsconf.SANDNS, SANIndex: 1}, "second.example"},
		{tlsconf.CertLogin{From: tlsconf.LoginFromSAN, SANType: tlsconf.SANEmail}, "bob@example.com"},
		{tlsconf.CertLogin{From: tlsconf.LoginFromSAN, SANType: tlsconf.SANURI}, "spiffe://example/bob"},
	} {
		t.Run(tc.login.SANType+"/"+tc.user, func(t *testing.T) {
			tb := startTLSBroker(t, tlsconf.Options{VerifyPeer: true}, Config{SASL: withExternal, CertLogin: tc.login})
			if err := tb.broker.AddUser(tc.user, ""); err != nil {
				t.Fatal(err)
			}
			if err := tb.broker.SetPermissions(tc.user, "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
				t.Fatal(err)
			}
			spiffe, _ := url.Parse("spiffe://example/bob")
			cert := tb.ca.ClientWith(t, "bob", func(c *x509.Certificate) {
				c.DNSNames = []string{"first.example", "second.example"}
				c.EmailAddresses = []string{"bob@example.com"}
				c.URIs = []*url.URL{spiffe}
			})
			cfg := &tls.Config{RootCAs: tb.ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert.TLS}}
			c, err := amqp091.DialTLS_ExternalAuth("amqps://"+tb.addr+"/", cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if ci := connInfo(t, tb.broker); ci.User != tc.user || ci.AuthMechanism != "EXTERNAL" {
				t.Fatalf("listed as %q by %s, want %q by EXTERNAL", ci.User, ci.AuthMechanism, tc.user)
			}
		})
	}
	// No name of the type at that index: refused as RabbitMQ's
	// "no name found".
	tb := startTLSBroker(t, tlsconf.Options{VerifyPeer: true}, Config{SASL: withExternal,
		CertLogin: tlsconf.CertLogin{From: tlsconf.LoginFromSAN, SANType: tlsconf.SANIP}})
	if _, err := amqp091.DialTLS_ExternalAuth("amqps://"+tb.addr+"/", tb.clientTLS(t, "bob")); !errors.Is(err, amqp091.ErrCredentials) {
		t.Fatalf("no IP SAN: %v, want ErrCredentials", err)
	}
}
