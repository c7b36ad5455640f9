package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/queues"
)

// Ensure the daemon serves on its listener, refuses a second start on the
// same data directory, and stops cleanly when its context ends.
func TestRunLockAndShutdown(t *testing.T) {
	dir := t.TempDir()
	cfg := defaults()
	cfg.DataDir = dir
	cfg.StreamListen = "127.0.0.1:0"
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.PrometheusListen = "127.0.0.1:0"
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan readyAddrs, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, logger, ready) }()
	addrs := waitReady(t, ready, errc)
	for _, addr := range []net.Addr{addrs.Stream, addrs.AMQP} {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatalf("dial %v: %v", addr, err)
		}
		c.Close()
	}
	// The management API lists the daemon's four listeners, RabbitMQ's
	// http/prometheus among them.
	req, _ := http.NewRequest("GET", "http://"+addrs.HTTP.String()+"/api/overview", nil)
	req.SetBasicAuth("guest", "guest")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var overview struct {
		Listeners []struct {
			Protocol string `json:"protocol"`
			Port     int    `json:"port"`
		} `json:"listeners"`
	}
	err = json.NewDecoder(res.Body).Decode(&overview)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(overview.Listeners) != 4 ||
		overview.Listeners[2].Protocol != "http/prometheus" || overview.Listeners[2].Port != addrs.Prometheus.(*net.TCPAddr).Port ||
		overview.Listeners[3].Protocol != "http" || overview.Listeners[3].Port != addrs.HTTP.(*net.TCPAddr).Port {
		t.Fatalf("overview: %d %+v %v", res.StatusCode, overview, err)
	}
	// The Prometheus endpoint answers with the node's identity.
	res, err = http.Get("http://" + addrs.Prometheus.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `rabbitmq_identity_info{rabbitmq_cluster="warren@localhost",`) {
		t.Fatalf("metrics: %d %.300s", res.StatusCode, body)
	}

	err = run(context.Background(), cfg, logger, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another Warren") {
		t.Fatalf("second run on the same data dir: %v", err)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no clean shutdown")
	}
	if _, err := net.Dial("tcp", addrs.AMQP.String()); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

// Ensure a configuration file supplies values and explicit flags
// override it, an explicitly empty flag included.
func TestParseFlagsConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warren.conf")
	conf := "warren.data_dir = /from/file\nstream.listeners.tcp.default = 6000\nstream.heartbeat = 5\nmanagement.tcp.port = 15999\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"-config", path, "-stream-listen", ":7000", "-http-listen", ""})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/file" || cfg.StreamListen != ":7000" || cfg.Heartbeat != 5 || cfg.AMQPListen != ":5672" || cfg.HTTPListen != "" {
		t.Fatalf("config %+v", cfg)
	}
	cfg, err = parseFlags([]string{"-config", path})
	if err != nil || cfg.StreamListen != ":6000" || cfg.HTTPListen != ":15999" {
		t.Fatalf("file alone: %+v %v", cfg, err)
	}
	cfg, err = parseFlags(nil)
	if err != nil || cfg.DataDir != "warren-data" || cfg.StreamListen != ":5552" || cfg.HTTPListen != ":15672" {
		t.Fatalf("defaults %+v %v", cfg, err)
	}
	if _, err := parseFlags([]string{"-config", "/does/not/exist"}); err == nil {
		t.Fatal("missing config file accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.conf")
	os.WriteFile(bad, []byte("heartbeat = 5\nfoo.bar = 1\n"), 0o644)
	if _, err := parseFlags([]string{"-config", bad}); err == nil || err.Error() != bad+`:2: unknown key "foo.bar"` {
		t.Fatalf("unknown key: %v", err)
	}
}

