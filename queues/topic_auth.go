package queues

import (
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// Topic authorisation, as RabbitMQ's rabbit_channel and
// rabbit_auth_backend_internal:check_topic_access do it: a user's topic
// permission on a topic exchange of a vhost restricts the routing keys
// the user may publish with (write) and bind with (read). A user without
// a topic permission on that exchange may use any key; other exchange
// types are never checked.
//
// The permissions (catalogued under tp/, access.go) are compiled into an
// immutable snapshot, replaced whenever they change, so that the check on
// the publish path is an atomic load when the broker has none, and a map
// lookup, an exchange lookup and a regexp match (no allocation) when it
// has some.

// topicAuth is the compiled topic permissions.
type topicAuth struct {
	mu   sync.Mutex                    // serialises reloads
	snap atomic.Pointer[topicAuthSnap] // nil: no topic permissions
}

type topicAuthKey struct{ vhost, user, exchange string }

// topicAuthSnap is the topic permissions at one time. Immutable.
type topicAuthSnap struct {
	rules map[topicAuthKey]topicRule
}

// topicRule is one topic permission compiled; a nil regexp matches
// nothing (its expansion did not compile).
type topicRule struct {
	write, read *regexp.Regexp
}

// compileTopicPattern compiles a topic permission's pattern as RabbitMQ
// applies it: "" is "^$", and {username} and {vhost} are replaced by the
// user's and vhost's names (as they are, not quoted) before compiling.
func compileTopicPattern(p TopicPermission, pattern string) *regexp.Regexp {
	if pattern == "" {
		pattern = "^$"
	}
	pattern = strings.NewReplacer("{username}", p.User, "{vhost}", p.VHost).Replace(pattern)
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil
	}
	return re
}

// reloadTopicAuth compiles the catalogued topic permissions into a new
// snapshot. Called by Open and after every change of them.
func (b *Broker) reloadTopicAuth() error {
	ta := &b.topicAuth
	ta.mu.Lock()
	defer ta.mu.Unlock()
	tps, err := b.TopicPermissions()
	if err != nil {
		return err
	}
	if len(tps) == 0 {
		ta.snap.Store(nil)
		return nil
	}
	s := &topicAuthSnap{rules: make(map[topicAuthKey]topicRule, len(tps))}
	for _, p := range tps {
		s.rules[topicAuthKey{p.VHost, p.User, p.Exchange}] = topicRule{
			write: compileTopicPattern(p, p.Write), read: compileTopicPattern(p, p.Read),
		}
	}
	ta.snap.Store(s)
	return nil
}

// topicAuthChanged reloads the snapshot after a change of the catalogued
// topic permissions, joining a failure to err.
func (b *Broker) topicAuthChanged(err error) error {
	if rerr := b.reloadTopicAuth(); rerr != nil {
		b.log.Error("topic permissions: reload", "err", rerr)
		if err == nil {
			err = rerr
		}
	}
	return err
}

// CheckTopicPermission checks that user may use routingKey on exchange
// of vhost: kind PermWrite for a publish, PermRead for a binding (queue
// or exchange bind and unbind), as RabbitMQ checks them. It refuses (a
// 403 *Error, "write access to topic 'k' in exchange 'x' in vhost 'v'
// refused for user 'u'") only when exchange is a topic exchange on which
// the user has a topic permission whose pattern does not match the key;
// a missing or internal exchange passes, for the publish or bind itself
// to refuse. It allocates nothing unless it refuses (or is the first use
// of the vhost's topology), and is an atomic load when the broker has no
// topic permissions.
func (b *Broker) CheckTopicPermission(user, vhost, exchange string, kind Perm, routingKey string) error {
	s := b.topicAuth.snap.Load()
	if s == nil {
		return nil
	}
	rule, ok := s.rules[topicAuthKey{vhost, user, exchange}]
	if !ok || !b.isTopicExchange(vhost, exchange) {
		return nil
	}
	re := rule.write
	if kind == PermRead {
		re = rule.read
	}
	if re != nil && re.MatchString(routingKey) {
		return nil
	}
	return Errorf(CodeAccessRefused, "%s access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'",
		kind, routingKey, exchange, vhost, user)
}

// isTopicExchange reports whether exchange of vhost exists, is a topic
// exchange and is not internal.
func (b *Broker) isTopicExchange(vhost, exchange string) bool {
	vt, err := b.topoVHost(vhost) // made on first use, with amq.topic
	if err != nil {
		return false
	}
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	x := vt.idx.Exchange(exchange)
	return x != nil && !x.Internal() && x.Def().Type == ExchangeTopic
}
