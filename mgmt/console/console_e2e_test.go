package console_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// Ensure the console works end to end in a real browser: log in, create
// a queue, publish to it and watch its depth rise, consume with a client
// and watch it fall, close a client's connection with a reason the client
// receives, and every other page shows what the broker holds.
func TestConsoleEndToEnd(t *testing.T) {
	tb := mgmttest.Start(t)
	// mgmttest's broker has guest/guest (administrator, loopback only);
	// the console logs in as an administrator of our own.
	apiCall(t, tb, "PUT", "/api/users/ann", map[string]any{"password": "s3cret", "tags": "administrator"}, nil)
	apiCall(t, tb, "PUT", "/api/permissions/%2F/ann", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, nil)
	b := newBrowser(t, tb)

	// Log in: a wrong password is refused on the form, then ann gets in.
	b.do("open the console", chromedp.Navigate(tb.URL+"/"))
	b.expect(401, "/api/whoami")
	b.login("ann", "wrong")
	b.waitContains(".login-error", "Login failed")
	b.shot("01-login-refused")
	b.login("ann", "s3cret")
	b.waitText("#whoami", "ann")
	b.waitText("#node-name", "warren@test")
	// The credentials are in sessionStorage, never in the URL.
	if loc, _ := chromedp.Run(b.ctx, chromedp.Location()); strings.Contains(loc, "s3cret") {
		t.Fatalf("the password is in the URL %s", loc)
	}

	// Create a queue from the page.
	b.visit("/queues", "#add-queue-name")
	b.do("add queue console-q", b.fill("#add-queue-name", "console-q"), click("#add-queue"))
	b.waitContains("#queues-table", "console-q")
	var q struct {
		Type     string `json:"type"`
		Messages int    `json:"messages"`
		Policy   string `json:"policy"`
	}
	apiCall(t, tb, "GET", "/api/queues/%2F/console-q", nil, &q)
	if q.Type != "classic" {
		t.Fatalf("console-q is %q, want classic", q.Type)
	}
	b.shot("02-queues")

	// Publish three messages from the queue's page: the depth rises.
	b.clickText("#queues-table a", "console-q")
	b.waitText("#queue-name", "console-q")
	for i := range 3 {
		b.do("publish", b.fill("#publish-payload", fmt.Sprintf("hello %d from the console", i)), click("#publish"))
		b.waitText(statValue("queue-messages"), strconv.Itoa(i+1))
	}
	b.waitText(statValue("queue-ready"), "3")
	// Get messages (requeued): the payload shows and the depth stays.
	b.do("get messages", b.fill("#get-count", "2"), click("#get-messages"))
	b.waitContains("#got-messages", "hello 0 from the console")
	b.waitContains("#got-messages", "hello 1 from the console")
	b.waitText(statValue("queue-messages"), "3")
	b.shot("03-queue-published")

	// Consume with amqp091-go: the page's depth falls on its own refresh.
	conn, err := amqp091.Dial("amqp://ann:s3cret@" + tb.AMQPAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	dels, err := ch.Consume("console-q", "console-consumer", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		select {
		case d := <-dels:
			if want := fmt.Sprintf("hello %d from the console", i); string(d.Body) != want {
				t.Fatalf("message %d: %q, want %q", i, d.Body, want)
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitFor):
			t.Fatal("no delivery")
		}
	}
	b.waitText(statValue("queue-messages"), "0")
	b.waitText(statValue("queue-consumers"), "1")
	b.waitContains("#page-queue", "console-consumer")
	b.shot("04-queue-consumed")

	// Purge, on a queue without a consumer.
	b.visit("/queues", "#add-queue-name")
	b.do("add queue console-purge", b.fill("#add-queue-name", "console-purge"), click("#add-queue"))
	b.waitContains("#queues-table", "console-purge")
	b.visit("/queues/"+url.PathEscape("/")+"/console-purge", "#publish-payload")
	for i := range 2 {
		b.do("publish", b.fill("#publish-payload", "to purge"), click("#publish"))
		b.waitText(statValue("queue-messages"), strconv.Itoa(i+1))
	}
	b.clickText("#page-queue button", "Purge messages")
	b.clickText("#page-queue button", "Yes, purge messages")
	b.waitText(statValue("queue-messages"), "0")
	apiCall(t, tb, "GET", "/api/queues/%2F/console-purge", nil, &q)
	if q.Messages != 0 {
		t.Fatalf("console-purge has %d messages after the purge", q.Messages)
	}

	// Exchanges: add one, bind console-q to it with the editor, route a
	// message through it, then remove the binding.
	b.visit("/exchanges", "#exchanges-table")
	b.waitContains("#exchanges-table", "amq.topic")
	b.do("open the add-exchange form", chromedp.Evaluate[chromedp.Void](`document.querySelector('#page-exchanges details').open = true`))
	b.do("add exchange", b.fill("#add-exchange-name", "console-x"), click("#add-exchange"))
	b.waitContains("#exchanges-table", "console-x")
	b.shot("05-exchanges")
	b.clickText("#exchanges-table a", "console-x")
	b.waitText("#exchange-name", "console-x")
	b.do("bind console-q", b.fill("#bind-destination", "console-q"), b.fill("#bind-routing-key", "rk-1"), click("#bind"))
	b.waitContains("#bindings-from", "rk-1")
	var binds []map[string]any
	apiCall(t, tb, "GET", "/api/bindings/%2F/e/console-x/q/console-q", nil, &binds)
	if len(binds) != 1 || binds[0]["routing_key"] != "rk-1" {
		t.Fatalf("bindings %v, want one with key rk-1", binds)
	}
	b.do("publish through console-x", b.fill("#publish-routing-key", "rk-1"), b.fill("#page-exchange #publish-payload", "routed"), click("#page-exchange #publish"))
	select {
	case d := <-dels:
		if string(d.Body) != "routed" || d.Exchange != "console-x" || d.RoutingKey != "rk-1" {
			t.Fatalf("got %q via %q/%q", d.Body, d.Exchange, d.RoutingKey)
		}
		d.Ack(false)
	case <-time.After(waitFor):
		t.Fatal("the message published through console-x did not arrive")
	}
	b.shot("06-exchange-bound")
	b.clickText("#bindings-from button", "Unbind")
	b.clickText("#bindings-from button", "Yes, unbind")
	b.waitContains("#bindings-from", "No bindings.")
	apiCall(t, tb, "GET", "/api/bindings/%2F/e/console-x/q/console-q", nil, &binds)
	if len(binds) != 0 {
		t.Fatalf("bindings %v after unbind", binds)
	}

	// A stream with a named producer and a consumer that stays behind.
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri("rabbitmq-stream://ann:s3cret@" + tb.StreamAddr + "/%2F"))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.DeclareStream("console-s", stream.NewStreamOptions().SetMaxLengthBytes(stream.ByteCapacity{}.MB(100))); err != nil {
		t.Fatal(err)
	}
	prod, err := env.NewProducer("console-s", stream.NewProducerOptions().SetProducerName("console-producer"))
	if err != nil {
		t.Fatal(err)
	}
	confirms := prod.NotifyPublishConfirmation()
	for i := range 20 { // one at a time: each its own chunk
		if err := prod.Send(amqp.NewMessage(fmt.Appendf(nil, "event %d", i))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-confirms:
		case <-time.After(waitFor):
			t.Fatal("no publish confirmation")
		}
	}
	// One credit and no more: the consumer gets the first chunk only.
	got := make(chan struct{}, 1000)
	cons, err := env.NewConsumer("console-s", func(stream.ConsumerContext, *amqp.Message) { got <- struct{}{} },
		stream.NewConsumerOptions().SetConsumerName("console-reader").SetOffset(stream.OffsetSpecification{}.First()).
			SetCreditStrategy(stream.ManualCreditStrategy).SetInitialCredits(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	select {
	case <-got:
	case <-time.After(waitFor):
		t.Fatal("the stream consumer got nothing")
	}

	b.visit("/queues/"+url.PathEscape("/")+"/console-s", "#stream-name")
	b.waitText(statValue("stream-messages"), "20")
	b.waitText(statValue("stream-first"), "0")
	b.waitText(statValue("stream-last"), "19")
	b.waitText(statValue("stream-committed"), "19")
	b.waitText(statValue("stream-segments"), "1")
	b.waitContains("#stream-retention", "max 95.4 MiB")
	b.waitContains("#stream-publishers", "console-producer")
	b.waitContains("#stream-producers", "console-producer")
	var sc []struct {
		OffsetLag int64 `json:"offset_lag"`
		Queue     struct {
			Name string `json:"name"`
		} `json:"queue"`
	}
	apiCall(t, tb, "GET", "/api/stream/consumers/%2F", nil, &sc)
	if len(sc) != 1 || sc[0].OffsetLag <= 0 {
		t.Fatalf("stream consumers %+v: want one lagging", sc)
	}
	lag := strconv.FormatInt(sc[0].OffsetLag, 10)
	b.waitText("#stream-consumers td.lag", lag)
	// The lag chart: one series, its latest value the lag, drawn once two
	// refreshes have seen it.
	b.waitJS("the lag chart's line", `document.querySelectorAll('#lag-chart .legend li').length === 1 && !!document.querySelector('#lag-chart svg path')`)
	b.waitText("#lag-chart .legend-value", lag)
	b.shot("07-stream")
	if os.Getenv("WARREN_CONSOLE_SCREENSHOTS") != "" {
		streamTraffic(t, prod, confirms, cons, 30*time.Second)
	}
	b.docShot("console-stream")

	// Super streams and their partitions.
	b.visit("/superstreams", "#superstreams-list")
	b.do("open the add-super-stream form", chromedp.Evaluate[chromedp.Void](`document.querySelector('#page-superstreams details').open = true`))
	b.do("add super stream invoices", b.fill("#add-superstream-name", "invoices"), click("#add-superstream"))
	b.waitContains(`.superstream[data-name="invoices"]`, "invoices-2")
	if n := b.text(`.superstream[data-name="invoices"] tbody`); strings.Count(n, "invoices-") != 3 {
		t.Fatalf("partitions shown: %q", n)
	}
	b.shot("08-super-streams")

	// Connections: close the amqp091 connection named console-victim.
	victim, err := amqp091.DialConfig("amqp://ann:s3cret@"+tb.AMQPAddr+"/", amqp091.Config{Properties: amqp091.Table{"connection_name": "console-victim"}})
	if err != nil {
		t.Fatal(err)
	}
	closed := victim.NotifyClose(make(chan *amqp091.Error, 1))
	b.visit("/connections", "#connections-table")
	b.waitContains("#connections-table", "console-victim")
	b.waitContains("#connections-table", "stream")
	b.shot("09-connections")
	b.waitJS("the console-victim row's link", `(() => { const r = [...document.querySelectorAll('#connections-table tr')].find((tr) => tr.innerText.includes('console-victim')); if (!r) return false; r.querySelector('a').click(); return true; })()`)
	b.waitContains("#page-connection", "console-victim")
	b.waitContains("#connection-children", "No channels.")
	b.shot("10-connection")
	const reason = "closed by the console test"
	b.expect(404, "/api/connections/") // a refresh under way as it closes
	b.do("close console-victim", b.fill("#close-reason", reason), click("#close-connection"))
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp091.ConnectionForced || !strings.Contains(e.Reason, reason) {
			t.Fatalf("the client was told %+v, want code 320 with %q", e, reason)
		}
	case <-time.After(waitFor):
		t.Fatal("the client was not told its connection closed")
	}
	b.waitJS("the list without console-victim", `location.hash === '#/connections' && !!document.querySelector('#connections-table table') && !document.querySelector('#connections-table').innerText.includes('console-victim')`)

	// A stream connection's page lists its publishers and consumers.
	var spubs, scons []struct {
		Conn struct {
			Name string `json:"name"`
		} `json:"connection_details"`
	}
	apiCall(t, tb, "GET", "/api/stream/publishers", nil, &spubs)
	apiCall(t, tb, "GET", "/api/stream/consumers", nil, &scons)
	if len(spubs) != 1 || len(scons) != 1 {
		t.Fatalf("stream publishers %+v, consumers %+v", spubs, scons)
	}
	for i, c := range []string{spubs[0].Conn.Name, scons[0].Conn.Name} {
		b.visit("/connections/"+url.PathEscape(c), "#connection-children table")
		b.waitText("#connection-children-title", "Publishers and consumers")
		b.waitContains("#connection-children", "console-s")
		b.shot(fmt.Sprintf("10-stream-connection-%d", i))
	}

	// Channels: the consumer's channel, with its consumer and no unacked.
	b.visit("/channels", "#channels-table")
	var chans []map[string]any
	apiCall(t, tb, "GET", "/api/channels", nil, &chans)
	if len(chans) != 1 {
		t.Fatalf("channels %v", chans)
	}
	b.waitContains("#channels-table", chans[0]["name"].(string))
	b.waitContains("#channels-summary", "1\u20131 of 1 channels")
	b.shot("11-channels")

	// Admin: users, virtual hosts, permissions, policies.
	b.visit("/admin/users", "#users-list table")
	b.waitContains("#users-list", "guest")
	b.do("add user bob", b.fill("#add-user-name", "bob"), b.fill("#add-user-password", "b0b"), b.fill("#add-user-tags", "monitoring"), click("#add-user"))
	b.waitContains("#users-list", "bob")
	var bob struct {
		Tags []string `json:"tags"`
	}
	apiCall(t, tb, "GET", "/api/users/bob", nil, &bob)
	if len(bob.Tags) != 1 || bob.Tags[0] != "monitoring" {
		t.Fatalf("bob's tags %v", bob.Tags)
	}
	b.shot("12-users")
	b.do("add user carl", b.fill("#add-user-name", "carl"), b.fill("#add-user-password", "c4rl"), b.fill("#add-user-tags", ""), click("#add-user"))
	b.waitContains("#users-list", "carl")
	b.clickInRow("#users-list", "carl", "Delete")
	b.clickInRow("#users-list", "carl", "Yes, delete")
	b.waitJS("carl gone", `!document.querySelector('#users-list').innerText.includes('carl')`)
	if st := apiStatus(t, tb, "GET", "/api/users/carl"); st != 404 {
		t.Fatalf("carl after delete: %d", st)
	}
	b.visit("/admin/vhosts", "#vhosts-list table")
	b.do("add vhost", b.fill("#add-vhost-name", "console-vh"), click("#add-vhost"))
	b.waitContains("#vhosts-list", "console-vh")
	b.waitJS("console-vh in the vhost picker", `[...document.querySelectorAll('#vhost-select option')].some((o) => o.value === 'console-vh')`)
	b.shot("13-vhosts")
	// The virtual host picker narrows the lists.
	b.visit("/queues", "#queues-table table")
	b.do("pick console-vh", b.fill("#vhost-select", "console-vh"))
	b.waitContains("#queues-summary", "No queues and streams")
	b.do("pick all", b.fill("#vhost-select", ""))
	b.waitContains("#queues-table", "console-q")
	b.visit("/admin/permissions", "#permissions-list table")
	b.waitJS("bob in the user list", `[...document.querySelectorAll('#page-admin-permissions select[name=user] option')].some((o) => o.value === 'bob')`)
	b.do("set bob's permissions",
		b.fill("#page-admin-permissions select[name=user]", "bob"),
		b.fill("#page-admin-permissions select[name=vhost]", "console-vh"),
		b.fill("#page-admin-permissions input[name=write]", "^bob-"),
		click("#set-permission"))
	b.waitContains("#permissions-list", "^bob-")
	var perm map[string]any
	apiCall(t, tb, "GET", "/api/permissions/console-vh/bob", nil, &perm)
	if perm["write"] != "^bob-" || perm["read"] != ".*" {
		t.Fatalf("bob's permissions %v", perm)
	}
	b.shot("14-permissions")
	b.clickInRow("#permissions-list", "^bob-", "Clear")
	b.clickInRow("#permissions-list", "^bob-", "Yes, clear")
	b.waitJS("bob's permissions gone", `!document.querySelector('#permissions-list').innerText.includes('^bob-')`)
	if st := apiStatus(t, tb, "GET", "/api/permissions/console-vh/bob"); st != 404 {
		t.Fatalf("bob's permissions after clearing: %d", st)
	}
	b.visit("/admin/vhosts", "#vhosts-list table")
	b.clickInRow("#vhosts-list", "console-vh", "Delete")
	b.clickInRow("#vhosts-list", "console-vh", "Yes, delete")
	b.waitJS("console-vh gone", `!document.querySelector('#vhosts-list').innerText.includes('console-vh') && ![...document.querySelectorAll('#vhost-select option')].some((o) => o.value === 'console-vh')`)
	if st := apiStatus(t, tb, "GET", "/api/vhosts/console-vh"); st != 404 {
		t.Fatalf("console-vh after delete: %d", st)
	}
	b.visit("/admin/policies", "#policies-list table")
	b.do("add policy",
		b.fill("#page-admin-policies select[name=vhost]", "/"),
		b.fill("#add-policy-name", "console-cap"), b.fill("#add-policy-pattern", "^console-q$"),
		b.fill("#page-admin-policies select[name=apply_to]", "queues"),
		b.fill("#add-policy-definition", `{"max-length": 100}`), click("#add-policy"))
	b.waitContains("#policies-list", "console-cap")
	b.waitContains("#policies-list", "max-length: 100")
	b.shot("15-policies")
	apiCall(t, tb, "GET", "/api/queues/%2F/console-q", nil, &q)
	if q.Policy != "console-cap" {
		t.Fatalf("console-q's policy %q", q.Policy)
	}
	b.visit("/queues/"+url.PathEscape("/")+"/console-q", "#queue-policy")
	b.waitText("#queue-policy", "console-cap")
	b.visit("/admin/policies", "#policies-list table")
	b.clickInRow("#policies-list", "console-cap", "Delete")
	b.clickInRow("#policies-list", "console-cap", "Yes, delete")
	b.waitContains("#policies-list", "No policies.")
	if st := apiStatus(t, tb, "GET", "/api/policies/%2F/console-cap"); st != 404 {
		t.Fatalf("console-cap after delete: %d", st)
	}

	// Definitions: download, then upload a file that adds a queue.
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads,
	}); err != nil {
		t.Fatal(err)
	}
	b.visit("/admin/definitions", "#definitions-summary table")
	b.do("download definitions", click("#download-definitions"))
	var defs struct {
		Users  []struct{ Name string } `json:"users"`
		Queues []struct{ Name string } `json:"queues"`
	}
	var file string
	deadline := time.Now().Add(waitFor)
	for file == "" {
		m, _ := filepath.Glob(filepath.Join(downloads, "warren-definitions-*.json"))
		if len(m) == 1 {
			if data, err := os.ReadFile(m[0]); err == nil && json.Unmarshal(data, &defs) == nil {
				file = m[0]
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no definitions file was downloaded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !hasName(defs.Users, "bob") || !hasName(defs.Queues, "console-q") {
		t.Fatalf("downloaded %s without bob or console-q: %+v", file, defs)
	}
	upload := filepath.Join(t.TempDir(), "more.json")
	if err := os.WriteFile(upload, []byte(`{"queues":[{"name":"from-upload","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("upload definitions", chromedp.SetUploadFiles(chromedp.CSS("#upload-file"), []string{upload}), click("#upload-definitions"))
	b.waitContains("#upload-result", "Imported more.json")
	apiCall(t, tb, "GET", "/api/queues/%2F/from-upload", nil, &q)
	b.shot("16-definitions")
	// Delete the uploaded queue from its page.
	b.visit("/queues/"+url.PathEscape("/")+"/from-upload", "#queue-name")
	// A refresh already under way when the queue goes may get a 404.
	b.expect(404, "/api/queues/%2F/from-upload")
	b.clickText("#page-queue button", "Delete queue")
	b.clickText("#page-queue button", "Yes, delete queue")
	b.waitJS("back on the list", `location.hash === '#/queues'`)
	if st := apiStatus(t, tb, "GET", "/api/queues/%2F/from-upload"); st != 404 {
		t.Fatalf("from-upload after delete: %d", st)
	}

	// For the README's screenshot, half a minute of traffic so the
	// overview's charts have something to show.
	if os.Getenv("WARREN_CONSOLE_SCREENSHOTS") != "" {
		traffic(t, ch, dels, 35*time.Second)
	}

	// The overview: totals as the API has them, and the charts.
	b.visit("/", "#page-overview")
	var ov struct {
		ObjectTotals map[string]int `json:"object_totals"`
	}
	apiCall(t, tb, "GET", "/api/overview", nil, &ov)
	b.waitText(statValue("count-queues"), strconv.Itoa(ov.ObjectTotals["queues"]))
	b.waitText(statValue("count-exchanges"), strconv.Itoa(ov.ObjectTotals["exchanges"]))
	b.waitText(statValue("count-consumers"), strconv.Itoa(ov.ObjectTotals["consumers"]))
	b.waitText(statValue("count-connections"), strconv.Itoa(ov.ObjectTotals["connections"]))
	b.waitContains("#listeners", strings.Split(tb.AMQPAddr, ":")[1])
	b.waitContains("#node-facts", "Go ")
	b.waitContains("#alarms", "No resource alarms")
	for _, s := range []string{"Publish", "Deliver / get", "Ack", "Redeliver"} {
		b.waitContains("#chart-rates .legend", s)
	}
	// The sampler reads every 5 s: two readings draw the lines.
	b.waitJS("the charts' lines", `document.querySelectorAll('#chart-queued svg path').length === 3 && document.querySelectorAll('#chart-rates svg path').length === 4`)
	b.shot("17-overview")
	b.docShot("console-overview")

	// Log out: back to the form, the credentials gone.
	b.do("log out", click("#logout"), chromedp.WaitVisible(chromedp.CSS("#login")))
	if s, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`JSON.stringify(sessionStorage)`)); strings.Contains(s, "Basic") {
		t.Fatalf("credentials left in sessionStorage: %s", s)
	}

	// A user with only the management tag: every tab works without asking
	// for what needs more (any refused request fails the test), and Admin
	// offers what it may see.
	apiCall(t, tb, "PUT", "/api/users/mo", map[string]any{"password": "m0", "tags": "management"}, nil)
	apiCall(t, tb, "PUT", "/api/permissions/%2F/mo", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, nil)
	b.login("mo", "m0")
	b.waitText("#whoami", "mo")
	b.waitContains("#alarms", "monitoring or administrator tag")
	b.visit("/queues", "#queues-table table")
	b.waitContains("#queues-table", "console-q")
	for _, r := range []string{"/connections", "/channels", "/exchanges", "/superstreams"} {
		b.visit(r, "main table")
	}
	b.visit("/admin", "#page-admin-vhosts #vhosts-list table")
	if got := b.text("#page-admin-vhosts .subtabs"); got != "Virtual hosts\nPolicies" {
		t.Errorf("admin tabs for a management user: %q", got)
	}
	b.visit("/admin/policies", "#policies-list table")
	b.shot("18-management-user")
}

// traffic publishes to console-q about 40 times a second for d while
// the consumer acks what arrives (and some of it is redelivered).
func traffic(t *testing.T, ch *amqp091.Channel, dels <-chan amqp091.Delivery, d time.Duration) {
	t.Helper()
	t.Logf("publishing for %v for the README's screenshots", d)
	stop := time.After(d)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := ch.Publish("", "console-q", false, false, amqp091.Publishing{Body: []byte("tick")}); err != nil {
				t.Fatal(err)
			}
		case m := <-dels:
			if i%10 == 0 && !m.Redelivered {
				m.Nack(false, true)
			} else {
				m.Ack(false)
			}
		}
	}
}

// streamTraffic publishes to the stream twice a second for d; the
// consumer gets no credit for the first half (its lag rises), then ten
// chunks' worth every 1.5 s (its lag falls).
func streamTraffic(t *testing.T, prod *stream.Producer, confirms stream.ChannelPublishConfirm, cons *stream.Consumer, d time.Duration) {
	t.Helper()
	t.Logf("publishing to the stream for %v for the README's screenshots", d)
	stop := time.After(d)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := prod.Send(amqp.NewMessage([]byte("more"))); err != nil {
				t.Fatal(err)
			}
			if 2*i >= int(d/(500*time.Millisecond)) && i%3 == 0 {
				if err := cons.Credit(10); err != nil {
					t.Fatal(err)
				}
			}
		case <-confirms:
		}
	}
}

func hasName(items []struct{ Name string }, name string) bool {
	for _, it := range items {
		if it.Name == name {
			return true
		}
	}
	return false
}
