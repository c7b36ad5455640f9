package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warren-mq/warren/internal/testutil"
)

// Ensure the daemon applies ssl_options, management.ssl and
// prometheus.ssl ciphers, depth and password: the stream TLS listener
// speaks only TLS 1.3 (TLS 1.3 suites only) to the Go stream client; the
// management API opens an encrypted key and refuses a client chain
// deeper than its depth; the Prometheus endpoint speaks its one TLS 1.2
// suite to net/http.
func TestRunTLSOptions(t *testing.T) {
	ca := testutil.NewCA(t, "Warren test CA")
	srv := ca.Server(t, "localhost")
	encrypted := testutil.EncryptKeyPKCS8(t, srv.KeyFile, "mgmt pass")
	inter := ca.Intermediate(t, "Warren intermediate CA")
	conf := fmt.Sprintf(`
ssl_options.cacertfile = %[1]s
ssl_options.certfile = %[2]s
ssl_options.keyfile = %[3]s
ssl_options.ciphers.1 = TLS_AES_128_GCM_SHA256
ssl_options.honor_cipher_order = true
ssl_options.honor_ecc_order = true
management.ssl.cacertfile = %[1]s
management.ssl.certfile = %[2]s
management.ssl.keyfile = %[4]s
management.ssl.password = mgmt pass
management.ssl.verify = verify_peer
management.ssl.depth = 0
prometheus.ssl.certfile = %[2]s
prometheus.ssl.keyfile = %[3]s
prometheus.ssl.ciphers.1 = ECDHE-ECDSA-AES256-GCM-SHA384
`, ca.CAFile, srv.CertFile, srv.KeyFile, encrypted)
	cfg := defaults()
	if err := applyConfFile("w.conf", []byte(conf), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.AMQPListen, cfg.StreamListen, cfg.HTTPListen, cfg.PrometheusListen = "", "", "", ""
	cfg.TLS.StreamListen, cfg.TLS.HTTPSListen, cfg.TLS.PrometheusListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan readyAddrs, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	addrs := waitReady(t, ready, errc)

	// The stream listener: TLS 1.3 only. (The Go stream client takes
	// 10 s to give up on a failed handshake: tls.Dial shows the refusal.)
	tls12 := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12}
	if c, err := tls.Dial("tcp", addrs.StreamTLS.String(), tls12); err == nil {
		c.Close()
		t.Fatal("stream over TLS 1.2: connected")
	}
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
		SetUri("rabbitmq-stream+tls://guest:guest@" + addrs.StreamTLS.String() + "/").
		SetTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.DeclareStream("opts-s", nil); err != nil {
		t.Fatal(err)
	}
	env.Close()

	// The management API: the encrypted key serves; depth 0 takes a
	// client certificate the CA signs and refuses one from an
	// intermediate CA.
	get := func(client tls.Certificate) (*http.Response, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
			Certificates: []tls.Certificate{client}}}}
		req, _ := http.NewRequest("GET", "https://"+addrs.HTTPS.String()+"/api/overview", nil)
		req.SetBasicAuth("guest", "guest")
		return c.Do(req)
	}
	res, err := get(ca.Client(t, "alice").TLS)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("management API: %d", res.StatusCode)
	}
	if res, err := get(inter.Client(t, "alice").TLS); err == nil {
		res.Body.Close()
		t.Fatalf("management API, a chain deeper than depth 0: %d", res.StatusCode)
	}

	// The Prometheus endpoint: its one TLS 1.2 suite.
	res, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}}}).
		Get("https://" + addrs.PrometheusTLS.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.TLS.Version != tls.VersionTLS12 || res.TLS.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("Prometheus over %s with %s", tls.VersionName(res.TLS.Version), tls.CipherSuiteName(res.TLS.CipherSuite))
	}
}
