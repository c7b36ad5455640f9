package mgmt

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Ensure a definitions file exported by RabbitMQ 3.10.8 imports through
// the API, its users log in with their RabbitMQ passwords, and Warren's
// export imports into a fresh Warren unchanged.
func TestDefinitionsFromRabbitMQ(t *testing.T) {
	fixture, err := os.ReadFile("../definitions/testdata/rabbitmq-3.10.8.json")
	if err != nil {
		t.Fatal(err)
	}
	tb := startBroker(t)
	want(t, tb.guest("POST", "/api/definitions", string(fixture)), 204)

	if got := names(tb.guest("GET", "/api/vhosts", nil).list(t)); !slices.Equal(got, []string{"/", "defs-a", "defs-b"}) {
		t.Fatalf("vhosts %v", got)
	}
	if got := names(tb.guest("GET", "/api/queues/defs-a", nil).list(t)); !slices.Equal(got, []string{"defs-cq", "defs-dead", "defs-qq", "defs-stream", "defs-transient"}) {
		t.Fatalf("queues of defs-a %v", got)
	}
	if q := tb.guest("GET", "/api/queues/defs-a/defs-qq", nil).obj(t); q["type"] != "quorum" {
		t.Fatalf("defs-qq %v", q)
	}
	ss := tb.guest("GET", "/api/stream/super-streams/defs-b", nil).list(t)
	if len(ss) != 1 || len(ss[0]["partitions"].([]any)) != 3 {
		t.Fatalf("super streams %v", ss)
	}
	// defs-alice's SHA-256 hash and defs-bob's SHA-512 one, as RabbitMQ
	// made them.
	for _, c := range []struct{ user, pass, vhost string }{{"defs-alice", "alice-secret", "defs-a"}, {"defs-bob", "bob-secret", "defs-a"}} {
		conn, err := amqp091.Dial("amqp://" + c.user + ":" + c.pass + "@" + tb.amqpAddr + "/" + c.vhost)
		if err != nil {
			t.Fatalf("%s logs in with the RabbitMQ password: %v", c.user, err)
		}
		conn.Close()
	}

	exported := tb.guest("GET", "/api/definitions?download=warren.json", nil)
	want(t, exported, 200)
	if cd := exported.header.Get("Content-Disposition"); cd != `attachment; filename=warren.json` {
		t.Fatalf("Content-Disposition %q", cd)
	}
	// Into a fresh Warren by a multipart upload, as the console sends it;
	// exporting there gives the same document.
	tb2 := startBroker(t)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "warren.json")
	fw.Write(exported.body)
	mw.Close()
	req, _ := http.NewRequest("POST", tb2.url+"/api/definitions", &form)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("multipart import: %v %v", res.StatusCode, err)
	}
	res.Body.Close()
	again := tb2.guest("GET", "/api/definitions", nil)
	var a, b map[string]any
	json.Unmarshal(exported.body, &a)
	json.Unmarshal(again.body, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("export after import differs:\n%s\n%s", ja, jb)
	}

	// One vhost's definitions into another vhost.
	one := tb.guest("GET", "/api/definitions/defs-b", nil)
	want(t, one, 200)
	want(t, tb2.guest("PUT", "/api/vhosts/copy", nil), 201)
	want(t, tb2.guest("POST", "/api/definitions/copy", string(one.body)), 204)
	if got := names(tb2.guest("GET", "/api/queues/copy", nil).list(t)); !slices.Contains(got, "defs-b-qq") {
		t.Fatalf("queues of copy %v", got)
	}
	want(t, tb2.guest("POST", "/api/definitions/nope", string(one.body)), 404)
}

// Ensure a bad document is a 400 with a reason and changes nothing.
func TestDefinitionsRefusedWhole(t *testing.T) {
	tb := startBroker(t)
	before := tb.guest("GET", "/api/definitions", nil).body
	want(t, tb.guest("POST", "/api/definitions", "{not json"), 400)
	bad := `{"vhosts":[{"name":"new-vhost"}],
		"users":[{"name":"u","password_hash":"","tags":[]}],
		"queues":[{"name":"q","vhost":"new-vhost","durable":true,"auto_delete":false,"arguments":{}}],
		"exchanges":[{"name":"x","vhost":"new-vhost","type":"no-such-type","durable":true,"auto_delete":false,"internal":false,"arguments":{}}]}`
	r := tb.guest("POST", "/api/definitions", bad)
	want(t, r, 400)
	if o := r.obj(t); o["error"] != "bad_request" || o["reason"] == "" {
		t.Fatalf("refusal %v", o)
	}
	if after := tb.guest("GET", "/api/definitions", nil).body; !bytes.Equal(before, after) {
		t.Fatalf("a refused import changed the broker:\n%s\n%s", before, after)
	}
	want(t, tb.call("POST", "/api/definitions", "nobody", "x", bad), 401)
	want(t, tb.guest("PUT", "/api/users/m", map[string]any{"password": "pw", "tags": "monitoring"}), 201)
	want(t, tb.call("GET", "/api/definitions", "m", "pw", nil), 401, "not_authorised", "Not administrator user")
}
