package amqp1

import "testing"

// Ensure v2 addresses parse as RabbitMQ 4.x parses them, percent-decoded,
// and what is not v2 (or names the default exchange) is refused.
func TestParseTarget(t *testing.T) {
	good := []struct {
		addr string
		want target
	}{
		{"/exchanges/x/k", target{exchange: "x", key: "k"}},
		{"/exchanges/x", target{exchange: "x"}},
		{"/exchanges/x/", target{exchange: "x"}},
		{"/exchanges/a%2Fb/c%20d", target{exchange: "a/b", key: "c d"}},
		{"/queues/q", target{key: "q", queue: "q"}},
		{"/queues/a%2Fb", target{key: "a/b", queue: "a/b"}},
	}
	for _, tc := range good {
		got, err := parseTarget(tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", tc.addr, got, err, tc.want)
		}
	}
	for _, addr := range []string{"", "/exchanges/", "/exchanges//k", "/exchanges/amq.default/k", "/exchanges/x/k/z",
		"/queues/", "/queue/q", "q", "/exchanges/%zz", "/queues/%"} {
		if got, err := parseTarget(addr); err == nil {
			t.Errorf("parseTarget(%q) = %+v, want an error", addr, got)
		}
	}
}
