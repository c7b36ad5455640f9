package queues

import (
	"fmt"
	"testing"
)

// Ensure CheckTopicPermission refuses as RabbitMQ does: only on topic
// exchanges the user has a topic permission on, by write (publish) or
// read (bind) pattern, "" matching the empty key only, {username} and
// {vhost} expanded; and that the permissions follow their changes.
func TestCheckTopicPermission(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if err := b.AddUser("ann", "pw"); err != nil {
		t.Fatal(err)
	}
	for _, def := range []ExchangeDef{
		{VHost: "/", Name: "t", Type: ExchangeTopic}, {VHost: "/", Name: "d", Type: ExchangeDirect},
		{VHost: "/", Name: "ti", Type: ExchangeTopic, Internal: true}, {VHost: "/", Name: "other", Type: ExchangeTopic},
	} {
		if err := b.DeclareExchange(def); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []TopicPermission{
		{User: "ann", VHost: "/", Exchange: "t", Write: `^{username}\.{vhost}\.`, Read: ""},
		{User: "ann", VHost: "/", Exchange: "d", Write: "^never$", Read: "^never$"},
		{User: "ann", VHost: "/", Exchange: "ti", Write: "^never$", Read: "^never$"},
		{User: "ann", VHost: "/", Exchange: "amq.topic", Write: "^eu\\.", Read: ".*"},
		{User: "ann", VHost: "/", Exchange: "gone", Write: "^never$", Read: "^never$"},
	} {
		if err := b.SetTopicPermission(p); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(kind Perm, key, x string) string {
		return fmt.Sprintf("ACCESS_REFUSED - %s access to topic '%s' in exchange '%s' in vhost '/' refused for user 'ann'", kind, key, x)
	}
	for _, tc := range []struct {
		user, exchange string
		kind           Perm
		key, err       string
	}{
		{"ann", "t", PermWrite, "ann./.x", ""},
		{"ann", "t", PermWrite, "bob./.x", refused(PermWrite, "bob./.x", "t")},
		{"ann", "t", PermRead, "", ""},
		{"ann", "t", PermRead, "a", refused(PermRead, "a", "t")},
		{"ann", "amq.topic", PermWrite, "eu.x", ""},
		{"ann", "amq.topic", PermWrite, "us.x", refused(PermWrite, "us.x", "amq.topic")},
		{"ann", "other", PermWrite, "anything", ""}, // no topic permission there
		{"ann", "d", PermWrite, "anything", ""},     // not a topic exchange
		{"ann", "ti", PermWrite, "anything", ""},    // internal: publishing refuses it
		{"ann", "gone", PermWrite, "anything", ""},  // missing: publishing refuses it
		{"guest", "t", PermWrite, "anything", ""},   // another user
	} {
		err := b.CheckTopicPermission(tc.user, "/", tc.exchange, tc.kind, tc.key)
		if got := fmt.Sprint(err); (err == nil) != (tc.err == "") || err != nil && got != tc.err {
			t.Errorf("CheckTopicPermission(%s, %s, %s, %q) = %v, want %q", tc.user, tc.exchange, tc.kind, tc.key, err, tc.err)
		}
	}

	if err := b.ClearTopicPermissions("ann", "/", "t"); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckTopicPermission("ann", "/", "t", PermWrite, "bob./.x"); err != nil {
		t.Errorf("after clearing: %v", err)
	}
	if err := b.DeleteUser("ann"); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckTopicPermission("ann", "/", "amq.topic", PermWrite, "us.x"); err != nil {
		t.Errorf("after deleting the user: %v", err)
	}
	if b.topicAuth.snap.Load() != nil {
		t.Error("a snapshot is left with no topic permissions")
	}
}

// Ensure the check allocates nothing, with and without topic
// permissions, when it passes.
func TestCheckTopicPermissionAllocs(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	check := func(user, key string) {
		if err := b.CheckTopicPermission(user, "/", "amq.topic", PermWrite, key); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { check("guest", "any.key") }); n != 0 {
		t.Errorf("no topic permissions: %v allocations", n)
	}
	if err := b.SetTopicPermission(TopicPermission{User: "guest", VHost: "/", Exchange: "amq.topic", Write: `^eu\.`, Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { check("guest", "eu.orders") }); n != 0 {
		t.Errorf("a matching topic permission: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { check("other", "us.orders") }); n != 0 {
		t.Errorf("another user's topic permission: %v allocations", n)
	}
}

// Ensure topic permissions are enforced after a restart.
func TestTopicPermissionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	if err := b.SetTopicPermission(TopicPermission{User: "guest", VHost: "/", Exchange: "amq.topic", Write: `^eu\.`, Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b = openBroker(t, dir)
	defer b.Close()
	if err := b.CheckTopicPermission("guest", "/", "amq.topic", PermWrite, "us.x"); err == nil {
		t.Error("the topic permission is not enforced after a restart")
	}
}
