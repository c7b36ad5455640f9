package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// mustCompile compiles p, which must be valid.
func mustCompile(t testing.TB, p Policy) *Compiled {
	t.Helper()
	c, reasons := Compile(p)
	if reasons != nil {
		t.Fatalf("Compile(%+v): %q", p, reasons)
	}
	return c
}

// with returns s with the policy set.
func with(t testing.TB, s *Set, name, pattern, applyTo string, priority int, def map[string]any) *Set {
	t.Helper()
	s, _ = s.With(mustCompile(t, Policy{VHost: "/", Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: def}))
	return s
}

// without returns s without the policy name, which it must have.
func without(t testing.TB, s *Set, name string) *Set {
	t.Helper()
	s, found := s.Without(name)
	if !found {
		t.Fatalf("no policy %q", name)
	}
	return s
}

// effective returns the name of the policy applying to name, "" if none.
func effective(s *Set, name, kind string) string {
	if p := s.Match(name, kind); p != nil {
		return p.Name
	}
	return ""
}

// Ensure Compile refuses what RabbitMQ's validators refuse, with their
// texts, and accepts and normalizes what they accept.
func TestCompile(t *testing.T) {
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
		{Policy{Pattern: ".*", Definition: map[string]any{"history-max-age": "7d"}}, []string{`<<"7d">> is not a valid history max age`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"history-max-age": 7}}, []string{`7 is not a valid history max age`}},
		{Policy{Pattern: ".*", Definition: map[string]any{"history-max-length-bytes": -1}}, []string{"-1 is not a valid history maximum length in bytes"}},
		{Policy{Pattern: ".*", Definition: map[string]any{"history-max-length-bytes": "1MB"}}, []string{`<<"1MB">> is not a valid history maximum length in bytes`}},
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
		c, reasons := Compile(tc.p)
		if c != nil || !slices.Equal(reasons, tc.want) {
			t.Errorf("Compile(%+v):\ngot  %v %q\nwant %q", tc.p.Definition, c, reasons, tc.want)
		}
	}

	// Every key RabbitMQ 4.3 accepts, with values as encoding/json or Go
	// code gives them.
	var fromJSON map[string]any
	if err := json.Unmarshal([]byte(`{"message-ttl": 1000, "expires": 1, "max-length": 0, "max-length-bytes": 10,
		"overflow": "reject-publish-dlx", "dead-letter-exchange": "dlx", "dead-letter-routing-key": "",
		"delivery-limit": -1, "alternate-exchange": "ae", "max-age": "7D", "stream-max-segment-size-bytes": 0,
		"stream-filter-size-bytes": 16, "queue-mode": "lazy", "queue-version": 2, "consumer-timeout": 0,
		"consumer-disconnected-timeout": 5, "dead-letter-strategy": "at-least-once", "max-in-memory-length": 1,
		"max-in-memory-bytes": 2, "queue-leader-locator": "balanced", "initial-cluster-size": 0,
		"target-group-size": 3, "delayed-retry-type": "failed", "delayed-retry-min": 10, "delayed-retry-max": 10}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	got := mustCompile(t, Policy{VHost: "/", Name: "all-keys", Pattern: "", Definition: fromJSON})
	if got.ApplyTo != ApplyAll {
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
	got = mustCompile(t, Policy{VHost: "/", Name: "ints", Pattern: "x", Definition: map[string]any{
		"message-ttl": int8(5), "max-length": uint32(7), "expires": json.Number("9"), "dead-letter-exchange": []byte("d"),
	}})
	want := map[string]any{"message-ttl": int64(5), "max-length": int64(7), "expires": int64(9), "dead-letter-exchange": "d"}
	if !reflect.DeepEqual(got.Definition, want) {
		t.Errorf("got %v, want %v", got.Definition, want)
	}
}

// Ensure the matching policy with the highest priority applies, ties go
// to the smallest name, a removed policy gives way to the next, setting a
// policy as it is or removing a missing one changes nothing, and Policies
// lists in rabbitmqctl's order.
func TestSetPriority(t *testing.T) {
	var s *Set
	ttl := map[string]any{"message-ttl": 1}
	s = with(t, s, "low", ".*", "", 0, ttl)
	s = with(t, s, "high", "^orders", "", 10, ttl)
	s = with(t, s, "mid-b", "^orders", "", 5, ttl)
	s = with(t, s, "mid-a", "^orders", "", 5, ttl)
	for _, tc := range []struct{ name, want string }{
		{"orders.eu", "high"},
		{"billing", "low"},
	} {
		if got := effective(s, tc.name, KindClassic); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	s = without(t, s, "high")
	if got := effective(s, "orders.eu", KindClassic); got != "mid-a" {
		t.Errorf("after clearing high: got %q, want mid-a", got)
	}
	// Raising a policy's priority by setting it again.
	s = with(t, s, "mid-b", "^orders", "", 6, ttl)
	if got := effective(s, "orders.eu", KindClassic); got != "mid-b" {
		t.Errorf("after raising mid-b: got %q, want mid-b", got)
	}
	// A negative priority is allowed.
	s = with(t, s, "neg", "^billing$", "", -1, ttl)
	if got := effective(s, "billing", KindClassic); got != "low" {
		t.Errorf("billing: got %q, want low", got)
	}
	var names []string
	for _, p := range s.Policies() {
		names = append(names, p.Name)
	}
	if want := []string{"neg", "low", "mid-a", "mid-b"}; !slices.Equal(names, want) {
		t.Errorf("Policies: got %v, want %v", names, want)
	}
	if same, changed := s.With(mustCompile(t, Policy{VHost: "/", Name: "low", Pattern: ".*", Definition: ttl})); changed || same != s {
		t.Error("With of an unchanged policy changed the set")
	}
	if same, found := s.Without("nope"); found || same != s {
		t.Error("Without of a missing policy changed the set")
	}
	if got, ok := s.Get("mid-b"); !ok || got.Priority != 6 {
		t.Errorf("Get(mid-b) = %+v, %v", got, ok)
	}
	var empty *Set
	if empty.Match("q", KindClassic) != nil || empty.Policies() != nil {
		t.Error("the nil Set is not empty")
	}
}

// Ensure apply-to selects exchanges, all queues or one queue type, and a
// policy with a key the queue type does not support does not apply to it.
func TestApplyTo(t *testing.T) {
	var s *Set
	kinds := []string{KindExchange, KindClassic, KindQuorum, KindStream}
	for _, tc := range []struct {
		applyTo string
		want    []bool // by kind
	}{
		{ApplyAll, []bool{true, true, true, true}},
		{ApplyExchanges, []bool{true, false, false, false}},
		{ApplyQueues, []bool{false, true, true, true}},
		{ApplyStreams, []bool{false, false, false, true}},
		{ApplyQuorumQueues, []bool{false, false, true, false}},
		{ApplyClassicQueues, []bool{false, true, false, false}},
	} {
		s = with(t, s, "p", ".*", tc.applyTo, 0, map[string]any{"max-length-bytes": 100})
		for i, kind := range kinds {
			if got := effective(s, "e", kind) == "p"; got != tc.want[i] {
				t.Errorf("apply-to %s, %s: applies %v, want %v", tc.applyTo, kind, got, tc.want[i])
			}
		}
	}
	if got := effective(s, "e", "queue"); got != "p" {
		t.Errorf(`kind "queue" (classic) under apply-to classic_queues: got %q`, got)
	}
	s = without(t, s, "p")

	// Unsupported keys: max-age is a stream policy, message-ttl is not.
	s = with(t, s, "stream", ".*", ApplyAll, 10, map[string]any{"max-age": "1D"})
	s = with(t, s, "ttl", ".*", ApplyAll, 5, map[string]any{"message-ttl": 1000})
	s = with(t, s, "dl", ".*", ApplyAll, 1, map[string]any{"delivery-limit": 3})
	for kind, want := range map[string]string{
		KindExchange: "stream", // any policy applies to exchanges
		KindClassic:  "ttl",
		KindQuorum:   "ttl",
		KindStream:   "stream",
	} {
		if got := effective(s, "q", kind); got != want {
			t.Errorf("%s: got %q, want %q", kind, got, want)
		}
	}
	s = without(t, s, "stream")
	s = without(t, s, "ttl")
	if got := effective(s, "q", KindClassic); got != "" {
		t.Errorf("classic under a delivery-limit policy: got %q", got)
	}
	if got := effective(s, "q", KindQuorum); got != "dl" {
		t.Errorf("quorum under a delivery-limit policy: got %q", got)
	}
	if got := effective(s, "q", KindStream); got != "" {
		t.Errorf("stream under a delivery-limit policy: got %q", got)
	}
	s = without(t, s, "dl")

	// History is for classic and quorum queues: a stream is all history.
	s = with(t, s, "hist", ".*", ApplyAll, 1, map[string]any{"history-max-age": "7D", "history-max-length-bytes": 1 << 20})
	for kind, want := range map[string]string{KindExchange: "hist", KindClassic: "hist", KindQuorum: "hist", KindStream: ""} {
		if got := effective(s, "q", kind); got != want {
			t.Errorf("history policy, %s: got %q, want %q", kind, got, want)
		}
	}
}

// Ensure patterns are unanchored regexp searches, as rabbit_re:run does.
func TestPattern(t *testing.T) {
	var s *Set
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
		s = with(t, s, "p", tc.pattern, "", 0, map[string]any{"expires": 1000})
		for _, n := range tc.match {
			if effective(s, n, KindClassic) != "p" || effective(s, n, KindExchange) != "p" {
				t.Errorf("pattern %q does not match %q", tc.pattern, n)
			}
		}
		for _, n := range tc.nomatch {
			if effective(s, n, KindClassic) != "" {
				t.Errorf("pattern %q matches %q", tc.pattern, n)
			}
		}
	}
}
