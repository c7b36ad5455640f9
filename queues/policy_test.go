package queues

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func setPolicy(t testing.TB, b *Broker, name, pattern, applyTo string, priority int, def map[string]any) {
	t.Helper()
	must(t, b.SetPolicy(Policy{VHost: "/", Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: def}))
}

// effective returns the name of the policy applying to name, "" if none.
func effective(b *Broker, name, kind string) string {
	p, ok := b.EffectivePolicy("/", name, kind)
	if !ok {
		return ""
	}
	return p.Name
}

// Ensure SetPolicy refuses what RabbitMQ's validators refuse, with their
// texts, and accepts and normalizes what they accept.
func TestPolicyValidation(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	bad := []struct {
		p    Policy
		want []string
	}{
		{Policy{Pattern: ".*"}, []string{"no policy provided"}},
		{Policy{Pattern: "(", Definition: map[string]any{"message-ttl": 1}},
			[]string{"pattern should be regular expression but is invalid: error parsing regexp: missing closing ): `(`"}},
		{Policy{Pattern: strings.Repeat("a", 1025), Definition: map[string]any{"message-ttl": 1}},
			[]string{"pattern must not exceed 1024 bytes"}},
		{Policy{Pattern: ".*", ApplyTo: "topics", Definition: map[string]any{"message-ttl": 1}},
			[]string{"apply-to 'topics' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'"}},
		{Policy{Pattern: "(", ApplyTo: "x", Definition: map[string]any{"foo": "bar"}}, []string{
			`[{<<"foo">>,<<"bar">>}] are not recognised policy settings`,
			"apply-to 'x' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'",
			"pattern should be regular expression but is invalid: error parsing regexp: missing closing ): `(`",
		}},
		{Policy{Pattern: ".*", Definition: map[string]any{"message-ttl": -1}}, []string{"-1 is not a valid message TTL"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"message-ttl": 1.5}}, []string{"1.5 is not a valid message TTL"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"message-ttl": "10"}}, []string{`<<"10">> is not a valid message TTL`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"expires": 0}}, []string{"0 is not a valid queue expiry"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"max-length": -5}}, []string{"-5 is not a valid maximum length"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"max-length-bytes": true}}, []string{"true is not a valid maximum length in bytes"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"overflow": "drop-tail"}}, []string{`<<"drop-tail">> is not a valid overflow value`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"dead-letter-exchange": 1}}, []string{"1 is not a valid dead letter exchange name"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"dead-letter-routing-key": nil}}, []string{"null is not a valid dead letter routing key"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"delivery-limit": "5"}}, []string{`<<"5">> is not a valid delivery limit`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"alternate-exchange": 7}}, []string{"7 is not a valid alternate exchange name"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"max-age": "0D"}}, []string{`<<"0D">> is not a valid max age`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"max-age": "7d"}}, []string{`<<"7d">> is not a valid max age`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"max-age": 7}}, []string{`7 is not a valid max age`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"stream-max-segment-size-bytes": 3_000_000_001}},
			[]string{"3000000001 is not a valid segment size"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"stream-filter-size-bytes": 15}},
			[]string{"15 is not a valid filter size. Valid range is 16-255"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"queue-mode": "fast"}}, []string{`<<"fast">> is not a valid queue-mode value`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"queue-version": 3}}, []string{"3 is not a valid queue-version value"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"queue-master-locator": "client-local"}},
			[]string{"use of deprecated queue-master-locator argument is not permitted"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"delayed-retry-type": "all"}},
			[]string{"delayed-retry-min is required when delayed-retry-type is all"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"delayed-retry-min": 10, "delayed-retry-max": 5}},
			[]string{"delayed-retry-max (5) must not be smaller than delayed-retry-min (10)"}},
		// A known key's error is reported before the unknown keys.
		{Policy{Pattern: ".*", Definition: map[string]any{"zzz": 1, "expires": -1}}, []string{"-1 is not a valid queue expiry"}},
	}
	for _, tc := range bad {
		tc.p.VHost, tc.p.Name = "/", "p"
		err := b.SetPolicy(tc.p)
		var pe *PolicyError
		if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("SetPolicy(%+v): got %v, want a *PolicyError", tc.p.Definition, err)
		}
		if !slices.Equal(pe.Reasons, tc.want) {
			t.Errorf("SetPolicy(%+v):\ngot  %q\nwant %q", tc.p.Definition, pe.Reasons, tc.want)
		}
	}
	if ps := b.Policies("/"); len(ps) != 0 {
		t.Fatalf("refused policies stored: %+v", ps)
	}

	// Every key RabbitMQ 4.3 accepts, with values as encoding/json or Go
	// code gives them.
	var fromJSON map[string]any
	must(t, json.Unmarshal([]byte(`{"message-ttl": 1000, "expires": 1, "max-length": 0, "max-length-bytes": 10,
		"overflow": "reject-publish-dlx", "dead-letter-exchange": "dlx", "dead-letter-routing-key": "",
		"delivery-limit": -1, "alternate-exchange": "ae", "max-age": "7D", "stream-max-segment-size-bytes": 0,
		"stream-filter-size-bytes": 16, "queue-mode": "lazy", "queue-version": 2, "consumer-timeout": 0,
		"consumer-disconnected-timeout": 5, "dead-letter-strategy": "at-least-once", "max-in-memory-length": 1,
		"max-in-memory-bytes": 2, "queue-leader-locator": "balanced", "initial-cluster-size": 0,
		"target-group-size": 3, "delayed-retry-type": "failed", "delayed-retry-min": 10, "delayed-retry-max": 10}`), &fromJSON))
	p := Policy{VHost: "/", Name: "all-keys", Pattern: "", Definition: fromJSON}
	must(t, b.SetPolicy(p))
	got, err := b.Policy("/", "all-keys")
	must(t, err)
	if got.ApplyTo != PolicyApplyAll {
		t.Errorf("apply-to %q, want all", got.ApplyTo)
	}
	for k, v := range got.Definition {
		switch v.(type) {
		case int64, string:
		default:
			t.Errorf("%s: %T %v not normalized", k, v, v)
		}
	}
	if got.Definition["message-ttl"] != int64(1000) || got.Definition["overflow"] != "reject-publish-dlx" {
		t.Errorf("definition %v", got.Definition)
	}
	must(t, b.SetPolicy(Policy{VHost: "/", Name: "ints", Pattern: "x", Definition: map[string]any{
		"message-ttl": int8(5), "max-length": uint32(7), "expires": json.Number("9"), "dead-letter-exchange": []byte("d"),
	}}))
	got, _ = b.Policy("/", "ints")
	want := map[string]any{"message-ttl": int64(5), "max-length": int64(7), "expires": int64(9), "dead-letter-exchange": "d"}
	if !reflect.DeepEqual(got.Definition, want) {
		t.Errorf("got %v, want %v", got.Definition, want)
	}

	// A missing vhost.
	if err := b.SetPolicy(Policy{VHost: "nope", Name: "p", Pattern: ".*", Definition: map[string]any{"expires": 1}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetPolicy in a missing vhost: %v", err)
	}
	// Policy and ClearPolicy of a missing policy.
	if _, err := b.Policy("/", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Policy: %v", err)
	}
	if err := b.ClearPolicy("/", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ClearPolicy: %v", err)
	}
	if err := b.ClearPolicy("nope", "p"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ClearPolicy in a missing vhost: %v", err)
	}
}

