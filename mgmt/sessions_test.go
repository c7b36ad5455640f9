package mgmt

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"

	goamqp "github.com/Azure/go-amqp"
)

// Ensure /api/connections/{name}/sessions shows an AMQP 1.0
// connection's sessions and links with RabbitMQ 4.x's fields and
// values, and answers 400 for an AMQP 0-9-1 connection and 404 for a
// missing one.
func TestAMQP10Sessions(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ch, err := dialNamed(t, tb, "guest", "guest", "091").Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	c, err := goamqp.Dial(ctx, "amqp://"+tb.amqpAddr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest"), ContainerID: "sessions-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s1, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := s1.NewSender(ctx, "/queues/q", &goamqp.SenderOptions{Name: "pub-link"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := snd.Send(ctx, goamqp.NewMessage([]byte("m")), nil); err != nil {
			t.Fatal(err)
		}
	}
	rcv, err := s2.NewReceiver(ctx, "/queues/q", &goamqp.ReceiverOptions{Name: "sub-link", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var held []*goamqp.Message
	for range 3 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, m)
	}

	var name string
	for _, co := range tb.guest("GET", "/api/connections", nil).list(t) {
		if co["protocol"] == "AMQP 1-0" {
			name = co["name"].(string)
		}
	}
	if name == "" {
		t.Fatal("no AMQP 1-0 connection listed")
	}
	ss := tb.guest("GET", "/api/connections/"+url.PathEscape(name)+"/sessions", nil).list(t)
	if len(ss) != 2 {
		t.Fatalf("%d sessions, want 2: %v", len(ss), ss)
	}
	in := ss[0]["incoming_links"].([]any)
	if len(in) != 1 || len(ss[0]["outgoing_links"].([]any)) != 0 {
		t.Fatalf("session 0 links: %v", ss[0])
	}
	il := in[0].(map[string]any)
	if il["link_name"] != "pub-link" || il["target_address"] != "/queues/q" || il["snd_settle_mode"] != "mixed" ||
		il["delivery_count"] != json.Number("3") || il["unconfirmed_messages"] != json.Number("0") || il["credit"] == json.Number("0") {
		t.Errorf("incoming link %v", il)
	}
	out := ss[1]["outgoing_links"].([]any)
	if len(out) != 1 || len(ss[1]["incoming_links"].([]any)) != 0 {
		t.Fatalf("session 1 links: %v", ss[1])
	}
	ol := out[0].(map[string]any)
	if ol["link_name"] != "sub-link" || ol["source_address"] != "/queues/q" || ol["queue_name"] != "q" ||
		ol["send_settled"] != false || ol["delivery_count"] != json.Number("3") || ol["credit"] != json.Number("7") {
		t.Errorf("outgoing link %v", ol)
	}
	if ss[1]["outgoing_unsettled_deliveries"] != json.Number("3") || ss[0]["channel_number"] == ss[1]["channel_number"] {
		t.Errorf("sessions %v", ss)
	}
	for _, m := range held {
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "accepted deliveries settled", func() bool {
		ss := tb.guest("GET", "/api/connections/"+url.PathEscape(name)+"/sessions", nil).list(t)
		return len(ss) == 2 && ss[1]["outgoing_unsettled_deliveries"] == json.Number("0")
	})

	var other string
	for _, co := range tb.guest("GET", "/api/connections", nil).list(t) {
		if co["protocol"] != "AMQP 1-0" {
			other = co["name"].(string)
		}
	}
	r := tb.guest("GET", "/api/connections/"+url.PathEscape(other)+"/sessions", nil)
	want(t, r, 400)
	if r.obj(t)["reason"] != "connection does not use AMQP 1.0" {
		t.Errorf("0-9-1 connection: %s", r.body)
	}
	want(t, tb.guest("GET", "/api/connections/nope/sessions", nil), 404)
}
