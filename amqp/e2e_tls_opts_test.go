package amqp

import (
	"crypto/tls"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/internal/tlsconf"
)

// startTLSBrokerCA is startTLSBroker with the CA given and the server's
// key file changed by keyFile (nil: as issued).
func startTLSBrokerCA(t *testing.T, ca *testutil.CA, opts tlsconf.Options, keyFile func(string) string) *tlsBroker {
	t.Helper()
	srv := ca.Server(t, "localhost")
	opts.CACertFile, opts.CertFile, opts.KeyFile = ca.CAFile, srv.CertFile, srv.KeyFile
	if keyFile != nil {
		opts.KeyFile = keyFile(srv.KeyFile)
	}
	r, err := tlsconf.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsBroker{startBroker(t, brokerOpts{tls: r.Config()}), ca}
}

// Ensure ssl_options.ciphers limits what amqp091-go's TLS can agree on:
// a TLS 1.2 suite only turns TLS 1.3 off and is the suite used; a client
// offering none of the list is refused in the handshake.
func TestTLSCiphers(t *testing.T) {
	ca := testutil.NewCA(t, "Warren test CA")
	suite, _ := tlsconf.ParseCipher("ECDHE-ECDSA-AES128-GCM-SHA256")
	tb := startTLSBrokerCA(t, ca, tlsconf.Options{CipherSuites: []uint16{suite}}, nil)
	url := "amqps://guest:guest@" + tb.addr + "/"
	c, err := amqp091.DialTLS(url, tb.clientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if ci := connInfo(t, tb.broker); ci.TLS.Protocol != "tlsv1.2" || ci.TLS.Cipher != "aes_128_gcm" || ci.TLS.KeyExchange != "ecdhe_ecdsa" {
		t.Fatalf("connection %+v, want tlsv1.2 ecdhe_ecdsa aes_128_gcm", ci.TLS)
	}
	c.Close()
	other := tb.clientTLS(t, "")
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	if _, err := amqp091.DialTLS(url, other); err == nil {
		t.Fatal("a client without the broker's suite: connected")
	}
}

// Ensure ssl_options.depth bounds the intermediates of a client's
// chain, as Erlang's depth: a client certificate from an intermediate
// CA passes with depth 1 and is refused with depth 0; one the CA signs
// passes with depth 0.
func TestTLSDepth(t *testing.T) {
	ca := testutil.NewCA(t, "Warren test CA")
	inter := ca.Intermediate(t, "Warren intermediate CA")
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{1, true}, {0, false}} {
		depth := tc.depth
		tb := startTLSBrokerCA(t, ca, tlsconf.Options{VerifyPeer: true, FailIfNoPeerCert: true, Depth: &depth}, nil)
		cfg := tb.clientTLS(t, "")
		cfg.Certificates = []tls.Certificate{inter.Client(t, "alice").TLS}
		c, err := amqp091.DialTLS("amqps://guest:guest@"+tb.addr+"/", cfg)
		if (err == nil) != tc.ok {
			t.Fatalf("depth %d, one intermediate: %v", depth, err)
		}
		if c != nil {
			c.Close()
		}
		if !tc.ok {
			c, err := amqp091.DialTLS("amqps://guest:guest@"+tb.addr+"/", tb.clientTLS(t, "bob"))
			if err != nil {
				t.Fatalf("depth 0, signed by the CA: %v", err)
			}
			c.Close()
		}
	}
}

// Ensure ssl_options.password opens an encrypted keyfile and the broker
// serves amqp091-go with it.
func TestTLSKeyPassword(t *testing.T) {
	ca := testutil.NewCA(t, "Warren test CA")
	tb := startTLSBrokerCA(t, ca, tlsconf.Options{Password: "s3cret"}, func(key string) string {
		return testutil.EncryptKeyPKCS8(t, key, "s3cret")
	})
	c, err := amqp091.DialTLS("amqps://guest:guest@"+tb.addr+"/", tb.clientTLS(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
