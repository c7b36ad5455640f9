package queues

import (
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"slices"
	"testing"
)

func TestPutUserKeepsImportedHashes(t *testing.T) {
	b := openBroker(t, t.TempDir())
	// A RabbitMQ-made SHA-256 hash of "guest" (from a definitions export).
	const sha256Guest = "siG4WwKSzqYQoDCp+2vt09giJSJWHqA249kT9GGResH3dKfS"
	if err := b.PutUser(User{Name: "old", PasswordHash: sha256Guest, HashingAlgorithm: HashSHA256, Tags: []string{"monitoring"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate("old", "guest", nil); err != nil {
		t.Fatalf("imported sha256 hash: %v", err)
	}
	if _, err := b.Authenticate("old", "guessed", nil); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	salt := []byte{1, 2, 3, 4}
	sum := sha512.Sum512(append(slices.Clone(salt), "s3cret"...))
	h512 := base64.StdEncoding.EncodeToString(append(salt, sum[:]...))
	if err := b.PutUser(User{Name: "five12", PasswordHash: h512, HashingAlgorithm: HashSHA512}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate("five12", "s3cret", nil); err != nil {
		t.Fatalf("sha512: %v", err)
	}
	// A user without a password cannot log in with any.
	if err := b.PutUser(User{Name: "nopass"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate("nopass", "", nil); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("passwordless login: %v", err)
	}
	for _, bad := range []User{
		{Name: "x", PasswordHash: "not base64!"},
		{Name: "x", PasswordHash: sha256Guest, HashingAlgorithm: HashSHA512},
		{Name: "x", PasswordHash: sha256Guest, HashingAlgorithm: "rabbit_password_hashing_rot13"},
		{Name: ""},
	} {
		if err := b.PutUser(bad); err == nil {
			t.Errorf("PutUser(%+v) accepted", bad)
		}
	}
	users, err := b.Users()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Name+":"+u.HashingAlgorithm)
	}
	want := []string{"five12:" + HashSHA512, "guest:" + HashSHA256, "nopass:" + HashSHA256, "old:" + HashSHA256}
	if !slices.Equal(names, want) {
		t.Fatalf("users %v, want %v", names, want)
	}
}

func TestVHostMetadataAndPermissionListing(t *testing.T) {
	b := openBroker(t, t.TempDir())
	created, err := b.PutVHost(VHost{Name: "orders", Description: "order flow", Tags: []string{"prod"}, DefaultQueueType: "quorum"})
	if err != nil || !created {
		t.Fatalf("PutVHost: %v %v", created, err)
	}
	created, err = b.PutVHost(VHost{Name: "orders", Description: "changed"})
	if err != nil || created {
		t.Fatalf("PutVHost again: %v %v", created, err)
	}
	v, err := b.GetVHost("orders")
	if err != nil || v.Description != "changed" || len(v.Tags) != 0 || v.DefaultQueueType != "" {
		t.Fatalf("GetVHost: %+v %v", v, err)
	}
	if _, err := b.PutVHost(VHost{Name: "x", DefaultQueueType: "lazy"}); err == nil {
		t.Fatal("bad default queue type accepted")
	}
	if err := b.AddUser("ann", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPermissions("ann", "orders", Permissions{Configure: "^ann-", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTopicPermission(TopicPermission{User: "ann", VHost: "orders", Exchange: "amq.topic", Write: "^eu\\.", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTopicPermission(TopicPermission{User: "ann", VHost: "orders", Exchange: "x", Write: "(", Read: ".*"}); err == nil {
		t.Fatal("bad regexp accepted")
	}
	perms, err := b.AllPermissions()
	if err != nil {
		t.Fatal(err)
	}
	if len(perms) != 2 || perms[0] != (UserPermissions{User: "guest", VHost: "/", Permissions: Permissions{".*", ".*", ".*"}}) ||
		perms[1] != (UserPermissions{User: "ann", VHost: "orders", Permissions: Permissions{"^ann-", ".*", ".*"}}) {
		t.Fatalf("AllPermissions %+v", perms)
	}
	tps, _ := b.TopicPermissions()
	if len(tps) != 1 || tps[0].Write != "^eu\\." {
		t.Fatalf("TopicPermissions %+v", tps)
	}
	if err := b.DeleteVHost("orders"); err != nil {
		t.Fatal(err)
	}
	perms, _ = b.AllPermissions()
	tps, _ = b.TopicPermissions()
	if len(perms) != 1 || len(tps) != 0 {
		t.Fatalf("after vhost deletion: %+v %+v", perms, tps)
	}
	b.PutVHost(VHost{Name: "v2"})
	b.SetTopicPermission(TopicPermission{User: "ann", VHost: "v2", Exchange: "t", Write: ".*", Read: ".*"})
	if err := b.DeleteUser("ann"); err != nil {
		t.Fatal(err)
	}
	if tps, _ = b.TopicPermissions(); len(tps) != 0 {
		t.Fatalf("after user deletion: %+v", tps)
	}
}

func TestBootstrapIdentityFromOptions(t *testing.T) {
	b, err := Open(t.TempDir(), Options{Bootstrap: Bootstrap{User: "admin", Password: "pw", VHost: "prod", Tags: []string{"management"},
		Permissions: &Permissions{Configure: "", Write: ".*", Read: ".*"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.GetUser(DefaultUser); !errors.Is(err, ErrNotFound) {
		t.Fatalf("guest exists: %v", err)
	}
	if b.VHostExists(DefaultVHost) || !b.VHostExists("prod") {
		t.Fatal("vhosts")
	}
	u, err := b.Authenticate("admin", "pw", nil)
	if err != nil || !slices.Equal(u.Tags, []string{"management"}) {
		t.Fatalf("admin: %+v %v", u, err)
	}
	if p, err := b.GetPermissions("admin", "prod"); err != nil || p != (Permissions{"", ".*", ".*"}) {
		t.Fatalf("permissions %+v %v", p, err)
	}
}

// Ensure limits are stored with users and vhosts, kept by a put that
// leaves them nil and cleared by an empty map.
func TestUserAndVHostLimits(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if err := b.PutUser(User{Name: "lim", Limits: map[string]int64{"max-connections": 3}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutUser(User{Name: "lim", Tags: []string{"management"}}); err != nil {
		t.Fatal(err)
	}
	u, err := b.GetUser("lim")
	if err != nil || u.Limits["max-connections"] != 3 || !u.HasTag("management") {
		t.Fatalf("GetUser after a put without limits: %+v %v", u, err)
	}
	if err := b.PutUser(User{Name: "lim", Limits: map[string]int64{}}); err != nil {
		t.Fatal(err)
	}
	if u, _ = b.GetUser("lim"); u.Limits != nil {
		t.Fatalf("limits not cleared: %+v", u.Limits)
	}
	if _, err := b.PutVHost(VHost{Name: "lv", Limits: map[string]int64{"max-queues": 5, "max-connections": -1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutVHost(VHost{Name: "lv", Description: "kept limits"}); err != nil {
		t.Fatal(err)
	}
	v, err := b.GetVHost("lv")
	if err != nil || v.Limits["max-queues"] != 5 || v.Limits["max-connections"] != -1 || v.Description != "kept limits" {
		t.Fatalf("GetVHost after a put without limits: %+v %v", v, err)
	}
	if _, err := b.PutVHost(VHost{Name: "lv", Limits: map[string]int64{}}); err != nil {
		t.Fatal(err)
	}
	if v, _ = b.GetVHost("lv"); v.Limits != nil {
		t.Fatalf("vhost limits not cleared: %+v", v.Limits)
	}
}

func TestBootstrapUserNeedsAPassword(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{Bootstrap: Bootstrap{User: "admin"}}); err == nil {
		t.Fatal("a default user without a password was made")
	}
}

func TestVHostDefaultQueueType(t *testing.T) {
	b := openBroker(t, t.TempDir())
	if _, err := b.PutVHost(VHost{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	declare := func(name string, durable, exclusive bool, args map[string]any) (*Queue, error) {
		q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "v", Name: name, Durable: durable, Exclusive: exclusive, Args: args}, Owner: b})
		return q, err
	}
	if q, err := declare("old", true, false, nil); err != nil || q.Def().Type != QueueClassic {
		t.Fatalf("before a default: %v", err)
	}
	if _, err := b.PutVHost(VHost{Name: "v", DefaultQueueType: QueueQuorum}); err != nil {
		t.Fatal(err)
	}
	q, err := declare("new", true, false, nil)
	if err != nil || q.Def().Type != QueueQuorum {
		t.Fatalf("durable queue without a type: %+v %v", q, err)
	}
	if _, err := declare("new", true, false, nil); err != nil {
		t.Fatalf("redeclare without a type: %v", err)
	}
	if _, err := declare("old", true, false, nil); err != nil {
		t.Fatalf("a classic queue from before the default: %v", err)
	}
	if q, err := declare("excl", true, true, nil); err != nil || q.Def().Type != QueueClassic {
		t.Fatalf("exclusive queue: %v", err)
	}
	if q, err := declare("transient", false, false, nil); err != nil || q.Def().Type != QueueClassic {
		t.Fatalf("transient queue: %v", err)
	}
	if q, err := declare("explicit", true, false, map[string]any{"x-queue-type": "classic"}); err != nil || q.Def().Type != QueueClassic {
		t.Fatalf("explicit classic: %v", err)
	}
	if _, err := b.PutVHost(VHost{Name: "v", DefaultQueueType: QueueStream}); err != nil {
		t.Fatal(err)
	}
	if q, err := declare("s", true, false, nil); err != nil || q != nil {
		t.Fatalf("stream default: %v %v", q, err)
	}
	if _, ok := b.LookupStream("v", "s"); !ok {
		t.Fatal("no stream made by the default type")
	}
}
