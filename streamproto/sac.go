package streamproto

// Single active consumer (SAC).
//
// Subscriptions with the property single-active-consumer=true and the same
// consumer name on the same stream of the same vhost form a group, across
// all connections of a Server. At most one member of a group reads at a
// time. Subscribe answers OK without opening a reader; the coordinator
// then picks the member to activate and hands over between members with
// ConsumerUpdate frames:
//
//	ConsumerUpdate (server to client), key 0x001a, version 1:
//	+----------+--------+-----+----------+-----------+-----------+
//	| size u32 | 0x001a | 1   | corr u32 | subId u8  | active u8 |
//	+----------+--------+-----+----------+-----------+-----------+
//	  corr is the coordinator's own counter (from 0), not a client's
//
//	reply (client to server), key 0x801a, version 1:
//	+----------+--------+-----+----------+-----------+---------------+------------------+
//	| size u32 | 0x801a | 1   | corr u32 | code u16  | offsetType u16| [offset u64]     |
//	+----------+--------+-----+----------+-----------+---------------+------------------+
//	  offset only for types 4 (offset) and 5 (timestamp); type 0 means
//	  "the offset spec given in Subscribe"
//
// The active choice: on a plain stream (no super-stream property, or no
// partition index) the first member in registration order; on a partition
// of a super stream the member at partition_index mod len(members),
// recomputed whenever a member joins or leaves.
//
// Hand-over, per group:
//
//	no current member      -> ConsumerUpdate(active=1) to the choice; on
//	                          its reply, open a reader at the replied spec
//	                          and start delivering (state active)
//	choice changes         -> stop the current member's delivery, then
//	                          ConsumerUpdate(active=0) to it; on its reply
//	                          (clients store their offset first) activate
//	                          the new choice as above
//	current member leaves  -> (unsubscribe, connection closed, stream
//	                          deleted) its delivery is stopped and the
//	                          choice is activated at once, also when it
//	                          had not yet answered a deactivation
//
// A group has at most one member that is not inactive (activating, active
// or deactivating), so two members never read at the same time: a new
// member is only activated after the previous one's delivery goroutine has
// exited and it has answered, or left.
//
// Locking: sacCoordinator.mu guards every group and member. It is taken
// before subscription.mu (stopDelivery, startDelivery) and outQueue.mu
// (queuing ConsumerUpdate); conn.mu is never held together with it. Under
// mu the coordinator only queues frames and stops delivery goroutines
// (cancel, then wait for the goroutine, which never takes mu); it opens no
// readers and does no socket I/O.

import (
	"slices"
	"sync"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/streamproto/wire"
)

// maxSACNameLen bounds a single active consumer's name (it is also the
// offset tracking reference).
const maxSACNameLen = 255

// sacKey identifies a single active consumer group.
type sacKey struct{ vhost, stream, name string }

// sacState is where a member is in the hand-over.
type sacState uint8

const (
	sacInactive     sacState = iota // not chosen, or handed over
	sacActivating                   // ConsumerUpdate(active=1) sent; waiting for the reply
	sacActive                       // delivering
	sacDeactivating                 // delivery stopped, ConsumerUpdate(active=0) sent; waiting for the reply
)

func (s sacState) String() string {
	switch s {
	case sacInactive:
		return "inactive"
	case sacActivating:
		return "activating"
	case sacActive:
		return "active"
	case sacDeactivating:
		return "deactivating"
	}
	return "unknown"
}

// sacSub is what the coordinator needs from a member's subscription. Both
// methods are called with sacCoordinator.mu held.
type sacSub interface {
	// consumerUpdate queues ConsumerUpdate(corr, active) to the member's
	// connection. It must not block.
	consumerUpdate(corr uint32, active bool)
	// stopDelivery stops the delivery goroutine, if any, and waits for
	// it to exit. The goroutine must not take sacCoordinator.mu.
	stopDelivery()
}

// sacMember is one subscription in a group.
type sacMember struct {
	// Static after creation.
	owner any    // the connection; replies are accepted only from it
	sub   sacSub // the subscription
	id    uint8  // subscription id, for logs and tests

	// Guarded by sacCoordinator.mu.
	group *sacGroup // nil before join and after leaving
	state sacState
	corr  uint32 // the ConsumerUpdate awaiting a reply (activating, deactivating)
}

// sacGroup is the members of one group, in registration order.
type sacGroup struct {
	// Static after creation.
	key         sacKey
	stream      *osiris.Stream // the stream instance; a recreated stream gets a new group
	superStream string         // the super-stream property of the first member
	partition   int            // partition index, -1 for a plain stream

	// Guarded by sacCoordinator.mu.
	members []*sacMember
	current *sacMember // the member not inactive, or nil
}

// choice is the member that should be active, or nil without members.
func (g *sacGroup) choice() *sacMember {
	if len(g.members) == 0 {
		return nil
	}
	if g.partition < 0 {
		return g.members[0]
	}
	return g.members[g.partition%len(g.members)]
}

// sacCoordinator holds the single active consumer groups of a Server. The
// zero value is ready to use.
type sacCoordinator struct {
	mu struct {
		sync.Mutex
		groups   map[sacKey]*sacGroup
		pending  map[uint32]*sacMember // ConsumerUpdate corr -> member awaiting its reply
		nextCorr uint32
	}
}

