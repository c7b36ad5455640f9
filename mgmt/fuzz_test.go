package mgmt

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAPI sends arbitrary methods, paths, queries and bodies through the
// API as the administrator: every answer is a well-formed status below
// 500 (a panic or an internal error is a bug), and the broker keeps
// answering.
func FuzzAPI(f *testing.F) {
	tb := startBroker(f)
	for _, s := range []struct{ method, path, body string }{
		{"GET", "/api/queues?page=1&page_size=3&sort=message_stats.publish&columns=name,arguments.x", ""},
		{"PUT", "/api/queues/%2F/q1", `{"durable":true,"arguments":{"x-max-length":10,"x-queue-type":"quorum"}}`},
		{"PUT", "/api/exchanges/%2F/x1", `{"type":"headers","arguments":{"alternate-exchange":"ae"}}`},
		{"POST", "/api/bindings/%2F/e/x1/q/q1", `{"routing_key":"k","arguments":{"x-match":"any","a":[1,{"b":2.5}]}}`},
		{"POST", "/api/exchanges/%2F/x1/publish", `{"routing_key":"k","payload":"aGk=","payload_encoding":"base64","properties":{"headers":{"a":1},"priority":3}}`},
		{"POST", "/api/queues/%2F/q1/get", `{"count":5,"ackmode":"reject_requeue_false","encoding":"auto","truncate":2}`},
		{"PUT", "/api/policies/%2F/p", `{"pattern":"^q","definition":{"max-length":1,"dead-letter-exchange":"x1"},"priority":2,"apply-to":"queues"}`},
		{"PUT", "/api/users/u", `{"password_hash":"","tags":["management"]}`},
		{"PUT", "/api/permissions/%2F/u", `{"configure":"","write":".*","read":"^a"}`},
		{"PUT", "/api/vhosts/v%2Fw", `{"description":"d","tags":"a,b","default_queue_type":"stream"}`},
		{"PUT", "/api/stream/super-streams/%2F/ss", `{"binding_keys":["a","b"],"arguments":{"max-age":"1h"}}`},
		{"PUT", "/api/stream/offsets/%2F/ss-a/ref", `{"timestamp":0}`},
		{"DELETE", "/api/queues/%2F/q1?if-empty=true&if-unused=true", ""},
		{"GET", "/api/bindings/%2F/e/amq.default/q/q1/~", ""},
		{"GET", "/api/health/checks/port-listener/99999999999999999999", ""},
	} {
		f.Add(s.method, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t") {
			return
		}
		req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		req.RemoteAddr = "127.0.0.1:1"
		req.SetBasicAuth("guest", "guest")
		rec := httptest.NewRecorder()
		tb.api.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body)
		}
		if rec.Code == 0 || rec.Code < 200 {
			t.Fatalf("no status: %d", rec.Code)
		}
	})
}
