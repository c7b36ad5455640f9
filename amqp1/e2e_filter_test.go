package amqp1

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/streamproto"
)

// Filter links as a go-amqp client builds them.
func streamFilterLink(v any) goamqp.LinkFilter {
	return goamqp.NewLinkFilter(streamFilterName, 0, v)
}

func matchUnfilteredLink(b bool) goamqp.LinkFilter {
	return goamqp.NewLinkFilter(streamMatchUnfilteredName, 0, b)
}

func propsFilterLink(m map[goamqp.Symbol]any) goamqp.LinkFilter {
	return goamqp.NewLinkFilter(propertiesFilterName, propertiesFilterCode, m)
}

func appFilterLink(m map[string]any) goamqp.LinkFilter {
	return goamqp.NewLinkFilter(appPropertiesFilterName, appPropertiesFilterCode, m)
}

func offsetLink(v any) goamqp.LinkFilter { return goamqp.NewLinkFilter(streamOffsetFilter, 0, v) }

// filterRecord is a message the filter tests publish: its body, the
// region it carries as an application property and (unless "") as its
// stream filter value, and the source that published it.
type filterRecord struct {
	body, region, filter, subject, via string
}

// publishFilterMix publishes the mix of messages the filter tests read,
// each confirmed before the next, so that each is a chunk of its own and
// a Bloom filter selects exactly the messages with its values: over AMQP
// 1.0 (filter value in the x-stream-filter-value annotation), AMQP 0-9-1
// (in the x-stream-filter-value header) and the stream protocol (the
// producer's filter function).
func publishFilterMix(t *testing.T, tb *testBroker, name string) []filterRecord {
	t.Helper()
	regions := []string{"eu", "us", "eu", "ap", "us", "eu"}
	var recs []filterRecord
	add := func(via, region string, i int) filterRecord {
		r := filterRecord{body: fmt.Sprintf("%s-%d", via, i), region: region, filter: region, via: via}
		if region == "none" {
			r.filter = ""
		}
		if via == "amqp10" {
			kind := "order"
			if i%2 == 1 {
				kind = "invoice"
			}
			r.subject = fmt.Sprintf("%s.%d", kind, i)
		}
		recs = append(recs, r)
		return r
	}

	_, s := tb.dial(t, nil)
	snd, err := s.NewSender(ctxT(t), "/queues/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := tb.channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	env := startStreamEnv(t, tb)
	filtered, err := env.NewProducer(name, stream.NewProducerOptions().SetFilter(stream.NewProducerFilter(func(m message.StreamMessage) string {
		r, _ := m.GetApplicationProperties()["region"].(string)
		return r
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer filtered.Close()
	// Without a filter value, a producer without a filter: the Go
	// client's filtering producer writes an empty value as a 4-byte -1
	// where the protocol has a 2-byte null string.
	plain, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	confirmsOf := map[*stream.Producer]stream.ChannelPublishConfirm{
		filtered: filtered.NotifyPublishConfirmation(), plain: plain.NotifyPublishConfirmation(),
	}

	for i, region := range append(regions, "none") {
		r := add("amqp10", region, i)
		m := goamqp.NewMessage([]byte(r.body))
		m.ApplicationProperties = map[string]any{"region": region}
		m.Properties = &goamqp.MessageProperties{Subject: &r.subject}
		if r.filter != "" {
			m.Annotations = goamqp.Annotations{"x-stream-filter-value": r.filter}
		}
		if err := snd.Send(ctxT(t), m, nil); err != nil {
			t.Fatal(err)
		}

		r = add("amqp091", region, i)
		h := amqp091.Table{"region": region}
		if r.filter != "" {
			h["x-stream-filter-value"] = r.filter
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctxT(t), "", name, false, false, amqp091.Publishing{Headers: h, Body: []byte(r.body)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctxT(t)); !ok || err != nil {
			t.Fatalf("0-9-1 confirm: %v %v", ok, err)
		}

		r = add("stream", region, i)
		sm := streamamqp.NewMessage([]byte(r.body))
		sm.ApplicationProperties = map[string]any{"region": region}
		prod := filtered
		if r.filter == "" {
			prod = plain
		}
		confirms := confirmsOf[prod]
		if err := prod.Send(sm); err != nil {
			t.Fatal(err)
		}
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("stream publish of %s not confirmed: %v", r.body, c.GetError())
				}
			}
		case <-time.After(wait):
			t.Fatal("no stream publish confirm")
		}
	}
	return recs
}

// startStreamEnv serves the stream protocol on tb's broker and connects
// the stream Go client to it.
func startStreamEnv(t *testing.T, tb *testBroker) *stream.Environment {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp, err := streamproto.NewServer(streamproto.Config{Broker: tb.broker, Advertise: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sp.Serve(ln) }()
	t.Cleanup(func() { sp.Close(); <-done })
	port := ln.Addr().(*net.TCPAddr).Port
	o := stream.NewEnvironmentOptions().SetHost("127.0.0.1").SetPort(port).SetUser("guest").SetPassword("guest").
		SetAddressResolver(stream.AddressResolver{Host: "127.0.0.1", Port: port})
	env, err := stream.NewEnvironment(o)
	if err != nil {
		t.Fatalf("stream.NewEnvironment: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// receiveExactly receives the bodies of want, in order, from a receiver
// with filters, and then nothing more.
func receiveExactly(t *testing.T, s *goamqp.Session, name string, want []string, filters ...goamqp.LinkFilter) *goamqp.Receiver {
	t.Helper()
	rcv, err := s.NewReceiver(ctxT(t), "/queues/"+name, &goamqp.ReceiverOptions{Credit: 100, Filters: filters})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range want {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, string(m.GetData()))
		if err := rcv.AcceptMessage(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %d messages %v\nwant %d %v", len(got), got, len(want), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if m, err := rcv.Receive(ctx, nil); err == nil {
		t.Errorf("one more message: %q", m.GetData())
	}
	return rcv
}

func filterBodies(recs []filterRecord, keep func(filterRecord) bool) []string {
	var out []string
	for _, r := range recs {
		if keep(r) {
			out = append(out, r.body)
		}
	}
	return out
}

// Ensure rabbitmq:stream-filter delivers exactly the chunks whose Bloom
// filter may hold the values asked for, whichever protocol published
// the values, and rabbitmq:stream-match-unfiltered adds the chunks
// without filter values.
func TestStreamBloomFilter(t *testing.T) {
	tb := startBroker(t, Config{})
	declare(t, tb.channel(t), "s", amqp091.Table{"x-queue-type": "stream"})
	recs := publishFilterMix(t, tb, "s")
	_, s := tb.dial(t, nil)

	eu := filterBodies(recs, func(r filterRecord) bool { return r.filter == "eu" })
	if len(eu) != 9 {
		t.Fatalf("%d eu messages published, want 9", len(eu))
	}
	rcv := receiveExactly(t, s, "s", eu, offsetLink("first"), streamFilterLink("eu"))
	if v := rcv.LinkSourceFilterValue(streamFilterName); v != "eu" {
		t.Errorf("attach reply: %s is %v", streamFilterName, v)
	}
	rcv.Close(ctxT(t))

	euAPNone := filterBodies(recs, func(r filterRecord) bool { return r.filter == "eu" || r.filter == "ap" || r.filter == "" })
	rcv = receiveExactly(t, s, "s", euAPNone, offsetLink("first"), streamFilterLink([]any{"eu", "ap"}), matchUnfilteredLink(true))
	if v := rcv.LinkSourceFilterValue(streamMatchUnfilteredName); v != true {
		t.Errorf("attach reply: %s is %v", streamMatchUnfilteredName, v)
	}
	rcv.Close(ctxT(t))

	// An AMQP 0-9-1 consumer's x-stream-filter reads the same chunks.
	ch := tb.channel(t)
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first", "x-stream-filter": "eu"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range eu {
		d := <-ds
		if string(d.Body) != want {
			t.Fatalf("0-9-1 delivery %d: %q, want %q", i, d.Body, want)
		}
		d.Ack(false)
	}
}

// Ensure amqp:properties-filter and amqp:application-properties-filter
// deliver exactly the matching messages, in stream order, alone and
// combined with each other and with the Bloom filter, and that the
// attach reply echoes the filters in place and leaves unknown ones out.
func TestStreamPropertyFilters(t *testing.T) {
	tb := startBroker(t, Config{})
	declare(t, tb.channel(t), "s", amqp091.Table{"x-queue-type": "stream"})
	recs := publishFilterMix(t, tb, "s")
	_, s := tb.dial(t, nil)

	for _, tc := range []struct {
		name    string
		filters []goamqp.LinkFilter
		keep    func(filterRecord) bool
		echoed  []string
	}{
		{"app region", []goamqp.LinkFilter{appFilterLink(map[string]any{"region": "us"})},
			func(r filterRecord) bool { return r.region == "us" }, []string{appPropertiesFilterName}},
		{"app region prefix", []goamqp.LinkFilter{appFilterLink(map[string]any{"region": "&p:a"})},
			func(r filterRecord) bool { return r.region == "ap" }, []string{appPropertiesFilterName}},
		{"subject prefix", []goamqp.LinkFilter{propsFilterLink(map[goamqp.Symbol]any{"subject": "&p:order."})},
			func(r filterRecord) bool { return strings.HasPrefix(r.subject, "order.") }, []string{propertiesFilterName}},
		{"subject suffix and region", []goamqp.LinkFilter{
			propsFilterLink(map[goamqp.Symbol]any{"subject": "&s:.5"}),
			appFilterLink(map[string]any{"region": "eu"}),
		}, func(r filterRecord) bool { return r.subject == "invoice.5" }, []string{propertiesFilterName, appPropertiesFilterName}},
		{"Bloom and app region", []goamqp.LinkFilter{
			streamFilterLink("eu"), appFilterLink(map[string]any{"region": "eu"}),
			goamqp.NewLinkFilter("x-unknown", 0x0000468C00000003, []any{}),
		}, func(r filterRecord) bool { return r.region == "eu" }, []string{streamFilterName, appPropertiesFilterName}},
		{"Bloom eu, app us", []goamqp.LinkFilter{streamFilterLink("eu"), appFilterLink(map[string]any{"region": "us"})},
			func(filterRecord) bool { return false }, []string{streamFilterName, appPropertiesFilterName}},
		{"null needs the key", []goamqp.LinkFilter{appFilterLink(map[string]any{"region": nil, "missing": nil})},
			func(filterRecord) bool { return false }, []string{appPropertiesFilterName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := filterBodies(recs, tc.keep)
			rcv := receiveExactly(t, s, "s", want, append(tc.filters, offsetLink("first"))...)
			defer rcv.Close(ctxT(t))
			for _, name := range append(tc.echoed, streamOffsetFilter) {
				if rcv.LinkSourceFilterValue(name) == nil {
					t.Errorf("attach reply without %s", name)
				}
			}
			if v := rcv.LinkSourceFilterValue("x-unknown"); v != nil {
				t.Errorf("attach reply with the unknown filter: %v", v)
			}
		})
	}
	// A filter RabbitMQ refuses (a property with a reference of the
	// wrong type) is not in place: everything comes, and the reply says
	// so.
	all := filterBodies(recs, func(filterRecord) bool { return true })
	rcv := receiveExactly(t, s, "s", all, offsetLink("first"), propsFilterLink(map[goamqp.Symbol]any{"subject": int64(1)}))
	if v := rcv.LinkSourceFilterValue(propertiesFilterName); v != nil {
		t.Errorf("refused filter echoed: %v", v)
	}
	rcv.Close(ctxT(t))
}

// Ensure messages a filter rejects take no link credit and do not stall
// the link: a receiver with credit 1 behind thousands of rejected
// messages gets the next matching one, and the delivery-count counts the
// transfers only, as RabbitMQ's stream client does.
func TestStreamFilterCredit(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "c", amqp091.Table{"x-queue-type": "stream"})
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const skipped = 5000
	publish := func(from, n int, k string) {
		var last *amqp091.DeferredConfirmation
		for i := from; i < from+n; i++ {
			var err error
			last, err = ch.PublishWithDeferredConfirmWithContext(ctxT(t), "", "c", false, false,
				amqp091.Publishing{Headers: amqp091.Table{"k": k}, Body: fmt.Appendf(nil, "%s%d", k, i)})
			if err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := last.WaitContext(ctxT(t)); !ok || err != nil {
			t.Fatalf("confirm: %v %v", ok, err)
		}
	}
	publish(0, skipped, "no")
	publish(skipped, 1, "yes")

	// go-amqp with credit 1: the matching message, then another
	// published behind thousands more non-matching ones.
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/c", &goamqp.ReceiverOptions{Credit: 1,
		Filters: []goamqp.LinkFilter{offsetLink("first"), appFilterLink(map[string]any{"k": "yes"})}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != fmt.Sprintf("yes%d", skipped) || m.Annotations["x-stream-offset"] != int64(skipped) {
		t.Fatalf("got %q at %v", m.GetData(), m.Annotations["x-stream-offset"])
	}
	rcv.AcceptMessage(ctxT(t), m)
	publish(skipped+1, skipped, "no")
	publish(2*skipped+1, 1, "yes")
	m, err = rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != fmt.Sprintf("yes%d", 2*skipped+1) {
		t.Fatalf("second match: got %q", m.GetData())
	}
	rcv.AcceptMessage(ctxT(t), m)
	rcv.Close(ctxT(t))

	// By hand: credit 1, one transfer, and a delivery-count of 1 after
	// the 5001 records read.
	rc := tb.raw(t)
	rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
	rc.send(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100})
	filter := amqp10.Map{
		{Key: amqp10.Symbol("offset"), Value: amqp10.Described{Descriptor: amqp10.Symbol(streamOffsetFilter), Value: "first"}},
		{Key: amqp10.Symbol("app"), Value: amqp10.Described{Descriptor: uint64(appPropertiesFilterCode), Value: amqp10.Map{{Key: "k", Value: "yes"}}}},
	}
	rc.send(&frame.Attach{Name: "r", Handle: 0, Role: frame.RoleReceiver, SndSettleMode: frame.SndSettled,
		Source: &frame.Source{Address: "/queues/c", Filter: filter}, Target: &frame.Target{}})
	rc.send(&frame.Flow{HasNextIncomingID: true, IncomingWindow: 100, OutgoingWindow: 100,
		Handle: 0, HasHandle: true, DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: 1, HasLinkCredit: true})
	transfers, echoed := 0, false
	for transfers == 0 || !echoed {
		f, err := rc.r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Empty() {
			continue
		}
		p, payload, err := frame.Decode(f.Type, f.Body)
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *frame.Attach:
			if len(p.Source.Filter) != 2 || !slices.Contains(p.OfferedCapabilities, capPropertyFilters) {
				t.Errorf("attach reply: filter %v, offered capabilities %v", p.Source.Filter, p.OfferedCapabilities)
			}
		case *frame.Transfer:
			transfers++
			var m amqp10.Message
			if err := m.UnmarshalBinary(payload); err != nil || string(m.Body.Data[0]) != fmt.Sprintf("yes%d", skipped) {
				t.Fatalf("transfer %d: %v %v", transfers, m.Body, err)
			}
			// Credit is used up: ask for the link's state.
			rc.send(&frame.Flow{HasNextIncomingID: true, NextIncomingID: 1, IncomingWindow: 100, OutgoingWindow: 100,
				Handle: 0, HasHandle: true, DeliveryCount: 1, HasDeliveryCount: true, LinkCredit: 0, HasLinkCredit: true, Echo: true})
		case *frame.Flow:
			if !p.HasHandle {
				continue
			}
			if transfers != 1 || p.DeliveryCount != 1 || p.LinkCredit != 0 {
				t.Fatalf("after %d transfers: delivery-count %d, credit %d; want 1, 0", transfers, p.DeliveryCount, p.LinkCredit)
			}
			echoed = true
		}
	}
}

// Ensure a classic queue's source takes no filter, as its queue applies
// none: the attach reply's filter-set is empty and every message comes.
func TestFiltersOnClassicQueue(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q", nil)
	publish091(t, ch, "q", 3, amqp091.Publishing{Headers: amqp091.Table{"k": "no"}})
	waitReady(t, tb, "q", 3)
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/q", &goamqp.ReceiverOptions{Credit: 10,
		Filters: []goamqp.LinkFilter{appFilterLink(map[string]any{"k": "yes"}), streamFilterLink("x")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{appPropertiesFilterName, streamFilterName} {
		if v := rcv.LinkSourceFilterValue(name); v != nil {
			t.Errorf("attach reply echoes %s: %v", name, v)
		}
	}
	for i := range 3 {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != fmt.Sprintf("m%d", i) {
			t.Fatalf("got %q", m.GetData())
		}
		rcv.AcceptMessage(ctxT(t), m)
	}
}

// Ensure the properties filter reads what AMQP 0-9-1 publishers set, as
// the conversion stores it: message-id as a string, content-type as a
// symbol, and a live receiver gets matching messages published after it
// attached.
func TestPropertyFilterOn091Messages(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/s", &goamqp.ReceiverOptions{Credit: 1, Filters: []goamqp.LinkFilter{
		offsetLink("next"),
		propsFilterLink(map[goamqp.Symbol]any{"message-id": "&p:a-", "content-type": goamqp.Symbol("text/plain")}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if v := rcv.LinkSourceFilterValue(propertiesFilterName); v == nil {
		t.Fatal("attach reply without the properties filter")
	}
	for i, p := range []amqp091.Publishing{
		{MessageId: "a-0", ContentType: "text/plain"},
		{MessageId: "b-1", ContentType: "text/plain"},
		{MessageId: "a-2", ContentType: "application/json"},
		{MessageId: "a-3", ContentType: "text/plain"},
		{ContentType: "text/plain"},
	} {
		p.Body = fmt.Appendf(nil, "m%d", i)
		if err := ch.Publish("", "s", false, false, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"m0", "m3"} {
		m, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != want {
			t.Fatalf("got %q, want %q", m.GetData(), want)
		}
		rcv.AcceptMessage(ctxT(t), m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if m, err := rcv.Receive(ctx, nil); err == nil {
		t.Errorf("one more message: %q", m.GetData())
	}
}