// Ensure the matching policy with the highest priority applies, ties go
// to the smallest name, a cleared policy gives way to the next, and
// Policies lists in rabbitmqctl's order.
func TestPolicyPriority(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	ttl := map[string]any{"message-ttl": 1}
	setPolicy(t, b, "low", ".*", "", 0, ttl)
	setPolicy(t, b, "high", "^orders", "", 10, ttl)
	setPolicy(t, b, "mid-b", "^orders", "", 5, ttl)
	setPolicy(t, b, "mid-a", "^orders", "", 5, ttl)
	for _, tc := range []struct{ name, want string }{
		{"orders.eu", "high"},
		{"billing", "low"},
	} {
		if got := effective(b, tc.name, QueueClassic); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	must(t, b.ClearPolicy("/", "high"))
	if got := effective(b, "orders.eu", QueueClassic); got != "mid-a" {
		t.Errorf("after clearing high: got %q, want mid-a", got)
	}
	// Raising a policy's priority by setting it again.
	setPolicy(t, b, "mid-b", "^orders", "", 6, ttl)
	if got := effective(b, "orders.eu", QueueClassic); got != "mid-b" {
		t.Errorf("after raising mid-b: got %q, want mid-b", got)
	}
	// A negative priority is allowed.
	setPolicy(t, b, "neg", "^billing$", "", -1, ttl)
	if got := effective(b, "billing", QueueClassic); got != "low" {
		t.Errorf("billing: got %q, want low", got)
	}
	var names []string
	for _, p := range b.Policies("/") {
		names = append(names, p.Name)
	}
	if want := []string{"neg", "low", "mid-a", "mid-b"}; !slices.Equal(names, want) {
		t.Errorf("Policies: got %v, want %v", names, want)
	}
}

// Ensure apply-to selects exchanges, all queues or one queue type, and a
// policy with a key the queue type does not support does not apply to it.
func TestPolicyApplyTo(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	kinds := []string{PolicyKindExchange, QueueClassic, QueueQuorum, QueueStream}
	for _, tc := range []struct {
		applyTo string
		want    []bool // by kind
	}{
		{PolicyApplyAll, []bool{true, true, true, true}},
		{PolicyApplyExchanges, []bool{true, false, false, false}},
		{PolicyApplyQueues, []bool{false, true, true, true}},
		{PolicyApplyStreams, []bool{false, false, false, true}},
		{PolicyApplyQuorumQueues, []bool{false, false, true, false}},
		{PolicyApplyClassicQueues, []bool{false, true, false, false}},
	} {
		setPolicy(t, b, "p", ".*", tc.applyTo, 0, map[string]any{"max-length-bytes": 100})
		for i, kind := range kinds {
			if got := effective(b, "e", kind) == "p"; got != tc.want[i] {
				t.Errorf("apply-to %s, %s: applies %v, want %v", tc.applyTo, kind, got, tc.want[i])
			}
		}
	}
	if got := effective(b, "e", "queue"); got != "p" {
		t.Errorf(`kind "queue" (classic) under apply-to classic_queues: got %q`, got)
	}
	must(t, b.ClearPolicy("/", "p"))

	// Unsupported keys: max-age is a stream policy, message-ttl is not.
	setPolicy(t, b, "stream", ".*", PolicyApplyAll, 10, map[string]any{"max-age": "1D"})
	setPolicy(t, b, "ttl", ".*", PolicyApplyAll, 5, map[string]any{"message-ttl": 1000})
	setPolicy(t, b, "dl", ".*", PolicyApplyAll, 1, map[string]any{"delivery-limit": 3})
	for kind, want := range map[string]string{
		PolicyKindExchange: "stream", // any policy applies to exchanges
		QueueClassic:       "ttl",
		QueueQuorum:        "ttl",
		QueueStream:        "stream",
	} {
		if got := effective(b, "q", kind); got != want {
			t.Errorf("%s: got %q, want %q", kind, got, want)
		}
	}
	must(t, b.ClearPolicy("/", "stream"))
	must(t, b.ClearPolicy("/", "ttl"))
	if got := effective(b, "q", QueueClassic); got != "" {
		t.Errorf("classic under a delivery-limit policy: got %q", got)
	}
	if got := effective(b, "q", QueueQuorum); got != "dl" {
		t.Errorf("quorum under a delivery-limit policy: got %q", got)
	}
	if got := effective(b, "q", QueueStream); got != "" {
		t.Errorf("stream under a delivery-limit policy: got %q", got)
	}
}

// Ensure patterns are unanchored regexp searches, as rabbit_re:run does.
func TestPolicyPattern(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	for _, tc := range []struct {
		pattern string
		match   []string
		nomatch []string
	}{
		{`^amq\.`, []string{"amq.direct", "amq.gen-x"}, []string{"xamq.direct", "amqX", "my.amq.q"}},
		{`.*`, []string{"", "anything", "amq.topic"}, nil},
		{``, []string{"", "anything"}, nil},
		{`q`, []string{"q", "aqb", "queue"}, []string{"Q", "x"}},
		{`^q$`, []string{"q"}, []string{"qq", "aq"}},
		{`orders\.(eu|us)$`, []string{"orders.eu", "v1.orders.us"}, []string{"orders.eu.x", "orders.asia"}},
	} {
		setPolicy(t, b, "p", tc.pattern, "", 0, map[string]any{"expires": 1000})
		for _, n := range tc.match {
			if effective(b, n, QueueClassic) != "p" || effective(b, n, PolicyKindExchange) != "p" {
				t.Errorf("pattern %q does not match %q", tc.pattern, n)
			}
		}
		for _, n := range tc.nomatch {
			if effective(b, n, QueueClassic) != "" {
				t.Errorf("pattern %q matches %q", tc.pattern, n)
			}
		}
	}
}

// Ensure policies survive a restart with their normalized definitions,
// cleared ones stay cleared, and records of a vhost that is gone are
// removed.
func TestPolicyPersistence(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	var def map[string]any
	must(t, json.Unmarshal([]byte(`{"max-length-bytes": 60000, "queue-leader-locator": "balanced", "max-age": "1h"}`), &def))
	must(t, b.SetPolicy(Policy{VHost: "/", Name: "a", Pattern: "^a", ApplyTo: PolicyApplyQueues, Priority: 3, Definition: def}))
	setPolicy(t, b, "b", "^b", PolicyApplyExchanges, -2, map[string]any{"alternate-exchange": "ae"})
	setPolicy(t, b, "c", "^c", "", 0, map[string]any{"expires": 5})
	must(t, b.ClearPolicy("/", "c"))
	must(t, b.AddVHost("v"))
	must(t, b.SetPolicy(Policy{VHost: "v", Name: "x", Pattern: ".*", Definition: map[string]any{"expires": 5}}))
	want := b.Policies("/")
	v0 := b.PolicyVersion("/")
	if v0 == 0 {
		t.Fatal("PolicyVersion 0 with policies set")
	}
	// A stale record: its vhost deleted behind the broker's back.
	must(t, b.cat.delete(vhostKey("v")))
	must(t, b.Close())

	b = openBroker(t, dir)
	defer b.Close()
	got := b.Policies("/")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart:\ngot  %+v\nwant %+v", got, want)
	}
	if v := got[1].Definition["max-length-bytes"]; v != int64(60000) {
		t.Fatalf("max-length-bytes %T %v after restart", v, v)
	}
	if effective(b, "abc", QueueClassic) != "" || effective(b, "abc", QueueStream) != "a" {
		t.Fatal("policy a not applied as before the restart (max-age makes it stream-only)")
	}
	if n := catalogCount(t, b, "pol/"); n != 2 {
		t.Fatalf("%d policy records, want 2", n)
	}
	if ps := b.Policies("v"); ps != nil {
		t.Fatalf("policies of a deleted vhost loaded: %+v", ps)
	}
	if b.PolicyVersion("/") == 0 {
		t.Fatal("PolicyVersion 0 after restart")
	}
}

