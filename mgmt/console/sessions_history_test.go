package console_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// Ensure an AMQP 1.0 connection's page shows its sessions and links as
// RabbitMQ 4.x's does: a Sessions section instead of Channels, one row
// per session, its incoming links (the client's senders) and outgoing
// links (its receivers) with their names, addresses, queues, filters,
// delivery counts, credit and unsettled deliveries, updated by the
// page's refresh.
func TestConsoleAMQP10Sessions(t *testing.T) {
	tb := mgmttest.Start(t)
	b := newBrowser(t, tb)
	apiCall(t, tb, "PUT", "/api/queues/%2F/q10", map[string]any{"durable": true}, nil)
	apiCall(t, tb, "PUT", "/api/queues/%2F/s10", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "stream"}}, nil)

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := goamqp.Dial(ctx, "amqp://"+tb.AMQPAddr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest"), ContainerID: "console-10"})
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
	snd, err := s1.NewSender(ctx, "/queues/q10", &goamqp.SenderOptions{Name: "console-sender"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := snd.Send(ctx, goamqp.NewMessage([]byte("to the console")), nil); err != nil {
			t.Fatal(err)
		}
	}
	rcv, err := s2.NewReceiver(ctx, "/queues/q10", &goamqp.ReceiverOptions{Name: "console-receiver", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	// And a stream's reader from its first offset, a filter RabbitMQ
	// shows by name.
	strm, err := s2.NewReceiver(ctx, "/queues/s10", &goamqp.ReceiverOptions{Name: "console-stream", Credit: 5,
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter("rabbitmq:stream-offset-spec", 0, "first")}})
	if err != nil {
		t.Fatal(err)
	}
	defer strm.Close(ctx)
	var held []*goamqp.Message
	for range 3 {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, m)
	}

	var conns []struct {
		Name     string `json:"name"`
		Protocol string `json:"protocol"`
	}
	apiCall(t, tb, "GET", "/api/connections", nil, &conns)
	var name string
	for _, co := range conns {
		if co.Protocol == "AMQP 1-0" {
			name = co.Name
		}
	}
	if name == "" {
		t.Fatalf("no AMQP 1-0 connection in %v", conns)
	}

	b.do("open the console", chromedp.Navigate(tb.URL+"/#/connections"))
	b.login("guest", "guest")
	b.visit("/connections/"+url.PathEscape(name), "#sessions")
	b.waitText("#connection-children-title", "Sessions (2)")
	b.waitContains("#page-connection", "AMQP 1-0")
	if n := b.count("#sessions tr.session"); n != 2 {
		t.Fatalf("%d session rows, want 2", n)
	}
	// The sender's session: one incoming link, three deliveries in.
	b.waitText("#sessions .incoming-links td.link-name", "console-sender")
	if got := b.text("#sessions .incoming-links td.address"); got != "/queues/q10" {
		t.Errorf("target address %q", got)
	}
	if got := b.text("#sessions .incoming-links td.delivery-count"); got != "3" {
		t.Errorf("incoming delivery-count %q", got)
	}
	if got := b.text("#sessions .incoming-links td.unconfirmed"); got != "0" {
		t.Errorf("unconfirmed %q", got)
	}
	// The receiver's: one outgoing link from q10, three delivered of
	// ten credits, all three unsettled.
	b.waitText("#sessions .outgoing-links td.link-name", "console-receiver")
	if got := b.text("#sessions .outgoing-links td.address"); got != "/queues/q10" {
		t.Errorf("source address %q", got)
	}
	if got := b.text("#sessions .outgoing-links td.queue"); got != "q10" {
		t.Errorf("source queue %q", got)
	}
	if got := b.text("#sessions .outgoing-links td.delivery-count"); got != "3" {
		t.Errorf("outgoing delivery-count %q", got)
	}
	if got := b.text("#sessions .outgoing-links td.credit"); got != "7" {
		t.Errorf("outgoing link-credit %q", got)
	}
	// The stream's reader: second on the same session, its filter
	// named, with descriptor and value in the tooltip.
	streamRow := `[...document.querySelectorAll('#sessions .outgoing-links tbody tr')].find((r) => r.innerText.includes('console-stream'))`
	b.waitJS("the stream reader's row", `!!`+streamRow)
	if got := b.count("#sessions .outgoing-links tbody tr"); got != 2 {
		t.Errorf("%d outgoing links, want 2", got)
	}
	if got := b.evalString(streamRow + `.querySelector('td.queue').innerText.trim()`); got != "s10" {
		t.Errorf("stream reader's queue %q", got)
	}
	if got := b.evalString(streamRow + `.querySelector('abbr.tag').innerText.trim()`); got != "rabbitmq:stream-offset-spec" {
		t.Errorf("filter %q", got)
	}
	if got := b.evalString(streamRow + `.querySelector('abbr.tag').title`); got != "(descriptor: rabbitmq:stream-offset-spec) first" {
		t.Errorf("filter tooltip %q", got)
	}
	unsettled := `[...document.querySelectorAll('#sessions tr.session td.outgoing-unsettled-deliveries')].map((e) => e.innerText.trim()).sort().join(',')`
	b.waitJS("3 unsettled deliveries on one session", unsettled+` === '0,3'`)
	// No links table is in the wrong session.
	if n := b.count("#sessions tr.links"); n != 2 {
		t.Errorf("%d link rows, want 2", n)
	}
	b.shot("amqp10-sessions")

	// Settling them shows on the next refresh.
	for _, m := range held {
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	b.waitJS("the deliveries settled", unsettled+` === '0,0'`)

	// The queue link goes to the queue's page.
	b.clickText("#sessions .outgoing-links td.queue a", "q10")
	b.waitText("#queue-name", "q10")
}

// Ensure a queue's page shows its history (x-history-max-age,
// x-history-max-length-bytes) when it keeps one: messages, size,
// segments, readers, offsets and limits, updated by the refresh as a
// history reader attaches; and no History section for a queue without.
func TestConsoleQueueHistory(t *testing.T) {
	tb := mgmttest.Start(t)
	b := newBrowser(t, tb)
	conn, err := amqp091.Dial("amqp://guest:guest@" + tb.AMQPAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("console-hist", true, false, false, false, amqp091.Table{"x-history-max-age": "7D", "x-history-max-length-bytes": int64(1 << 20)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("console-plain", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4))
	before := time.Now()
	for range 4 {
		if err := ch.Publish("", "console-hist", false, false, amqp091.Publishing{Body: []byte("kept for replay"), DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatal("nacked")
			}
		case <-time.After(waitFor):
			t.Fatal("no confirm")
		}
	}
	cch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := cch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := cch.Consume("console-hist", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		d := <-ds
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := cch.Close(); err != nil {
		t.Fatal(err)
	}
	var q struct {
		Messages int `json:"messages"`
		History  struct {
			Bytes int64 `json:"bytes"`
		} `json:"history"`
	}
	deadline := time.Now().Add(waitFor)
	for apiCall(t, tb, "GET", "/api/queues/%2F/console-hist", nil, &q); q.Messages != 0; apiCall(t, tb, "GET", "/api/queues/%2F/console-hist", nil, &q) {
		if time.Now().After(deadline) {
			t.Fatalf("console-hist still has %d messages", q.Messages)
		}
		time.Sleep(20 * time.Millisecond)
	}

	b.do("open the console", chromedp.Navigate(tb.URL+"/#/queues"))
	b.login("guest", "guest")
	b.visit("/queues/"+url.PathEscape("/")+"/console-hist", "#queue-history")
	b.waitText(statValue("queue-messages"), "0")
	b.waitText(statValue("history-messages"), "4")
	b.waitText(statValue("history-segments"), "1")
	b.waitText(statValue("history-readers"), "0")
	if got := b.text(statValue("history-bytes")); got != fmtBytes(q.History.Bytes) {
		t.Errorf("history size %q, want %q (%d bytes)", got, fmtBytes(q.History.Bytes), q.History.Bytes)
	}
	if got := b.text("#history-offsets"); got != "0 \u2013 3" {
		t.Errorf("offsets %q", got)
	}
	if got := b.text("#history-max-age"); got != "7 d" {
		t.Errorf("max age %q", got)
	}
	if got := b.text("#history-max-length"); got != "1 MiB" {
		t.Errorf("max length %q", got)
	}
	// The oldest message's time, to the second, in UTC.
	first, err := time.Parse("2006-01-02 15:04:05 UTC", b.text("#history-first-timestamp"))
	if err != nil {
		t.Fatal(err)
	}
	if d := first.Sub(before.Truncate(time.Second)); d < 0 || d > waitFor {
		t.Errorf("oldest message at %v, published from %v", first, before)
	}
	b.shot("queue-history")

	// A history reader attaches: the page shows it on its refresh, and
	// the queue's consumers stay 0.
	hch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := hch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := hch.Consume("console-hist", "replay", false, false, false, false, amqp091.Table{"x-stream-offset": "first"}); err != nil {
		t.Fatal(err)
	}
	b.waitText(statValue("history-readers"), "1")
	b.waitText(statValue("queue-consumers"), "0")
	b.waitText(statValue("history-messages"), "4")

	// A queue without history has no History section.
	b.visit("/queues/"+url.PathEscape("/")+"/console-plain", "#queue-name")
	b.waitText("#queue-name", "console-plain")
	b.waitText(statValue("queue-messages"), "0")
	if visible := b.evalBool(`(() => { const s = document.querySelector('#queue-history'); return !!s && s.offsetParent !== null; })()`); visible {
		t.Error("console-plain shows a History section")
	}
}

// evalString evaluates a JavaScript expression.
func (b *browser) evalString(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// count is how many elements match a CSS selector.
func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// evalBool evaluates a JavaScript expression.
func (b *browser) evalBool(expr string) bool {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// fmtBytes is the console's fmtBytes (dom.js) for sizes under 1 MiB.
func fmtBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strconv.FormatFloat(float64(int64(float64(n)/1024*10+0.5))/10, 'f', -1, 64) + " KiB"
}
