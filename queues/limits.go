package queues

import (
	"fmt"
)

// Vhost and user limits, as RabbitMQ's rabbit_vhost_limit and
// rabbit_auth_backend_internal enforce them: a limit that is absent or
// negative is no limit, 0 allows nothing, N allows N. The model counts
// connections (OpenConn), channels (OpenChannel) and queues (queue and
// stream creation); the front ends word the refusals of connections and
// channels in their protocol's texts.

// Limit names, as RabbitMQ's vhost-limits and user limits spell them.
const (
	LimitMaxConnections = "max-connections" // vhost and user
	LimitMaxQueues      = "max-queues"      // vhost
	LimitMaxChannels    = "max-channels"    // user
)

// ValidVHostLimit and ValidUserLimit report whether name is a limit of a
// vhost or of a user.
func ValidVHostLimit(name string) bool {
	return name == LimitMaxConnections || name == LimitMaxQueues
}

// ValidUserLimit reports whether name is a user limit.
func ValidUserLimit(name string) bool {
	return name == LimitMaxConnections || name == LimitMaxChannels
}

// limitOf returns the limit name in limits; ok is false when there is
// none (absent or negative).
func limitOf(limits map[string]int64, name string) (limit int64, ok bool) {
	l, ok := limits[name]
	if !ok || l < 0 {
		return 0, false
	}
	return l, true
}

// LimitError is a connection or channel refused by a limit: the vhost's
// max-connections (Scope "vhost"), the user's max-connections or
// max-channels (Scope "user"), or the node's channel_max_per_node
// (Scope "node").
type LimitError struct {
	Scope string // "vhost", "user" or "node"
	Name  string // the vhost or the user; empty for the node
	Limit int64
	Kind  string // LimitMaxConnections or LimitMaxChannels
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s '%s': %s limit (%d) is reached", e.Scope, e.Name, e.Kind, e.Limit)
}

// vhostLimit and userLimit read a limit from the catalog; a missing
// vhost or user has none.
func (b *Broker) vhostLimit(vhost, name string) (int64, bool) {
	v, err := b.GetVHost(vhost)
	if err != nil {
		return 0, false
	}
	return limitOf(v.Limits, name)
}

func (b *Broker) userLimit(user, name string) (int64, bool) {
	var u User
	if err := b.cat.get(userKey(user), &u); err != nil {
		return 0, false
	}
	return limitOf(u.Limits, name)
}

// OpenConn is AddConn for a connection of user in vhost, refused with a
// *LimitError when the vhost's max-connections, then the user's, is
// reached (rabbit_reader's connection.open checks, in that order). The
// check and the listing are one step: concurrent opens cannot overshoot.
func (b *Broker) OpenConn(c Conn, user, vhost string) (remove func(), err error) {
	vl, vok := b.vhostLimit(vhost, LimitMaxConnections)
	ul, uok := b.userLimit(user, LimitMaxConnections)
	e := &connEntry{c: c, user: user, vhost: vhost}
	e.proto, e.ctr = c.Counters()
	r := &b.conns
	return b.addConn(e, func() error {
		// REQUIRES: r.mu held (addConn).
		if vok && int64(r.mu.perVHost[vhost]) >= vl {
			return &LimitError{Scope: "vhost", Name: vhost, Limit: vl, Kind: LimitMaxConnections}
		}
		if uok && int64(r.mu.perUser[user]) >= ul {
			return &LimitError{Scope: "user", Name: user, Limit: ul, Kind: LimitMaxConnections}
		}
		return nil
	})
}

// OpenChannel counts a channel of user, refused with a *LimitError when
// the user's max-channels, then the node's channel_max_per_node, is
// reached (rabbit_reader's order); release uncounts it (idempotent).
func (b *Broker) OpenChannel(user string) (release func(), err error) {
	ul, uok := b.userLimit(user, LimitMaxChannels)
	r := &b.conns
	r.mu.Lock()
	defer r.mu.Unlock()
	if uok && int64(r.mu.userChannels[user]) >= ul {
		return nil, &LimitError{Scope: "user", Name: user, Limit: ul, Kind: LimitMaxChannels}
	}
	if nl := b.opts.ChannelMaxPerNode; nl > 0 && r.mu.channels >= nl {
		return nil, &LimitError{Scope: "node", Limit: int64(nl), Kind: LimitMaxChannels}
	}
	r.mu.channels++
	if r.mu.userChannels == nil {
		r.mu.userChannels = map[string]int{}
	}
	r.mu.userChannels[user]++
	done := false
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if done {
			return
		}
		done = true
		r.mu.channels--
		decr(r.mu.userChannels, user)
	}, nil
}

// CheckQueueLimit refuses (406, RabbitMQ's text) adding n queues to
// vhost when its max-queues would be exceeded, as rabbit_vhost_limit's
// would_exceed_queue_limit; name is the queue named in the refusal.
// Super stream creation checks its partitions with it up front.
func (b *Broker) CheckQueueLimit(vhost, name string, n int) error {
	reg := b.queueReg()
	reg.opMu.Lock()
	defer reg.opMu.Unlock()
	return b.checkQueueLimitLocked(vhost, name, n)
}

// checkQueueLimitLocked is CheckQueueLimit's work: queues and streams
// both count, as rabbit_amqqueue:count does.
// REQUIRES: the queue registry's opMu held.
func (b *Broker) checkQueueLimitLocked(vhost, name string, n int) error {
	limit, ok := b.vhostLimit(vhost, LimitMaxQueues)
	if !ok {
		return nil
	}
	if limit == 0 || int64(b.QueueCount(vhost)+n) > limit {
		return Errorf(CodePreconditionFailed, "cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", name, vhost, limit).Because(ErrQueueLimit)
	}
	return nil
}

// QueueCount counts vhost's classic and quorum queues and streams, as
// max-queues counts them.
func (b *Broker) QueueCount(vhost string) int {
	n := 0
	reg := b.queueReg()
	reg.mu.Lock()
	for k := range reg.mu.queues {
		if k.vhost == vhost {
			n++
		}
	}
	reg.mu.Unlock()
	b.mu.Lock()
	for k := range b.mu.streams {
		if k.vhost == vhost {
			n++
		}
	}
	b.mu.Unlock()
	return n
}
