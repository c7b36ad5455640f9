package mgmt

import (
	"errors"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

func TestAuthenticationAndTagMatrix(t *testing.T) {
	tb := startBroker(t)
	r := tb.call("GET", "/api/overview", "", "", nil)
	want(t, r, 401)
	if got := r.header.Get("WWW-Authenticate"); got != `Basic realm="RabbitMQ Management"` {
		t.Fatalf("WWW-Authenticate %q", got)
	}
	want(t, tb.call("GET", "/api/overview", "guest", "wrong", nil), 401, "not_authorized", "Login failed")
	want(t, tb.call("GET", "/api/overview", "nobody", "x", nil), 401, "not_authorized", "Login failed")

	want(t, tb.guest("PUT", "/api/vhosts/other", nil), 201)
	for _, u := range []struct{ name, tags string }{
		{"plain", ""}, {"mgr", "management"}, {"pol", "policymaker"}, {"mon", "monitoring"}, {"adm", "administrator"},
	} {
		want(t, tb.guest("PUT", "/api/users/"+u.name, map[string]any{"password": "pw", "tags": u.tags}), 201)
	}
	// mgr and pol have permissions in "/" only.
	for _, u := range []string{"mgr", "pol"} {
		want(t, tb.guest("PUT", "/api/permissions/%2F/"+u, map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201)
	}

	cases := []struct {
		user, method, path string
		body               any
		code               int
		reason             string
	}{
		{"plain", "GET", "/api/overview", nil, 401, "Not management user"},
		{"plain", "GET", "/api/whoami", nil, 401, "Not management user"},
		{"mgr", "GET", "/api/whoami", nil, 200, ""},
		{"mgr", "GET", "/api/users", nil, 401, "Not administrator user"},
		{"mgr", "GET", "/api/permissions", nil, 401, "Not administrator user"},
		{"mgr", "PUT", "/api/vhosts/x", nil, 401, "Not administrator user"},
		{"mgr", "GET", "/api/queues/other", nil, 401, "User not authorised to access virtual host"},
		{"mgr", "GET", "/api/queues/%2F", nil, 200, ""},
		{"mgr", "PUT", "/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": 1}}, 401, "Not policymaker user"},
		{"pol", "PUT", "/api/policies/%2F/p", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": 1}}, 201, ""},
		{"pol", "PUT", "/api/policies/other/p", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": 1}}, 401, "User not authorised to access virtual host"},
		{"mon", "GET", "/api/queues/other", nil, 200, ""},
		{"mon", "GET", "/api/users", nil, 401, "Not administrator user"},
		{"mon", "GET", "/api/nodes", nil, 200, ""},
		{"mgr", "GET", "/api/nodes", nil, 401, "Not monitor user"},
		{"adm", "GET", "/api/users", nil, 200, ""},
		{"adm", "GET", "/api/queues/other", nil, 200, ""},
		{"adm", "GET", "/api/vhosts/nope", nil, 404, "Not Found"},
	}
	for _, c := range cases {
		r := tb.call(c.method, c.path, c.user, "pw", c.body)
		if r.code != c.code {
			t.Errorf("%s %s %s: status %d, want %d: %s", c.user, c.method, c.path, r.code, c.code, r.body)
			continue
		}
		if c.reason != "" {
			if o := r.obj(t); o["reason"] != c.reason {
				t.Errorf("%s %s %s: reason %q, want %q", c.user, c.method, c.path, o["reason"], c.reason)
			}
		}
	}
	// Visibility: mgr sees "/" only, mon and adm both vhosts.
	for user, wantVHosts := range map[string][]string{"mgr": {"/"}, "mon": {"/", "other"}, "adm": {"/", "other"}} {
		if got := names(tb.call("GET", "/api/vhosts", user, "pw", nil).list(t)); !slices.Equal(got, wantVHosts) {
			t.Errorf("%s sees vhosts %v, want %v", user, got, wantVHosts)
		}
	}
	who := tb.call("GET", "/api/whoami", "pol", "pw", nil).obj(t)
	if who["name"] != "pol" || !slices.Equal(who["tags"].([]any), []any{"policymaker"}) {
		t.Fatalf("whoami %v", who)
	}
	// Unknown paths and methods.
	want(t, tb.guest("GET", "/api/nothing-here", nil), 404, "Object Not Found", "Not Found")
	r = tb.guest("PATCH", "/api/vhosts/other", nil)
	want(t, r, 405)
	if r.header.Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
}

func TestUsersVHostsPermissionsLifecycle(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/vhosts/orders", map[string]any{"description": "order flow", "tags": "prod,eu", "default_queue_type": "quorum"}), 201)
	want(t, tb.guest("PUT", "/api/vhosts/orders", map[string]any{"description": "order flow v2"}), 204)
	v := tb.guest("GET", "/api/vhosts/orders", nil).obj(t)
	if v["name"] != "orders" || v["description"] != "order flow v2" || !slices.Equal(v["tags"].([]any), []any{"prod", "eu"}) ||
		v["default_queue_type"] != "quorum" || num(t, v["messages"]) != 0 {
		t.Fatalf("vhost %v", v)
	}
	// The creating user gets full permissions in the new vhost, as in RabbitMQ.
	perms := tb.guest("GET", "/api/vhosts/orders/permissions", nil).list(t)
	if len(perms) != 1 || perms[0]["user"] != "guest" || perms[0]["configure"] != ".*" {
		t.Fatalf("permissions of a new vhost: %v", perms)
	}
	want(t, tb.guest("PUT", "/api/vhosts/bad", map[string]any{"default_queue_type": "lazy"}), 400)
	want(t, tb.guest("PUT", "/api/vhosts/bad", "{not json"), 400, "bad_request", "not_json")

	// A user with a password, permissions in the new vhost only.
	want(t, tb.guest("PUT", "/api/users/alice", map[string]any{"password": "s3cret", "tags": []string{"management"}}), 201)
	u := tb.guest("GET", "/api/users/alice", nil).obj(t)
	if u["hashing_algorithm"] != "rabbit_password_hashing_sha256" || !slices.Equal(u["tags"].([]any), []any{"management"}) || u["password_hash"] == "" {
		t.Fatalf("user %v", u)
	}
	want(t, tb.guest("PUT", "/api/permissions/orders/alice", map[string]string{"configure": "^alice-", "write": ".*"}), 400,
		"bad_request", "[{key_missing,read}]")
	want(t, tb.guest("PUT", "/api/permissions/orders/alice", map[string]string{"configure": "(", "write": "", "read": ""}), 400)
	want(t, tb.guest("PUT", "/api/permissions/nope/alice", map[string]string{"configure": "", "write": "", "read": ""}), 400,
		"bad_request", "vhost_or_user_not_found")
	want(t, tb.guest("PUT", "/api/permissions/orders/alice", map[string]string{"configure": "^alice-", "write": ".*", "read": ".*"}), 201)
	want(t, tb.guest("PUT", "/api/permissions/orders/alice", map[string]string{"configure": "^alice-.*", "write": ".*", "read": ".*"}), 204)
	p := tb.guest("GET", "/api/permissions/orders/alice", nil).obj(t)
	if p["configure"] != "^alice-.*" || p["vhost"] != "orders" || p["user"] != "alice" {
		t.Fatalf("permission %v", p)
	}

	// alice connects from loopback over AMQP and the stream protocol.
	conn, err := amqp091.Dial(tb.amqpURL("alice", "s3cret", "orders"))
	if err != nil {
		t.Fatalf("AMQP as alice: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("alice-q", true, false, false, false, nil); err != nil {
		t.Fatalf("declare within permissions: %v", err)
	}
	_, err = ch.QueueDeclare("bob-q", true, false, false, false, nil)
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 403 {
		t.Fatalf("declare outside permissions: %v", err)
	}
	conn.Close()
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri("rabbitmq-stream://alice:s3cret@" + tb.streamAd + "/orders"))
	if err != nil {
		t.Fatalf("stream as alice: %v", err)
	}
	if err := env.DeclareStream("alice-s", nil); err != nil {
		t.Fatalf("stream declare: %v", err)
	}
	env.Close()

	// Changing tags without a password keeps the password (RabbitMQ 3.x
	// would clear it).
	want(t, tb.guest("PUT", "/api/users/alice", map[string]any{"tags": "monitoring"}), 204)
	if c, err := amqp091.Dial(tb.amqpURL("alice", "s3cret", "orders")); err != nil {
		t.Fatalf("password lost on a tag change: %v", err)
	} else {
		c.Close()
	}
	// A password hash as RabbitMQ exports it: this is "guest".
	want(t, tb.guest("PUT", "/api/users/imported", map[string]any{
		"password_hash": "siG4WwKSzqYQoDCp+2vt09giJSJWHqA249kT9GGResH3dKfS", "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": "",
	}), 201)
	want(t, tb.guest("PUT", "/api/users/imported2", map[string]any{"password_hash": "zzz", "tags": ""}), 400)
	want(t, tb.guest("PUT", "/api/permissions/%2F/imported", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201)
	if c, err := amqp091.Dial(tb.amqpURL("imported", "guest", "/")); err != nil {
		t.Fatalf("imported hash: %v", err)
	} else {
		c.Close()
	}

	users := names(tb.guest("GET", "/api/users", nil).list(t))
	if !slices.Equal(users, []string{"alice", "guest", "imported"}) {
		t.Fatalf("users %v", users)
	}
	if got := names(tb.guest("GET", "/api/users/without-permissions", nil).list(t)); len(got) != 0 {
		t.Fatalf("without permissions %v", got)
	}
	want(t, tb.guest("DELETE", "/api/permissions/%2F/imported", nil), 204)
	want(t, tb.guest("DELETE", "/api/permissions/%2F/imported", nil), 404)
	if got := names(tb.guest("GET", "/api/users/without-permissions", nil).list(t)); !slices.Equal(got, []string{"imported"}) {
		t.Fatalf("without permissions %v", got)
	}
	up := tb.guest("GET", "/api/users/alice/permissions", nil).list(t)
	if len(up) != 1 || up[0]["vhost"] != "orders" {
		t.Fatalf("alice's permissions %v", up)
	}

	// Topic permissions.
	want(t, tb.guest("PUT", "/api/topic-permissions/orders/alice", map[string]string{"exchange": "amq.topic", "write": "^eu\\.", "read": ".*"}), 201)
	tp := tb.guest("GET", "/api/topic-permissions/orders/alice", nil).list(t)
	if len(tp) != 1 || tp[0]["exchange"] != "amq.topic" || tp[0]["write"] != "^eu\\." {
		t.Fatalf("topic permissions %v", tp)
	}

	// Deleting the vhost removes its permissions and streams.
	want(t, tb.guest("DELETE", "/api/vhosts/orders", nil), 204)
	want(t, tb.guest("DELETE", "/api/vhosts/orders", nil), 404)
	if up := tb.guest("GET", "/api/users/alice/permissions", nil).list(t); len(up) != 0 {
		t.Fatalf("permissions left after vhost deletion: %v", up)
	}
	if tps := tb.guest("GET", "/api/topic-permissions", nil).list(t); len(tps) != 0 {
		t.Fatalf("topic permissions left: %v", tps)
	}
	want(t, tb.guest("POST", "/api/users/bulk-delete", map[string]any{"users": []string{"alice", "imported", "nobody"}}), 204)
	want(t, tb.guest("GET", "/api/users/alice", nil), 404)
	want(t, tb.guest("DELETE", "/api/users/alice", nil), 404)
}

func TestListParameters(t *testing.T) {
	tb := startBroker(t)
	for _, v := range []string{"v-c", "v-a", "w-b", "v-d"} {
		want(t, tb.guest("PUT", "/api/vhosts/"+v, nil), 201)
	}
	if got := names(tb.guest("GET", "/api/vhosts", nil).list(t)); !slices.Equal(got, []string{"/", "v-a", "v-c", "v-d", "w-b"}) {
		t.Fatalf("natural order %v", got)
	}
	page := tb.guest("GET", "/api/vhosts?page=2&page_size=2&name=v-&sort=name&sort_reverse=true", nil).obj(t)
	if num(t, page["filtered_count"]) != 3 || num(t, page["total_count"]) != 5 || num(t, page["item_count"]) != 1 ||
		num(t, page["page"]) != 2 || num(t, page["page_count"]) != 2 || num(t, page["page_size"]) != 2 {
		t.Fatalf("page %v", page)
	}
	items := page["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["name"] != "v-a" {
		t.Fatalf("page items %v", items)
	}
	re := tb.guest("GET", "/api/vhosts?page=1&name=%5Ev-%5Bac%5D%24&use_regex=true", nil).obj(t)
	if num(t, re["filtered_count"]) != 2 {
		t.Fatalf("regex filter %v", re)
	}
	cols := tb.guest("GET", "/api/vhosts?columns=name,metadata.description&name=w-", nil).list(t)
	if len(cols) != 1 || len(cols[0]) != 2 || cols[0]["name"] != "w-b" || cols[0]["metadata"].(map[string]any)["description"] != "" {
		t.Fatalf("columns %v", cols)
	}
	want(t, tb.guest("GET", "/api/vhosts?page=0", nil), 400, "invalid_pagination_parameters", "Invalid pagination parameters: page number 0, page size undefined")
	want(t, tb.guest("GET", "/api/vhosts?page=1&page_size=501", nil), 400, "invalid_pagination_parameters", "Invalid pagination parameters: page number 1, page size 501")
	want(t, tb.guest("GET", "/api/vhosts?page=9&page_size=1", nil), 400, "page_out_of_range", "Page out of range, page: 9 page size: 1, len: 5")
	want(t, tb.guest("GET", "/api/vhosts?page=x", nil), 400, "bad_request", "Pagination parameters are invalid")
	want(t, tb.guest("GET", "/api/vhosts?page=1&name=(&use_regex=true", nil), 400, "bad_request", "Pagination parameters are invalid")
	// An empty list pages as page 1 of 1.
	empty := tb.guest("GET", "/api/vhosts?page=1&name=zzz", nil).obj(t)
	if num(t, empty["filtered_count"]) != 0 || len(empty["items"].([]any)) != 0 {
		t.Fatalf("empty page %v", empty)
	}
}
