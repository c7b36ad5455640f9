package amqp1

import (
	"errors"
	"net/url"
	"strings"
)

// Addresses, RabbitMQ 4.x's "v2" format (rabbit_amqp_session's
// parse_target_v2_string; docs "AMQP 1.0 address"), percent-encoded as
// RFC 3986 (cow_uri:urldecode, which url.PathUnescape matches):
//
//	/exchanges/:exchange/:routing-key   target: publish to the exchange with that key
//	/exchanges/:exchange                target: the key is "" (RabbitMQ 4.x's v2 format)
//	/queues/:queue                      target: the default exchange, key = queue; source: consume
//	(null)                              target: each message's "to" is one of the above
//
// The default exchange cannot be named ("/exchanges/" followed by "" or
// "amq.default"): "/queues/:queue" is how to publish to it.

// errBadAddress is an address that is not of the v2 format.
var errBadAddress = errors.New("bad address")

// target is a parsed target address.
type target struct {
	exchange string
	key      string
	queue    string // for /queues/:queue
}

// parseTarget parses a v2 target address.
func parseTarget(addr string) (target, error) {
	if rest, ok := strings.CutPrefix(addr, "/exchanges/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) > 2 || parts[0] == "" || parts[0] == "amq.default" {
			return target{}, errBadAddress
		}
		x, err := url.PathUnescape(parts[0])
		if err != nil || x == "" || x == "amq.default" {
			return target{}, errBadAddress
		}
		t := target{exchange: x}
		if len(parts) == 2 {
			if t.key, err = url.PathUnescape(parts[1]); err != nil {
				return target{}, errBadAddress
			}
		}
		return t, nil
	}
	q, err := parseQueue(addr)
	if err != nil {
		return target{}, err
	}
	return target{key: q, queue: q}, nil
}

// parseQueue parses "/queues/:queue" (a source, or a target).
func parseQueue(addr string) (string, error) {
	rest, ok := strings.CutPrefix(addr, "/queues/")
	if !ok || rest == "" {
		return "", errBadAddress
	}
	q, err := url.PathUnescape(rest)
	if err != nil || q == "" {
		return "", errBadAddress
	}
	return q, nil
}
