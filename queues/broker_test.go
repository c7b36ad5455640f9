package queues

import (
	"errors"
	"net"
	"testing"
	"time"
)

func openBroker(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

// Ensure a new data directory gets vhost "/" and guest/guest with all
// permissions, allowed from loopback only.
func TestBootstrapAndAuth(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if !b.VHostExists("/") {
		t.Fatal("no default vhost")
	}
	if _, err := b.Authenticate("guest", "guest", addr("127.0.0.1:5000")); err != nil {
		t.Fatalf("guest from loopback: %v", err)
	}
	if _, err := b.Authenticate("guest", "guest", addr("[::1]:5000")); err != nil {
		t.Fatalf("guest from ::1: %v", err)
	}
	if _, err := b.Authenticate("guest", "guest", addr("10.1.2.3:5000")); !errors.Is(err, ErrLoopbackOnly) {
		t.Fatalf("guest from afar: %v", err)
	}
	if _, err := b.Authenticate("guest", "wrong", addr("127.0.0.1:1")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := b.Authenticate("nobody", "x", addr("127.0.0.1:1")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("unknown user: %v", err)
	}
	for _, k := range []Perm{PermConfigure, PermWrite, PermRead} {
		if err := b.CheckPermission("guest", "/", k, "anything"); err != nil {
			t.Fatalf("guest %v: %v", k, err)
		}
	}
}

// Ensure users, vhosts and permissions persist and are enforced.
func TestUsersVHostsPermissions(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	if err := b.AddVHost("dev"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddVHost("dev"); !errors.Is(err, ErrExists) {
		t.Fatalf("AddVHost twice: %v", err)
	}
	if err := b.AddUser("alice", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPermissions("alice", "dev", Permissions{Configure: "^alice\\.", Write: "^(alice\\.|shared)", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPermissions("alice", "nope", Permissions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("permissions on a missing vhost: %v", err)
	}
	b.Close()

	b = openBroker(t, dir)
	defer b.Close()
	if _, err := b.Authenticate("alice", "s3cret", addr("192.0.2.1:9")); err != nil {
		t.Fatalf("alice from afar (not a loopback user): %v", err)
	}
	if err := b.CheckVHostAccess("alice", "dev"); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckVHostAccess("alice", "/"); !errors.Is(err, ErrAccessRefused) {
		t.Fatalf("alice on /: %v", err)
	}
	if err := b.CheckVHostAccess("alice", "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing vhost: %v", err)
	}
	tests := []struct {
		kind     Perm
		resource string
		ok       bool
	}{
		{PermConfigure, "alice.s", true},
		{PermConfigure, "bob.s", false},
		{PermConfigure, "x.alice.s", false},
		{PermWrite, "shared", true},
		{PermWrite, "sharedx", true}, // unanchored at the end, as in RabbitMQ
		{PermWrite, "other", false},
		{PermRead, "anything", true},
	}
	for _, tc := range tests {
		err := b.CheckPermission("alice", "dev", tc.kind, tc.resource)
		if (err == nil) != tc.ok {
			t.Errorf("%v %q: err=%v, want ok=%v", tc.kind, tc.resource, err, tc.ok)
		}
	}
	if err := b.DeleteUser("alice"); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckVHostAccess("alice", "dev"); err == nil {
		t.Fatal("deleted user keeps access")
	}
	if err := b.DeleteVHost("dev"); err != nil {
		t.Fatal(err)
	}
	if b.VHostExists("dev") {
		t.Fatal("vhost not deleted")
	}
}

// Ensure the password hash is RabbitMQ's salted SHA-256 and checks out.
func TestPasswordHash(t *testing.T) {
	// RabbitMQ's documented example: salt 908D C60A, password "test12".
	salt := []byte{0x90, 0x8d, 0xc6, 0x0a}
	h := hashWithSalt(salt, "test12")
	if h != "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR" {
		t.Fatalf("hash %s", h)
	}
	if !CheckPassword(h, "test12") || CheckPassword(h, "test13") || CheckPassword("garbage", "test12") {
		t.Fatal("CheckPassword")
	}
	if a, b := HashPassword("x"), HashPassword("x"); a == b || !CheckPassword(a, "x") {
		t.Fatal("salts must differ and both must check")
	}
}

// Ensure streams are created with their arguments, survive a restart,
// refuse bad arguments and names, and deletion notifies watchers.
func TestStreamsCatalog(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	if err := b.CreateStream("/", "s1", map[string]string{"max-age": "7D", "stream-filter-size-bytes": "32"}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateStream("/", "s1", map[string]string{"stream-filter-size-bytes": "32", "max-age": "7D"}); !errors.Is(err, ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	wantQErr(t, b.CreateStream("/", "s1", nil), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-max-age' for queue 's1' in vhost '/': received none but current is the value '7D' of type 'longstr'")
	for _, bad := range []map[string]string{
		{"max-age": "abc"}, {"max-age": "0D"}, {"max-length-bytes": "-1"},
		{"stream-filter-size-bytes": "15"}, {"stream-max-segment-size-bytes": "4000000000"},
	} {
		if err := b.CreateStream("/", "bad", bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("args %v: %v", bad, err)
		}
	}
	for _, name := range []string{"", "amq.s"} {
		if err := b.CreateStream("/", name, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if err := b.CreateStream("nope", "s", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing vhost: %v", err)
	}
	s, err := b.Stream("/", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Config(); c.MaxAge != 7*24*time.Hour || c.FilterSize != 32 {
		t.Fatalf("config %+v", c)
	}
	b.Close()

	b = openBroker(t, dir)
	defer b.Close()
	if _, err := b.Stream("/", "s1"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	deleted := make(chan string, 1)
	cancel := b.WatchDeletions(func(vhost, name string) { deleted <- vhost + "|" + name })
	defer cancel()
	if err := b.DeleteStream("/", "s1"); err != nil {
		t.Fatal(err)
	}
	if got := <-deleted; got != "/|s1" {
		t.Fatalf("watcher got %q", got)
	}
	if _, err := b.Stream("/", "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted stream: %v", err)
	}
	if err := b.DeleteStream("/", "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := b.CreateStream("/", "s1", nil); err != nil {
		t.Fatalf("recreate: %v", err)
	}
}

var _ net.Addr = addr("")