// Ensure deleting a vhost deletes its policies, from memory and from the
// catalog, and tells the watchers; a vhost of the same name starts clean.
func TestPolicyVHostDeleted(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	must(t, b.AddVHost("v"))
	must(t, b.SetPolicy(Policy{VHost: "v", Name: "p", Pattern: ".*", Definition: map[string]any{"expires": 5}}))
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 5})
	var told []string
	cancel := b.WatchPolicies(func(vhost string) { told = append(told, vhost) })
	defer cancel()
	must(t, b.DeleteVHost("v"))
	if !slices.Equal(told, []string{"v"}) {
		t.Fatalf("watchers told %v, want [v]", told)
	}
	if n := catalogCount(t, b, "pol/v\x00"); n != 0 {
		t.Fatalf("%d policy records left", n)
	}
	if n := catalogCount(t, b, "pol/"); n != 1 {
		t.Fatalf("%d policy records, want the one of /", n)
	}
	if b.PolicyVersion("v") != 0 || b.Policies("v") != nil {
		t.Fatal("policies of the deleted vhost left")
	}
	must(t, b.AddVHost("v"))
	if _, ok := b.EffectivePolicy("v", "q", QueueClassic); ok {
		t.Fatal("a new vhost has the old vhost's policy")
	}
	if effective(b, "q", QueueClassic) != "p" {
		t.Fatal("the policy of / is gone")
	}
}

