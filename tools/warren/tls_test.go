package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/internal/tlsconf"
)

// Ensure the daemon, configured with RabbitMQ's TLS keys, serves AMQPS,
// the stream protocol over TLS, the management API and the Prometheus
// endpoint over HTTPS; lists them as RabbitMQ names them; shows a TLS
// connection's details in /api/connections; and on SIGHUP serves new
// connections the new certificate while an open connection goes on.
func TestRunTLS(t *testing.T) {
	ca := testutil.NewCA(t, "Warren test CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	install := func(cn string) {
		is := ca.Server(t, cn)
		for _, f := range [][2]string{{is.CertFile, certFile}, {is.KeyFile, keyFile}} {
			b, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install("first")
	conf := fmt.Sprintf(`
ssl_options.cacertfile = %[1]s
ssl_options.certfile = %[2]s
ssl_options.keyfile = %[3]s
ssl_options.verify = verify_peer
ssl_cert_login_from = common_name
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = EXTERNAL
management.ssl.certfile = %[2]s
management.ssl.keyfile = %[3]s
prometheus.ssl.certfile = %[2]s
prometheus.ssl.keyfile = %[3]s
prometheus.ssl.versions.1 = tlsv1.3
`, ca.CAFile, certFile, keyFile)
	cfg := defaults()
	if err := applyConfFile("w.conf", []byte(conf), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.AMQPListen, cfg.StreamListen, cfg.HTTPListen, cfg.PrometheusListen = "", "", "", ""
	// As -amqps-listen, -stream-tls-listen, -https-listen and
	// -prometheus-tls-listen: the file's ports are fixed.
	cfg.TLS.AMQPListen, cfg.TLS.StreamListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.TLS.HTTPSListen, cfg.TLS.PrometheusListen = "127.0.0.1:0", "127.0.0.1:0"
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

	client := func(cn string) *tls.Config {
		c := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		if cn != "" {
			c.Certificates = []tls.Certificate{ca.Client(t, cn).TLS}
		}
		return c
	}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: client("")}}
	get := func(url string, into any) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.SetBasicAuth("guest", "guest")
		res, err := https.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", url, res.StatusCode, body)
		}
		if into != nil {
			if err := json.Unmarshal(body, into); err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
		}
	}

	// EXTERNAL over AMQPS as guest (common_name), from loopback.
	conn, err := amqp091.DialTLS_ExternalAuth("amqps://"+addrs.AMQPS.String()+"/", client("guest"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}

	var overview struct {
		Listeners []struct {
			Protocol string `json:"protocol"`
			Port     int    `json:"port"`
		} `json:"listeners"`
	}
	get("https://"+addrs.HTTPS.String()+"/api/overview", &overview)
	var protocols []string
	for _, l := range overview.Listeners {
		protocols = append(protocols, l.Protocol)
	}
	if got := strings.Join(protocols, " "); got != "stream/ssl amqp/ssl https/prometheus https" {
		t.Fatalf("listeners %s", got)
	}
	// The protocol-listener health check takes a listener's name with
	// its slash percent-encoded, RabbitMQ's aliases (amqps) and a
	// comma-separated list, as RabbitMQ's does.
	for _, p := range []string{"amqp%2Fssl", "amqps", "AMQPS", "stream%2Fssl", "https", "https%2Fprometheus", "amqp%2Fssl,stream%2Fssl,https"} {
		var check struct {
			Status    string   `json:"status"`
			Protocols []string `json:"protocols"`
		}
		get("https://"+addrs.HTTPS.String()+"/api/health/checks/protocol-listener/"+p, &check)
		if check.Status != "ok" || len(check.Protocols) != 4 {
			t.Fatalf("protocol-listener/%s: %+v", p, check)
		}
	}
	req, _ := http.NewRequest("GET", "https://"+addrs.HTTPS.String()+"/api/health/checks/protocol-listener/amqps,mqtt%2Fssl,amqp", nil)
	req.SetBasicAuth("guest", "guest")
	res, err := https.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var failed struct {
		Status, Reason string
		Missing        []string
	}
	json.NewDecoder(res.Body).Decode(&failed)
	res.Body.Close()
	if res.StatusCode != 503 || failed.Status != "failed" || failed.Reason != "No active listener" || strings.Join(failed.Missing, " ") != "mqtt/ssl amqp" {
		t.Fatalf("protocol-listener with missing ones: %d %+v", res.StatusCode, failed)
	}
	var conns []map[string]any
	get("https://"+addrs.HTTPS.String()+"/api/connections", &conns)
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	c := conns[0]
	if c["ssl"] != true || c["ssl_protocol"] != "tlsv1.3" || c["ssl_key_exchange"] != "any" || c["ssl_cipher"] == nil || c["ssl_hash"] != "aead" ||
		c["peer_cert_subject"] != "CN=guest,O=Warren tests" || c["peer_cert_issuer"] != "CN=Warren test CA,O=Warren tests" ||
		c["peer_cert_validity"] == nil || c["auth_mechanism"] != "EXTERNAL" || c["user"] != "guest" {
		t.Fatalf("connection %v", c)
	}
	res, err = https.Get("https://" + addrs.PrometheusTLS.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.TLS.Version != tls.VersionTLS13 {
		t.Fatalf("metrics over HTTPS: %d", res.StatusCode)
	}

	// SIGHUP: new connections get the new certificate, the open one goes on.
	served := func(addr string) string {
		t.Helper()
		c, err := tls.Dial("tcp", addr, client("guest"))
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	install("second")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for served(addrs.AMQPS.String()) != "second" {
		if time.Now().After(deadline) {
			t.Fatal("AMQPS still serves the first certificate 10 s after SIGHUP")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, addr := range []string{addrs.StreamTLS.String(), addrs.HTTPS.String(), addrs.PrometheusTLS.String()} {
		if got := served(addr); got != "second" {
			t.Errorf("%s serves %s after SIGHUP, want second", addr, got)
		}
	}
	if _, err := ch.QueueDeclare("after-reload", false, true, false, false, nil); err != nil {
		t.Fatalf("the connection opened before the reload: %v", err)
	}
}

// Ensure a TLS listener without certificates stops the start with an
// error naming the keys.
func TestRunTLSWithoutCertificates(t *testing.T) {
	for _, tc := range []struct {
		set  func(*TLSConfig)
		want string
	}{
		{func(c *TLSConfig) { c.AMQPListen = "127.0.0.1:0" }, "AMQPS or stream TLS listener: ssl_options: tls: certfile and keyfile are both needed"},
		{func(c *TLSConfig) { c.HTTPSListen = "127.0.0.1:0" }, "management HTTPS listener: management.ssl: tls: certfile and keyfile are both needed"},
		{func(c *TLSConfig) {
			c.PrometheusListen = "127.0.0.1:0"
			c.Prometheus = tlsconf.Options{CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"}
		}, "/nonexistent/cert.pem"},
	} {
		cfg := defaults()
		cfg.DataDir = t.TempDir()
		cfg.AMQPListen, cfg.StreamListen, cfg.HTTPListen, cfg.PrometheusListen = "127.0.0.1:0", "", "", ""
		tc.set(&cfg.TLS)
		err := run(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// Ensure TLS stream clients are told the TLS listener's port with the
// plain advertised host unless stream.advertised_tls_host/_port say
// otherwise, as RabbitMQ's stream plugin does.
func TestAdvertiseTLSAddr(t *testing.T) {
	ln := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5551}
	for _, tc := range []struct {
		tlsAdvertise, advertise string
		ln                      net.Addr
		want                    string
	}{
		{"", "localhost:5552", ln, "localhost:5551"},
		{"", "stream.example.com:6552", ln, "stream.example.com:5551"},
		{"tls.example.com:", "stream.example.com:6552", ln, "tls.example.com:5551"},
		{":6551", "stream.example.com:6552", ln, "stream.example.com:6551"},
		{"tls.example.com:6551", "localhost:5552", ln, "tls.example.com:6551"},
		{"", "localhost:5552", nil, ""},
	} {
		got, err := advertiseTLSAddr(tc.tlsAdvertise, tc.advertise, tc.ln)
		if err != nil || got != tc.want {
			t.Errorf("advertiseTLSAddr(%q, %q, %v) = %q, %v; want %q", tc.tlsAdvertise, tc.advertise, tc.ln, got, err, tc.want)
		}
	}
}