// Ensure the identity a configuration file sets is what a new data
// directory gets: its user connects with amqp091-go to its vhost, with a
// password that has a #, and guest does not exist.
func TestRunConfigIdentity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "warren.conf")
	// Definitions loaded at boot: a user with a hash RabbitMQ made (of
	// the password "guest") and a vhost.
	fixture := filepath.Join(dir, "definitions.json")
	defs := `{"users":[{"name":"bob","password_hash":"siG4WwKSzqYQoDCp+2vt09giJSJWHqA249kT9GGResH3dKfS","hashing_algorithm":"rabbit_password_hashing_sha256","tags":[]}],
		"vhosts":[{"name":"bobs"}],"permissions":[{"user":"bob","vhost":"bobs","configure":".*","write":".*","read":".*"}]}`
	if err := os.WriteFile(fixture, []byte(defs), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := `
default_user = alice
default_pass = 's3cret#1'
default_vhost = prod
default_user_tags.monitoring = true
loopback_users = none
load_definitions = ` + fixture + `
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data")
	cfg, err := parseFlags([]string{"-config", path, "-data-dir", dataDir,
		"-amqp-listen", "127.0.0.1:0", "-stream-listen", "", "-http-listen", "", "-prometheus-listen", ""})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan readyAddrs, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, logger, ready) }()
	addrs := waitReady(t, ready, errc)
	uri := func(user, pass, vhost string) string {
		u := url.URL{Scheme: "amqp", User: url.UserPassword(user, pass), Host: addrs.AMQP.String(), Path: "/" + vhost}
		return u.String()
	}

	conn, err := amqp091.Dial(uri("alice", "s3cret#1", "prod"))
	if err != nil {
		t.Fatalf("alice to prod: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("conf-test", true, false, false, false, nil)
	if err != nil || q.Name != "conf-test" {
		t.Fatalf("declare as alice in prod: %v", err)
	}
	conn.Close()

	// bob from the definitions, with his RabbitMQ password.
	conn, err = amqp091.Dial(uri("bob", "guest", "bobs"))
	if err != nil {
		t.Fatalf("bob from load_definitions: %v", err)
	}
	conn.Close()

	for _, c := range []struct{ user, pass, vhost string }{
		{"guest", "guest", ""}, {"guest", "guest", "prod"}, {"alice", "wrong", "prod"},
	} {
		conn, err := amqp091.Dial(uri(c.user, c.pass, c.vhost))
		if err == nil {
			conn.Close()
			t.Fatalf("%s/%s to vhost %q: connected", c.user, c.pass, c.vhost)
		}
		var aerr *amqp091.Error
		if !errors.Is(err, amqp091.ErrCredentials) && !(errors.As(err, &aerr) && aerr.Code == amqp091.AccessRefused) {
			t.Fatalf("%s/%s: %v, want access refused", c.user, c.pass, err)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}

	// The catalog as the files left it: alice with her tag, vhosts prod
	// and bobs, no guest.
	b, err := queues.Open(dataDir, queues.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Authenticate("guest", "guest", nil); !errors.Is(err, queues.ErrAuthFailed) {
		t.Fatalf("guest: %v, want ErrAuthFailed", err)
	}
	if b.VHostExists("/") || !b.VHostExists("prod") || !b.VHostExists("bobs") {
		t.Fatal("vhosts: want prod and bobs, not /")
	}
	u, err := b.Authenticate("alice", "s3cret#1", nil)
	if err != nil || !reflect.DeepEqual(u.Tags, []string{"monitoring"}) {
		t.Fatalf("alice: %+v, %v", u, err)
	}
}

// Ensure loopback_users reaches the broker: a user the file restricts
// connects over loopback and is refused over another address of this
// machine (the test is skipped when it has none).
func TestRunConfigLoopbackUsers(t *testing.T) {
	var other net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && n.IP.IsGlobalUnicast() {
			other = n.IP
			break
		}
	}
	if other == nil {
		t.Skip("no non-loopback IPv4 address")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "warren.conf")
	conf := "default_user = alice\ndefault_pass = pw\nloopback_users.alice = true\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"-config", path, "-data-dir", filepath.Join(dir, "data"),
		"-amqp-listen", ":0", "-stream-listen", "", "-http-listen", "", "-prometheus-listen", ""})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan readyAddrs, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, slog.New(slog.DiscardHandler), ready) }()
	_, port, _ := net.SplitHostPort(waitReady(t, ready, errc).AMQP.String())
	for _, host := range []string{"127.0.0.1", other.String()} {
		conn, err := amqp091.Dial("amqp://alice:pw@" + net.JoinHostPort(host, port) + "/")
		if host == "127.0.0.1" {
			if err != nil {
				t.Fatalf("alice over loopback: %v", err)
			}
			conn.Close()
			continue
		}
		if err == nil {
			conn.Close()
			t.Fatalf("alice from %s: connected, want refused (loopback_users.alice = true)", host)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// waitReady waits for a run started in the test to listen, failing the
// test if it ends or takes more than 10 s.
func waitReady(t *testing.T, ready <-chan readyAddrs, errc <-chan error) readyAddrs {
	t.Helper()
	select {
	case a := <-ready:
		return a
	case err := <-errc:
		t.Fatalf("run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	return readyAddrs{}
}
