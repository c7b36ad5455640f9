package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// Ensure warrenctl drives a real Warren: every verb's request is one
// Warren's API understands, and the answers print as the golden files of
// the fixture tests promise.
func TestAgainstWarren(t *testing.T) {
	w := mgmttest.Start(t)
	ctl := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(context.Background(), append([]string{"--url", w.URL, "-q"}, args...), "", Env{})
	}
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := ctl(args...)
		if code != 0 {
			t.Fatalf("warrenctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	fails := func(wantCode int, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := ctl(args...)
		if code != wantCode || !strings.Contains(errOut, wantErr) {
			t.Fatalf("warrenctl %s: exit %d, want %d with %q\n%s%s", strings.Join(args, " "), code, wantCode, wantErr, out, errOut)
		}
	}
	lines := func(out string) []string { return strings.Split(strings.TrimRight(out, "\n"), "\n") }

	ok("add_vhost", "shop", "--description", "the shop", "--default-queue-type", "quorum")
	ok("add_user", "ann", "pw")
	fails(70, "already exists", "add_user", "ann", "pw")
	ok("set_permissions", "-p", "shop", "ann", "^ann-", ".*", ".*")
	ok("set_user_tags", "ann", "management")
	if got := lines(ok("list_users")); strings.Join(got, "|") != "user\ttags|ann\t[management]|guest\t[administrator]" {
		t.Fatalf("list_users %q", got)
	}
	if got := lines(ok("list_vhosts", "name", "description", "default_queue_type")); strings.Join(got, "|") != "name\tdescription\tdefault_queue_type|/\t\tundefined|shop\tthe shop\tquorum" {
		t.Fatalf("list_vhosts %q", got)
	}
	if got := lines(ok("list_permissions", "-p", "shop")); strings.Join(got, "|") != "user\tconfigure\twrite\tread|ann\t^ann-\t.*\t.*|guest\t.*\t.*\t.*" {
		t.Fatalf("list_permissions %q", got)
	}

	// ann works in her vhost over AMQP; the CLI sees her queue.
	conn, err := amqp091.Dial("amqp://ann:pw@" + w.AMQPAddr + "/shop")
	if err != nil {
		t.Fatalf("ann connects: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("ann-work", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ch.PublishWithContext(context.Background(), "", "ann-work", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclarePassive("ann-work", true, false, false, false, nil); err != nil { // a round trip: the publishes are stored
		t.Fatal(err)
	}
	if got := lines(ok("list_queues", "-p", "shop", "name", "type", "messages", "durable")); strings.Join(got, "|") != "name\ttype\tmessages\tdurable|ann-work\tquorum\t3\ttrue" {
		t.Fatalf("list_queues %q", got)
	}
	ok("purge_queue", "-p", "shop", "ann-work")
	if got := lines(ok("list_queues", "-p", "shop", "name", "messages")); strings.Join(got, "|") != "name\tmessages|ann-work\t0" {
		t.Fatalf("after purge %q", got)
	}

	ok("set_policy", "-p", "shop", "--apply-to", "queues", "--priority", "3", "lim", "^ann", `{"max-length":5}`)
	if got := lines(ok("list_policies", "-p", "shop")); strings.Join(got, "|") != "vhost\tname\tpattern\tapply-to\tdefinition\tpriority|shop\tlim\t^ann\tqueues\t{\"max-length\":5}\t3" {
		t.Fatalf("list_policies %q", got)
	}
	fails(65, "not a valid", "set_policy", "-p", "shop", "bad", ".*", `{"max-length":"x"}`)
	ok("clear_policy", "-p", "shop", "lim")

	// Super streams, stream status, offsets and producers.
	ok("add_super_stream", "inv", "--partitions", "2")
	if got := lines(ok("list_queues", "name", "type")); strings.Join(got, "|") != "name\ttype|inv-0\tstream|inv-1\tstream" {
		t.Fatalf("partitions %q", got)
	}
	if out := ok("list_bindings", "source_name", "destination_name", "routing_key"); !strings.Contains(out, "inv\tinv-1\t1\n") {
		t.Fatalf("list_bindings %q", out)
	}
	if out := ok("stream_status", "inv-0"); !strings.Contains(out, "writer\twarren@test") {
		t.Fatalf("stream_status %q", out)
	}
	ok("reset_stream_offset", "inv-0", "app", "first")
	if out := ok("list_stream_offsets"); !strings.Contains(out, "inv-0\tapp\t0") {
		t.Fatalf("list_stream_offsets %q", out)
	}
	ok("delete_super_stream", "inv")
	if out := ok("list_queues"); strings.Contains(out, "inv-") {
		t.Fatalf("partitions left: %q", out)
	}

	// Definitions out and back.
	file := filepath.Join(t.TempDir(), "defs.json")
	ok("export_definitions", file)
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"ann-work"`) {
		t.Fatalf("export: %v %s", err, b)
	}

	// ann's connection is listed, and closing it reaches her client.
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	out := lines(ok("list_connections", "name", "user", "vhost", "channels"))
	if len(out) != 2 || !strings.HasSuffix(out[1], "\tann\tshop\t1") {
		t.Fatalf("list_connections %q", out)
	}
	name := strings.Split(out[1], "\t")[0]
	ok("close_connection", name, "maintenance")
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 || !strings.Contains(e.Reason, "maintenance") {
			t.Fatalf("close seen by the client: %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client never saw its connection closed")
	}

	ok("delete_queue", "-p", "shop", "ann-work")
	fails(65, "", "delete_queue", "-p", "shop", "ann-work")
	ok("clear_permissions", "-p", "shop", "ann")
	ok("delete_user", "ann")
	fails(67, `User "ann" does not exist`, "delete_user", "ann")
	ok("delete_vhost", "shop")
	if got := lines(ok("list_vhosts")); strings.Join(got, "|") != "name|/" {
		t.Fatalf("list_vhosts after delete %q", got)
	}
	code, _, errOut := runCLI(context.Background(), []string{"--url", w.URL, "--password", "wrong", "list_users"}, "", Env{})
	if code != 69 || !strings.Contains(errOut, "Login failed") {
		t.Fatalf("wrong password: %d %s", code, errOut)
	}
}
