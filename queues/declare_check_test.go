package queues

import (
	"fmt"
	"testing"
)

// Ensure CheckQueueDeclare answers what DeclareQueue then answers, for
// new, existing, equivalent and refused queues of each type, and creates
// nothing itself.
func TestCheckQueueDeclareAgreesWithDeclare(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "mine", Exclusive: true}, Owner: new(int)}); err != nil {
		t.Fatal(err)
	}
	q := func(name string, durable bool, args map[string]any) QueueDef {
		return QueueDef{VHost: "/", Name: name, Durable: durable, Args: args}
	}
	for i, tc := range []struct {
		def    QueueDef
		exists bool
	}{
		{q("c", true, map[string]any{"x-max-length": int64(5)}), false},
		{q("c", true, map[string]any{"x-max-length": int32(5)}), true},  // equivalent
		{q("c", true, map[string]any{"x-max-length": int64(6)}), true},  // inequivalent
		{q("c", false, map[string]any{"x-max-length": int64(5)}), true}, // durable differs
		{q("c", true, map[string]any{"x-max-length": int64(5), "x-queue-type": "quorum"}), true},
		{q("bad", true, map[string]any{"x-max-length": "many"}), false},
		{q("bad", true, map[string]any{"x-delivery-limit": int64(1)}), false}, // a quorum argument
		{q("amq.x", true, nil), false},
		{q("qq", false, map[string]any{"x-queue-type": "quorum"}), false},
		{q("qq", true, map[string]any{"x-queue-type": "quorum", "x-max-priority": int64(2)}), false},
		{q("qq", true, map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(3)}), false},
		{q("qq", true, map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(3)}), true},
		{q("s", true, map[string]any{"x-queue-type": "stream", "x-max-age": "forever"}), false},
		{q("s", true, map[string]any{"x-queue-type": "stream", "x-message-ttl": int64(1)}), false},
		{q("s", true, map[string]any{"x-queue-type": "stream", "x-max-age": "1D"}), false},
		{q("s", true, map[string]any{"x-queue-type": "stream", "x-max-age": "1D"}), true},
		{q("s", true, map[string]any{"x-queue-type": "stream", "x-max-age": "2D"}), true},
		{q("s", true, nil), true}, // x-queue-type classic against a stream
		{q("c", true, map[string]any{"x-queue-type": "stream"}), true},
		{q("mine", false, nil), true}, // another connection's exclusive queue
	} {
		exists, checkErr := b.CheckQueueDeclare(tc.def)
		_, _, _, declErr := b.DeclareQueue(DeclareOptions{Def: tc.def})
		if exists != tc.exists || fmt.Sprint(checkErr) != fmt.Sprint(declErr) {
			t.Errorf("%d: %s %v: CheckQueueDeclare = %v, %v; DeclareQueue = %v; want exists %v",
				i, tc.def.Name, tc.def.Args, exists, checkErr, declErr, tc.exists)
		}
	}
	// A vhost's default queue type.
	if _, err := b.PutVHost(VHost{Name: "qv", DefaultQueueType: QueueQuorum}); err != nil {
		t.Fatal(err)
	}
	for i, def := range []QueueDef{
		{VHost: "qv", Name: "dq", Durable: true, Args: map[string]any{"x-max-priority": int64(1)}}, // a classic argument
		{VHost: "qv", Name: "dq", Durable: true},
		{VHost: "qv", Name: "dq", Durable: true},
		{VHost: "qv", Name: "dq", Durable: true, Args: map[string]any{"x-queue-type": "classic"}},
	} {
		_, checkErr := b.CheckQueueDeclare(def)
		_, _, _, declErr := b.DeclareQueue(DeclareOptions{Def: def})
		if fmt.Sprint(checkErr) != fmt.Sprint(declErr) {
			t.Errorf("default type %d: CheckQueueDeclare = %v; DeclareQueue = %v", i, checkErr, declErr)
		}
	}
	if _, err := b.CheckQueueDeclare(QueueDef{VHost: "new-vhost", Name: "q", Durable: true}); err != nil {
		t.Errorf("a queue of a vhost to be created: %v", err)
	}
	if _, err := b.CheckQueueDeclare(QueueDef{VHost: "/", Durable: true}); err == nil {
		t.Error("a queue without a name passed")
	}
}