// Ensure watchers are told of every change (and not of a set that changes
// nothing), after it is visible, and not after cancel; and that the
// version moves with the changes.
func TestWatchPolicies(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	if v := b.PolicyVersion("/"); v != 0 {
		t.Fatalf("PolicyVersion %d before any policy", v)
	}
	type event struct {
		vhost  string
		policy string
	}
	var events []event
	versions := map[uint64]bool{0: true}
	cancel := b.WatchPolicies(func(vhost string) {
		events = append(events, event{vhost, effective(b, "q", QueueClassic)})
		v := b.PolicyVersion(vhost)
		if versions[v] {
			t.Errorf("version %d seen before", v)
		}
		versions[v] = true
	})
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 5})
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 5}) // unchanged
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 6})
	setPolicy(t, b, "r", "^q$", "", 1, map[string]any{"expires": 6})
	must(t, b.ClearPolicy("/", "r"))
	want := []event{{"/", "p"}, {"/", "p"}, {"/", "r"}, {"/", "p"}}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("got %v, want %v", events, want)
	}
	cancel()
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 7})
	if len(events) != len(want) {
		t.Fatal("watcher told after cancel")
	}
	if p, _ := b.EffectivePolicy("/", "q", QueueClassic); p.Definition["expires"] != int64(7) {
		t.Fatalf("expires %v", p.Definition["expires"])
	}
	// The returned definition is a copy.
	p, _ := b.EffectivePolicy("/", "q", QueueClassic)
	p.Definition["expires"] = int64(1)
	if p, _ := b.EffectivePolicy("/", "q", QueueClassic); p.Definition["expires"] != int64(7) {
		t.Fatal("EffectivePolicy shares its definition")
	}
}