// join adds m to the group key on stream s. A new group takes superStream
// and partition (-1 for none); an existing group refuses a member with
// another super stream (CodePreconditionFailed). joined is called with the
// member registered but before any ConsumerUpdate is queued, so the
// Subscribe response can precede it.
func (co *sacCoordinator) join(m *sacMember, key sacKey, s *osiris.Stream, superStream string, partition int, joined func()) wire.Code {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.mu.groups == nil {
		co.mu.groups = map[sacKey]*sacGroup{}
		co.mu.pending = map[uint32]*sacMember{}
	}
	g := co.mu.groups[key]
	if g != nil && g.stream != s {
		// The stream was deleted and created again before the deletion
		// reached this group.
		co.dropGroupLocked(g)
		g = nil
	}
	if g == nil {
		if superStream == "" || partition < 0 {
			partition = -1
		}
		g = &sacGroup{key: key, stream: s, superStream: superStream, partition: partition}
		co.mu.groups[key] = g
	} else if g.superStream != superStream {
		return wire.CodePreconditionFailed
	}
	m.group = g
	m.state = sacInactive
	g.members = append(g.members, m)
	if joined != nil {
		joined()
	}
	co.rebalanceLocked(g)
	return wire.CodeOK
}

// leave removes members from their groups (members not in a group are
// ignored), stopping their deliveries, and then activates or hands over in
// every group that changed.
func (co *sacCoordinator) leave(ms ...*sacMember) {
	co.mu.Lock()
	defer co.mu.Unlock()
	var changed []*sacGroup
	for _, m := range ms {
		g := m.group
		if g == nil {
			continue
		}
		co.detachLocked(m)
		g.members = slices.DeleteFunc(g.members, func(x *sacMember) bool { return x == m })
		if g.current == m {
			g.current = nil
		}
		if !slices.Contains(changed, g) {
			changed = append(changed, g)
		}
	}
	for _, g := range changed {
		if len(g.members) == 0 {
			if co.mu.groups[g.key] == g {
				delete(co.mu.groups, g.key)
			}
			continue
		}
		co.rebalanceLocked(g)
	}
}

// dropStream removes, without telling anyone, every group of stream
// (vhost, name) on instance s: the stream is deleted, and each member's
// connection drops the subscription itself.
func (co *sacCoordinator) dropStream(vhost, name string, s *osiris.Stream) {
	co.mu.Lock()
	defer co.mu.Unlock()
	for k, g := range co.mu.groups {
		if k.vhost == vhost && k.stream == name && g.stream == s {
			co.dropGroupLocked(g)
		}
	}
}

// reply handles the ConsumerUpdate response corr from owner. A reply to a
// deactivation completes the hand-over (the next member is sent
// ConsumerUpdate(active=1)) and reply returns nil. A reply to a pending
// activation returns the member: the caller opens its reader and calls
// activated. Unknown, stale and foreign replies return nil.
func (co *sacCoordinator) reply(owner any, corr uint32) *sacMember {
	co.mu.Lock()
	defer co.mu.Unlock()
	m := co.mu.pending[corr]
	if m == nil || m.owner != owner {
		return nil
	}
	switch m.state {
	case sacActivating:
		return m
	case sacDeactivating:
		delete(co.mu.pending, corr)
		m.state = sacInactive
		g := m.group
		g.current = nil
		co.rebalanceLocked(g)
	}
	return nil
}

// activated completes the activation of m answered by reply corr: if m is
// still waiting for it, m becomes active and start (which starts the
// delivery goroutine; it must not block) is called with mu held. It
// reports false when the activation was overtaken (m left or was told to
// deactivate meanwhile); then the caller discards its reader.
func (co *sacCoordinator) activated(m *sacMember, corr uint32, start func()) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	if m.group == nil || m.state != sacActivating || m.corr != corr {
		return false
	}
	delete(co.mu.pending, corr)
	m.state = sacActive
	start()
	return true
}

// rebalanceLocked moves g towards its choice: it activates the choice when
// no member is current, or starts deactivating the current member when it
// is no longer the choice. A deactivating member is waited for.
//
// REQUIRES: co.mu held.
func (co *sacCoordinator) rebalanceLocked(g *sacGroup) {
	want := g.choice()
	cur := g.current
	switch {
	case cur == nil:
		if want != nil {
			g.current = want
			co.updateLocked(want, sacActivating)
		}
	case cur.state == sacDeactivating:
		// Its reply (or its leaving) continues the hand-over.
	case cur != want:
		if cur.state == sacActive {
			cur.sub.stopDelivery()
		}
		co.updateLocked(cur, sacDeactivating)
	}
}

// updateLocked moves m to state (activating or deactivating) and queues
// its ConsumerUpdate with a new correlation id.
//
// REQUIRES: co.mu held.
func (co *sacCoordinator) updateLocked(m *sacMember, state sacState) {
	if m.state == sacActivating || m.state == sacDeactivating {
		delete(co.mu.pending, m.corr)
	}
	corr := co.mu.nextCorr
	for co.mu.pending[corr] != nil { // only after 2^32 updates
		corr++
	}
	co.mu.nextCorr = corr + 1
	m.state, m.corr = state, corr
	co.mu.pending[corr] = m
	m.sub.consumerUpdate(corr, state == sacActivating)
}

// detachLocked stops m's delivery and forgets its pending reply; the
// caller removes it from the group's members.
//
// REQUIRES: co.mu held.
func (co *sacCoordinator) detachLocked(m *sacMember) {
	switch m.state {
	case sacActive:
		m.sub.stopDelivery()
	case sacActivating, sacDeactivating:
		delete(co.mu.pending, m.corr)
	}
	m.state = sacInactive
	m.group = nil
}

// dropGroupLocked detaches every member of g and forgets g.
//
// REQUIRES: co.mu held.
func (co *sacCoordinator) dropGroupLocked(g *sacGroup) {
	for _, m := range g.members {
		co.detachLocked(m)
	}
	g.members, g.current = nil, nil
	if co.mu.groups[g.key] == g {
		delete(co.mu.groups, g.key)
	}
}