// Ensure CheckExchangeDeclare answers what DeclareExchange then answers.
func TestCheckExchangeDeclareAgreesWithDeclare(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	x := func(name, typ string, args map[string]any) ExchangeDef {
		return ExchangeDef{VHost: "/", Name: name, Type: typ, Durable: true, Args: args}
	}
	for i, tc := range []struct {
		def    ExchangeDef
		exists bool
	}{
		{x("t", "topic", nil), false},
		{x("t", "topic", nil), true},
		{x("t", "fanout", nil), true},
		{x("u", "x-nope", nil), false},
		{x("amq.mine", "direct", nil), false},
		{x("amq.topic", "topic", nil), true},
		{x("amq.topic", "direct", nil), true},
		{x("ae", "direct", map[string]any{"alternate-exchange": int64(1)}), false},
		{x("ae", "direct", map[string]any{"alternate-exchange": "t"}), false},
		{x("ae", "direct", map[string]any{"alternate-exchange": "u"}), true},
		{x("h", "x-consistent-hash", map[string]any{"hash-header": "a", "hash-property": "message_id"}), false},
		{x("", "direct", nil), true},
	} {
		exists, checkErr := b.CheckExchangeDeclare(tc.def)
		declErr := b.DeclareExchange(tc.def)
		if exists != tc.exists || fmt.Sprint(checkErr) != fmt.Sprint(declErr) {
			t.Errorf("%d: %s: CheckExchangeDeclare = %v, %v; DeclareExchange = %v; want exists %v",
				i, tc.def.Name, exists, checkErr, declErr, tc.exists)
		}
	}
}

// Ensure CheckBinding answers what Bind then answers once both ends exist.
func TestCheckBindingAgreesWithBind(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	for _, def := range []ExchangeDef{
		{VHost: "/", Name: "h", Type: ExchangeHeaders}, {VHost: "/", Name: "t", Type: ExchangeTopic},
		{VHost: "/", Name: "ch", Type: ExchangeConsistentHash},
	} {
		if err := b.DeclareExchange(def); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "q"}}); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{"h": ExchangeHeaders, "t": ExchangeTopic, "ch": ExchangeConsistentHash, "amq.direct": ExchangeDirect, "": ExchangeDirect}
	for i, def := range []BindingDef{
		{VHost: "/", Source: "h", Dest: "q", Args: map[string]any{"x-match": "some"}},
		{VHost: "/", Source: "h", Dest: "q", Args: map[string]any{"x-match": "any", "a": int64(1)}},
		{VHost: "/", Source: "t", Dest: "q", Key: "#.#.#"},
		{VHost: "/", Source: "t", Dest: "q", Key: "a.*.#"},
		{VHost: "/", Source: "ch", Dest: "q", Key: "ten"},
		{VHost: "/", Source: "ch", Dest: "q", Key: "10"},
		{VHost: "/", Source: "", Dest: "q", Key: "q"},
		{VHost: "/", Source: "amq.direct", DestKind: DestExchange, Dest: "", Key: "k"},
		{VHost: "/", Source: "amq.direct", DestKind: DestExchange, Dest: "t", Key: "k"},
	} {
		checkErr := CheckBinding(types[def.Source], def)
		bindErr := b.Bind(def)
		if fmt.Sprint(checkErr) != fmt.Sprint(bindErr) {
			t.Errorf("%d: %+v: CheckBinding = %v; Bind = %v", i, def, checkErr, bindErr)
		}
	}
}