// Ensure EffectiveArg applies RabbitMQ's precedence of policy values over
// declare arguments for every key, both ways round.
func TestEffectiveArg(t *testing.T) {
	pol := func(k string, v any) Policy { return Policy{Definition: map[string]any{k: v}} }
	quorum := map[string]any{"x-queue-type": "quorum"}
	stream := map[string]any{"x-queue-type": "stream"}
	with := func(base map[string]any, k string, v any) map[string]any {
		m := map[string]any{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	tests := []struct {
		name   string
		typ    string // "" = from args
		key    string
		args   map[string]any
		pol    Policy
		want   any
		wantOK bool
	}{
		{"neither", "", "message-ttl", nil, Policy{}, nil, false},
		{"arg only", "", "message-ttl", map[string]any{"x-message-ttl": int32(5)}, Policy{}, int64(5), true},
		{"policy only", "", "message-ttl", nil, pol("message-ttl", int64(7)), int64(7), true},
		{"x- key accepted", "", "x-message-ttl", map[string]any{"x-message-ttl": int16(9)}, pol("message-ttl", int64(7)), int64(7), true},

		// min, classic and quorum, both ways round.
		{"ttl arg<pol", "", "message-ttl", map[string]any{"x-message-ttl": int32(5)}, pol("message-ttl", int64(7)), int64(5), true},
		{"ttl pol<arg", "", "message-ttl", map[string]any{"x-message-ttl": int32(9)}, pol("message-ttl", int64(7)), int64(7), true},
		{"expires arg<pol", "", "expires", map[string]any{"x-expires": int64(5)}, pol("expires", int64(7)), int64(5), true},
		{"expires pol<arg", "", "expires", map[string]any{"x-expires": int64(9)}, pol("expires", int64(7)), int64(7), true},
		{"max-length arg<pol", "", "max-length", map[string]any{"x-max-length": uint8(1)}, pol("max-length", int64(2)), int64(1), true},
		{"max-length pol<arg", "", "max-length", map[string]any{"x-max-length": uint8(3)}, pol("max-length", int64(2)), int64(2), true},
		{"max-length-bytes arg<pol", "", "max-length-bytes", map[string]any{"x-max-length-bytes": int32(10)}, pol("max-length-bytes", int64(20)), int64(10), true},
		{"max-length-bytes pol<arg", "", "max-length-bytes", map[string]any{"x-max-length-bytes": int32(30)}, pol("max-length-bytes", int64(20)), int64(20), true},
		{"qq ttl pol<arg", "", "message-ttl", with(quorum, "x-message-ttl", int32(9)), pol("message-ttl", int64(7)), int64(7), true},
		{"qq max-length arg<pol", "", "max-length", with(quorum, "x-max-length", int32(1)), pol("max-length", int64(7)), int64(1), true},
		{"consumer-timeout", "", "consumer-timeout", map[string]any{"x-consumer-timeout": int32(10)}, pol("consumer-timeout", int64(5)), int64(5), true},

		// delivery-limit (quorum): min, unless one is negative (unlimited).
		{"dl arg<pol", "", "delivery-limit", with(quorum, "x-delivery-limit", int32(3)), pol("delivery-limit", int64(5)), int64(3), true},
		{"dl pol<arg", "", "delivery-limit", with(quorum, "x-delivery-limit", int32(8)), pol("delivery-limit", int64(5)), int64(5), true},
		{"dl pol unlimited", "", "delivery-limit", with(quorum, "x-delivery-limit", int32(8)), pol("delivery-limit", int64(-1)), int64(8), true},
		{"dl arg unlimited", "", "delivery-limit", with(quorum, "x-delivery-limit", int32(-1)), pol("delivery-limit", int64(4)), int64(4), true},
		{"dl both unlimited", "", "delivery-limit", with(quorum, "x-delivery-limit", int32(-1)), pol("delivery-limit", int64(-2)), int64(-1), true},

		// The argument wins.
		{"dlx arg", "", "dead-letter-exchange", map[string]any{"x-dead-letter-exchange": "a"}, pol("dead-letter-exchange", "p"), "a", true},
		{"dlx pol only", "", "dead-letter-exchange", nil, pol("dead-letter-exchange", "p"), "p", true},
		{"dlrk arg", "", "dead-letter-routing-key", map[string]any{"x-dead-letter-routing-key": "a"}, pol("dead-letter-routing-key", "p"), "a", true},
		{"dlrk pol only", "", "dead-letter-routing-key", nil, pol("dead-letter-routing-key", "p"), "p", true},
		{"qq dlx arg", "", "dead-letter-exchange", with(quorum, "x-dead-letter-exchange", "a"), pol("dead-letter-exchange", "p"), "a", true},
		{"qq strategy arg", "", "dead-letter-strategy", with(quorum, "x-dead-letter-strategy", "at-most-once"), pol("dead-letter-strategy", "at-least-once"), "at-most-once", true},
		{"classic overflow arg", "", "overflow", map[string]any{"x-overflow": "drop-head"}, pol("overflow", "reject-publish"), "drop-head", true},
		{"classic overflow pol only", "", "overflow", nil, pol("overflow", "reject-publish"), "reject-publish", true},
		{"ae arg", PolicyKindExchange, "alternate-exchange", map[string]any{"alternate-exchange": "a"}, pol("alternate-exchange", "p"), "a", true},
		{"ae pol only", PolicyKindExchange, "alternate-exchange", nil, pol("alternate-exchange", "p"), "p", true},
		{"ae binary arg", PolicyKindExchange, "alternate-exchange", map[string]any{"alternate-exchange": []byte("a")}, pol("alternate-exchange", "p"), "a", true},
		{"unknown key arg", "", "queue-mode", map[string]any{"x-queue-mode": "default"}, pol("queue-mode", "lazy"), "default", true},

		// The policy wins.
		{"qq overflow pol", "", "overflow", with(quorum, "x-overflow", "drop-head"), pol("overflow", "reject-publish"), "reject-publish", true},
		{"qq overflow arg only", "", "overflow", with(quorum, "x-overflow", "drop-head"), Policy{}, "drop-head", true},
		{"stream max-length-bytes pol", "", "max-length-bytes", with(stream, "x-max-length-bytes", int64(10)), pol("max-length-bytes", int64(20)), int64(20), true},
		{"stream max-age pol", "", "max-age", with(stream, "x-max-age", "1D"), pol("max-age", "2h"), "2h", true},
		{"stream segment pol", "", "stream-max-segment-size-bytes", with(stream, "x-stream-max-segment-size-bytes", int32(1000)), pol("stream-max-segment-size-bytes", int64(5000)), int64(5000), true},
		{"stream filter pol", "", "stream-filter-size-bytes", with(stream, "x-stream-filter-size-bytes", int32(16)), pol("stream-filter-size-bytes", int64(32)), int64(32), true},
		{"leader locator pol", "", "queue-leader-locator", with(quorum, "x-queue-leader-locator", "client-local"), pol("queue-leader-locator", "balanced"), "balanced", true},

		// The type given explicitly overrides args.
		{"explicit quorum", QueueQuorum, "overflow", map[string]any{"x-overflow": "drop-head"}, pol("overflow", "reject-publish"), "reject-publish", true},
		{"explicit queue", "queue", "overflow", map[string]any{"x-overflow": "drop-head"}, pol("overflow", "reject-publish"), "drop-head", true},
	}
	for _, tc := range tests {
		var got any
		var ok bool
		if tc.typ == "" {
			got, ok = EffectiveArg(tc.key, tc.args, tc.pol)
		} else {
			got, ok = EffectiveQueueArg(tc.typ, tc.key, tc.args, tc.pol)
		}
		if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %T %v %v, want %T %v %v", tc.name, got, got, ok, tc.want, tc.want, tc.wantOK)
		}
	}
}

// Ensure a policy's alternate-exchange routes what an exchange cannot, for
// existing exchanges and ones declared later, that the exchange's own
// argument wins, and that a change or a restart re-resolves it.
func TestPolicyAlternateExchange(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	for _, q := range []string{"main", "unrouted", "other-unrouted"} {
		declareQ(t, b, q, true)
	}
	declare(t, b, "biz.orders", ExchangeDirect, true, nil)
	declare(t, b, "biz.arg", ExchangeDirect, true, map[string]any{"alternate-exchange": "other-ae"})
	declare(t, b, "biz.unrouted", ExchangeFanout, true, nil)
	declare(t, b, "other-ae", ExchangeFanout, true, nil)
	bindQ(t, b, "biz.orders", "main", "k", nil)
	bindQ(t, b, "biz.unrouted", "unrouted", "", nil)
	bindQ(t, b, "other-ae", "other-unrouted", "", nil)

	wantRoute(t, b, "biz.orders", nil, []string{"nope"})
	setPolicy(t, b, "biz-ae", `^biz\.`, PolicyApplyExchanges, 10, map[string]any{"alternate-exchange": "biz.unrouted"})
	wantRoute(t, b, "biz.orders", nil, []string{"k"}, "main")
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")
	// The argument wins over the policy.
	wantRoute(t, b, "biz.arg", nil, []string{"nope"}, "other-unrouted")
	// The alternate exchange itself matches the pattern: visited once.
	wantRoute(t, b, "biz.unrouted", nil, []string{"x"}, "unrouted")
	// An exchange declared after the policy.
	declare(t, b, "biz.late", ExchangeTopic, false, nil)
	wantRoute(t, b, "biz.late", nil, []string{"a.b"}, "unrouted")
	// Exchanges the pattern does not match.
	wantRoute(t, b, "amq.direct", nil, []string{"nope"})

	// A policy for queues only does not apply to exchanges, even at a
	// higher priority.
	setPolicy(t, b, "queues-only", ".*", PolicyApplyQueues, 20, map[string]any{"alternate-exchange": "other-ae"})
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")
	// A higher priority policy without alternate-exchange takes over, so
	// no alternate exchange: one policy applies, keys are not merged.
	setPolicy(t, b, "no-ae", "^biz.orders$", PolicyApplyAll, 30, map[string]any{"max-length": 5})
	wantRoute(t, b, "biz.orders", nil, []string{"nope"})
	wantRoute(t, b, "biz.late", nil, []string{"nope"}, "unrouted")
	must(t, b.ClearPolicy("/", "no-ae"))
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")

	// Changing the policy redirects existing exchanges.
	setPolicy(t, b, "biz-ae", `^biz\.`, PolicyApplyExchanges, 10, map[string]any{"alternate-exchange": "other-ae"})
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "other-unrouted")
	setPolicy(t, b, "biz-ae", `^biz\.`, PolicyApplyExchanges, 10, map[string]any{"alternate-exchange": "biz.unrouted"})

	// A restart: durable exchanges get the policy again.
	must(t, b.Close())
	b = openBroker(t, dir)
	defer b.Close()
	wantRoute(t, b, "biz.orders", nil, []string{"k"}, "main")
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")
	wantRoute(t, b, "biz.arg", nil, []string{"nope"}, "other-unrouted")

	// Clearing it leaves unroutable messages unrouted.
	must(t, b.ClearPolicy("/", "biz-ae"))
	wantRoute(t, b, "biz.orders", nil, []string{"nope"})
	wantRoute(t, b, "biz.arg", nil, []string{"nope"}, "other-unrouted")

	// A vhost whose topology is created by the policy: its standard
	// exchanges carry it.
	must(t, b.AddVHost("v"))
	must(t, b.SetPolicy(Policy{VHost: "v", Name: "ae", Pattern: "^amq\\.direct$", ApplyTo: PolicyApplyExchanges,
		Definition: map[string]any{"alternate-exchange": "amq.fanout"}}))
	q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "v", Name: "q", Durable: true}})
	if err != nil || q == nil {
		t.Fatal(err)
	}
	must(t, b.Bind(BindingDef{VHost: "v", Source: "amq.fanout", DestKind: DestQueue, Dest: "q"}))
	got, err := b.Route("v", "amq.direct", []string{"nope"}, nil, nil)
	must(t, err)
	if !slices.Equal(got, []string{"q"}) {
		t.Fatalf("route in v: got %v, want [q]", got)
	}
}

