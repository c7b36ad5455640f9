package policy

import (
	"reflect"
	"testing"
	"time"
)

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
		{"ae arg", KindExchange, "alternate-exchange", map[string]any{"alternate-exchange": "a"}, pol("alternate-exchange", "p"), "a", true},
		{"ae pol only", KindExchange, "alternate-exchange", nil, pol("alternate-exchange", "p"), "p", true},
		{"ae binary arg", KindExchange, "alternate-exchange", map[string]any{"alternate-exchange": []byte("a")}, pol("alternate-exchange", "p"), "a", true},
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
		{"explicit quorum", KindQuorum, "overflow", map[string]any{"x-overflow": "drop-head"}, pol("overflow", "reject-publish"), "reject-publish", true},
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

// Ensure max-age parses RabbitMQ's units and refuses the rest.
func TestParseMaxAge(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1Y", 365 * 24 * time.Hour, true},
		{"2M", 60 * 24 * time.Hour, true},
		{"7D", 7 * 24 * time.Hour, true},
		{"1h", time.Hour, true},
		{"30m", 30 * time.Minute, true},
		{"10s", 10 * time.Second, true},
		{"0s", 0, false},
		{"-1h", 0, false},
		{"h", 0, false},
		{"", 0, false},
		{"10", 0, false},
		{"10x", 0, false},
		{"7d", 0, false},
		{"1.5h", 0, false},
		{"99999999999999Y", 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseMaxAge(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseMaxAge(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
