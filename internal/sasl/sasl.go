// Package sasl is the node's authentication configuration as RabbitMQ's
// auth_mechanisms, anonymous_login_user and anonymous_login_pass describe
// it, shared by the AMQP 0-9-1 and stream protocol front ends: which
// mechanisms a connection is offered, in which order, and whether the one
// a client picks is known and offered.
package sasl

import (
	"fmt"
	"slices"
	"strings"
)

// The mechanisms Warren has, by their SASL names.
const (
	Plain     = "PLAIN"
	AMQPlain  = "AMQPLAIN"
	Anonymous = "ANONYMOUS" // logs in as AnonymousUser (RabbitMQ 4.x)
	External  = "EXTERNAL"  // the verified TLS client certificate names the user
)

// DefaultMechanisms is RabbitMQ 4.x's auth_mechanisms.
var DefaultMechanisms = []string{Plain, AMQPlain, Anonymous}

// DefaultAnonymousUser is RabbitMQ 4.x's anonymous_login_user and
// anonymous_login_pass: guest, whom loopback_users keep to loopback
// connections by default.
const DefaultAnonymousUser = "guest"

// AnonymousNone is anonymous_login_user = none: ANONYMOUS is not offered.
const AnonymousNone = "none"

// Known reports whether Warren has the mechanism name.
func Known(name string) bool {
	switch name {
	case Plain, AMQPlain, Anonymous, External:
		return true
	}
	return false
}

// ParseMechanism checks an auth_mechanisms.<n> value.
func ParseMechanism(name string) error {
	if !Known(name) {
		return fmt.Errorf("%q is not an authentication mechanism Warren has (%s, %s, %s, %s)", name, Plain, AMQPlain, Anonymous, External)
	}
	return nil
}

// Config is the node's SASL settings. The zero value is RabbitMQ 4.x's
// defaults.
type Config struct {
	// Mechanisms are auth_mechanisms in the order offered; nil means
	// DefaultMechanisms. RabbitMQ offers them in its registry's order;
	// Warren keeps the configured one.
	Mechanisms []string
	// AnonymousUser and AnonymousPass are the credentials ANONYMOUS logs
	// in with; empty means DefaultAnonymousUser (guest/guest), and
	// AnonymousUser = AnonymousNone turns ANONYMOUS off.
	AnonymousUser, AnonymousPass string
}

// AnonymousCredentials returns who ANONYMOUS logs in as; ok is false
// when anonymous_login_user is none.
func (c Config) AnonymousCredentials() (user, pass string, ok bool) {
	user, pass = c.AnonymousUser, c.AnonymousPass
	if user == AnonymousNone {
		return "", "", false
	}
	if user == "" {
		user = DefaultAnonymousUser
	}
	if pass == "" {
		pass = DefaultAnonymousUser
	}
	return user, pass, true
}

// Offered returns the mechanisms a connection is offered, in order: the
// configured ones that apply to it, as each RabbitMQ mechanism's
// should_offer decides. EXTERNAL needs a TLS connection; ANONYMOUS an
// anonymous user.
func (c Config) Offered(tls bool) []string {
	mechs := c.Mechanisms
	if mechs == nil {
		mechs = DefaultMechanisms
	}
	out := make([]string, 0, len(mechs))
	for _, m := range mechs {
		switch {
		case !Known(m), slices.Contains(out, m):
		case m == External && !tls:
		case m == Anonymous && !c.anonymousOn():
		default:
			out = append(out, m)
		}
	}
	return out
}

func (c Config) anonymousOn() bool {
	_, _, ok := c.AnonymousCredentials()
	return ok
}

// OfferedString is Offered as connection.start's space-separated list.
func (c Config) OfferedString(tls bool) string { return strings.Join(c.Offered(tls), " ") }

// Check reports whether a client may use mech: nil when it is offered
// on the connection; ErrUnknown for a name Warren does not have,
// ErrNotOffered for one it has that is not offered (RabbitMQ's "unknown"
// and "invalid authentication mechanism").
func (c Config) Check(mech string, tls bool) error {
	if !Known(mech) {
		return ErrUnknown
	}
	if !slices.Contains(c.Offered(tls), mech) {
		return ErrNotOffered
	}
	return nil
}

// Errors of Check.
var (
	ErrUnknown    = errorString("sasl: unknown authentication mechanism")
	ErrNotOffered = errorString("sasl: authentication mechanism not offered")
)

type errorString string

func (e errorString) Error() string { return string(e) }
