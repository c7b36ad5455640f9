package mgmt

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Ensure /api/vhost-limits and /api/user-limits set, list and clear
// limits with RabbitMQ's shapes, codes and reasons, and that the broker
// enforces what they set.
func TestLimitsEndpoints(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/vhost-limits/%2F/max-connections", map[string]any{"value": 1}), 204)
	want(t, tb.guest("PUT", "/api/vhost-limits/%2F/max-queues", map[string]any{"value": 10}), 204)
	want(t, tb.guest("PUT", "/api/vhost-limits/%2F/bogus", map[string]any{"value": 2}), 400,
		"bad_request", "Validation failed\n\nUnrecognised terms [{<<\"bogus\">>,2}] in limits\n")
	want(t, tb.guest("PUT", "/api/vhost-limits/%2F/max-queues", map[string]any{}), 400, "bad_request", "[{key_missing,value}]")
	want(t, tb.guest("PUT", "/api/vhost-limits/nope/max-queues", map[string]any{"value": 1}), 404)
	want(t, tb.guest("GET", "/api/vhost-limits/nope", nil), 404)
	for _, path := range []string{"/api/vhost-limits", "/api/vhost-limits/%2F"} {
		l := tb.guest("GET", path, nil).list(t)
		if len(l) != 1 || l[0]["vhost"] != "/" || num(t, l[0]["value"].(map[string]any)["max-connections"]) != 1 ||
			num(t, l[0]["value"].(map[string]any)["max-queues"]) != 10 {
			t.Fatalf("%s: %v", path, l)
		}
	}

	c, err := amqp091.Dial(tb.amqpURL("guest", "guest", "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = amqp091.Dial(tb.amqpURL("guest", "guest", "/"))
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 530 || ae.Reason != "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (1) is reached" {
		t.Fatalf("second connection: %v", err)
	}
	want(t, tb.guest("DELETE", "/api/vhost-limits/%2F/max-connections", nil), 204)
	c2, err := amqp091.Dial(tb.amqpURL("guest", "guest", "/"))
	if err != nil {
		t.Fatalf("after the delete: %v", err)
	}
	c2.Close()
	want(t, tb.guest("DELETE", "/api/vhost-limits/%2F/max-queues", nil), 204)
	if l := tb.guest("GET", "/api/vhost-limits", nil).list(t); len(l) != 0 {
		t.Fatalf("after clearing: %v", l)
	}

	want(t, tb.guest("PUT", "/api/user-limits/guest/max-channels", map[string]any{"value": 5}), 204)
	want(t, tb.guest("PUT", "/api/user-limits/guest/max-channels", map[string]any{"value": "x"}), 400,
		"bad_request", "max-channels should be a number, actually was <<\"x\">>")
	want(t, tb.guest("PUT", "/api/user-limits/guest/bogus", map[string]any{"value": 2}), 400,
		"bad_request", "Unrecognised terms [{<<\"bogus\">>,2}] in user-limits")
	want(t, tb.guest("PUT", "/api/user-limits/nobody/max-channels", map[string]any{"value": 2}), 404)
	for _, path := range []string{"/api/user-limits", "/api/user-limits/guest"} {
		l := tb.guest("GET", path, nil).list(t)
		if len(l) != 1 || l[0]["user"] != "guest" || num(t, l[0]["value"].(map[string]any)["max-channels"]) != 5 {
			t.Fatalf("%s: %v", path, l)
		}
	}
	if u := tb.guest("GET", "/api/users/guest", nil).obj(t); num(t, u["limits"].(map[string]any)["max-channels"]) != 5 {
		t.Fatalf("user: %v", u)
	}
	// A management user reads its own limits only; only administrators set them.
	want(t, tb.guest("PUT", "/api/users/ann", map[string]any{"password": "pw", "tags": "management"}), 201)
	want(t, tb.call("GET", "/api/user-limits/ann", "ann", "pw", nil), 200)
	want(t, tb.call("GET", "/api/user-limits/guest", "ann", "pw", nil), 401)
	want(t, tb.call("GET", "/api/user-limits", "ann", "pw", nil), 401)
	want(t, tb.call("PUT", "/api/user-limits/ann/max-channels", "ann", "pw", map[string]any{"value": 9}), 401)
	want(t, tb.guest("DELETE", "/api/user-limits/guest/max-channels", nil), 204)
	if l := tb.guest("GET", "/api/user-limits", nil).list(t); len(l) != 0 {
		t.Fatalf("after clearing: %v", l)
	}
}
