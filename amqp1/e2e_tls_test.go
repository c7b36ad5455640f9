package amqp1

import (
	"crypto/tls"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/internal/tlsconf"
)

// Ensure AMQP 1.0 works on the TLS listener (the 0-9-1 server hands over
// the connection after the TLS handshake): PLAIN, and EXTERNAL with the
// client certificate's common name (when auth_mechanisms lists it), and
// the connection is listed as SSL.
func TestTLS(t *testing.T) {
	ca := testutil.NewCA(t, "Warren test CA")
	srv := ca.Server(t, "localhost")
	r, err := tlsconf.Load(tlsconf.Options{VerifyPeer: true, CACertFile: ca.CAFile, CertFile: srv.CertFile, KeyFile: srv.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	tb := startBrokerTLS(t, Config{CertLogin: tlsconf.CertLogin{From: tlsconf.LoginFromCN},
		SASL: sasl.Config{Mechanisms: []string{sasl.Plain, sasl.External}}}, r.Config())
	clientTLS := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{ca.Client(t, "guest").TLS}}
	for _, sasl := range []goamqp.SASLType{goamqp.SASLTypePlain("guest", "guest"), goamqp.SASLTypeExternal("")} {
		c, err := goamqp.Dial(ctxT(t), "amqps://"+tb.addr, &goamqp.ConnOptions{SASLType: sasl, TLSConfig: clientTLS, HostName: "vhost:/"})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns := tb.broker.Conns()
		if len(conns) != 1 || !conns[0].Info().SSL || conns[0].Info().User != "guest" {
			t.Errorf("listed: %d connections, want 1 SSL connection of guest", len(conns))
		}
		c.Close()
		waitNoConns(t, tb)
	}
}

// waitNoConns waits until the broker lists no connection.
func waitNoConns(t testing.TB, tb *testBroker) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for len(tb.broker.Conns()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("connections still listed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