// Ensure policy changes, declares and routing may run concurrently (run
// with -race): publishers always see the old or the new alternate
// exchange.
func TestPolicyConcurrentRoute(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	declareQ(t, b, "ae-q", false)
	declare(t, b, "ae", ExchangeFanout, false, nil)
	bindQ(t, b, "ae", "ae-q", "", nil)
	declare(t, b, "x", ExchangeDirect, false, nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var dst []string
		for {
			select {
			case <-done:
				return
			default:
			}
			var err error
			dst, err = b.Route("/", "x", []string{"nope"}, nil, dst[:0])
			if err != nil || len(dst) > 1 || len(dst) == 1 && dst[0] != "ae-q" {
				t.Errorf("Route: %v %v", dst, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 50 {
			if err := b.DeclareExchange(ExchangeDef{VHost: "/", Name: fmt.Sprintf("y%d", i), Type: ExchangeTopic}); err != nil {
				t.Errorf("DeclareExchange: %v", err)
				return
			}
		}
	}()
	for i := range 50 {
		setPolicy(t, b, "ae", ".*", PolicyApplyExchanges, 0, map[string]any{"alternate-exchange": "ae"})
		if i%2 == 0 {
			must(t, b.ClearPolicy("/", "ae"))
		}
	}
	close(done)
	wg.Wait()
	// The policy is set: every exchange, those declared meanwhile too,
	// routes to the alternate exchange.
	for i := range 50 {
		wantRoute(t, b, fmt.Sprintf("y%d", i), nil, []string{"nope"}, "ae-q")
	}
}
