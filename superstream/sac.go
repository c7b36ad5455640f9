package superstream

// Single active consumer (SAC) groups.
//
// Subscriptions with single-active-consumer=true and the same consumer
// name on the same stream of the same vhost form a group. At most one
// member of a group reads at a time. A front end registers each such
// subscription with the Coordinator (Join), which picks the member to
// activate and hands over between members by asking the front end to send
// ConsumerUpdate (in the stream protocol: ConsumerUpdate frames, whose
// replies come back through Reply and Activated).
//
// The active choice: on a plain stream (no super stream, or no partition
// index) the first member in registration order; on a partition of a
// super stream the member at partition_index mod len(members), recomputed
// whenever a member joins or leaves.
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
// Locking: Coordinator.mu guards every group and member. It is taken
// before the front end's subscription locks (Sub.StopDelivery, the start
// function given to Activated) and its output queue (Sub.ConsumerUpdate);
// connection locks are never held together with it. Under mu the
// coordinator only queues frames and stops delivery goroutines (cancel,
// then wait for the goroutine, which never takes mu); it opens no readers
// and does no socket I/O.

import (
	"errors"
	"slices"
	"sync"

	"github.com/warren-mq/warren/osiris"
)

// MaxNameLen bounds a single active consumer's name (it is also the
// offset tracking reference).
const MaxNameLen = 255

// ErrOtherSuperStream refuses a member whose super stream differs from
// its group's (the stream protocol answers it as precondition failed).
var ErrOtherSuperStream = errors.New("superstream: the group belongs to another super stream")

// GroupKey identifies a single active consumer group.
type GroupKey struct{ VHost, Stream, Name string }

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

// Sub is what the coordinator needs from a member's subscription. Both
// methods are called with Coordinator.mu held.
type Sub interface {
	// ConsumerUpdate queues ConsumerUpdate(corr, active) to the member's
	// connection. It must not block.
	ConsumerUpdate(corr uint32, active bool)
	// StopDelivery stops the delivery goroutine, if any, and waits for
	// it to exit. The goroutine must not take Coordinator.mu.
	StopDelivery()
}

// Member is one subscription in a group.
type Member struct {
	// Static after creation.
	owner any   // the connection; replies are accepted only from it
	sub   Sub   // the subscription
	id    uint8 // subscription id, for logs and tests

	// Guarded by Coordinator.mu.
	group *group // nil before join and after leaving
	state sacState
	corr  uint32 // the ConsumerUpdate awaiting a reply (activating, deactivating)
}

// NewMember returns a member for sub, owned by owner (its connection:
// Reply accepts replies from the owner only); id names it in logs.
func NewMember(owner any, sub Sub, id uint8) *Member { return &Member{owner: owner, sub: sub, id: id} }

// ID is the id NewMember was given.
func (m *Member) ID() uint8 { return m.id }

// group is the members of one group, in registration order.
type group struct {
	// Static after creation.
	key         GroupKey
	stream      *osiris.Stream // the stream instance; a recreated stream gets a new group
	superStream string         // the super-stream property of the first member
	partition   int            // partition index, -1 for a plain stream

	// Guarded by Coordinator.mu.
	members []*Member
	current *Member // the member not inactive, or nil
}

// choice is the member that should be active, or nil without members.
func (g *group) choice() *Member {
	if len(g.members) == 0 {
		return nil
	}
	if g.partition < 0 {
		return g.members[0]
	}
	return g.members[g.partition%len(g.members)]
}

// Coordinator holds single active consumer groups (a stream protocol
// server has one for all its connections). The zero value is ready to use.
type Coordinator struct {
	mu struct {
		sync.Mutex
		groups   map[GroupKey]*group
		pending  map[uint32]*Member // ConsumerUpdate corr -> member awaiting its reply
		nextCorr uint32
	}
}

// Join adds m to the group key on stream s. A new group takes superStream
// and partition (-1 for none); an existing group refuses a member with
// another super stream (ErrOtherSuperStream). joined is called with the
// member registered but before any ConsumerUpdate is queued, so the
// Subscribe response can precede it.
func (co *Coordinator) Join(m *Member, key GroupKey, s *osiris.Stream, superStream string, partition int, joined func()) error {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.mu.groups == nil {
		co.mu.groups = map[GroupKey]*group{}
		co.mu.pending = map[uint32]*Member{}
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
		g = &group{key: key, stream: s, superStream: superStream, partition: partition}
		co.mu.groups[key] = g
	} else if g.superStream != superStream {
		return ErrOtherSuperStream
	}
	m.group = g
	m.state = sacInactive
	g.members = append(g.members, m)
	if joined != nil {
		joined()
	}
	co.rebalanceLocked(g)
	return nil
}

// Leave removes members from their groups (members not in a group are
// ignored), stopping their deliveries, and then activates or hands over in
// every group that changed.
func (co *Coordinator) Leave(ms ...*Member) {
	co.mu.Lock()
	defer co.mu.Unlock()
	var changed []*group
	for _, m := range ms {
		g := m.group
		if g == nil {
			continue
		}
		co.detachLocked(m)
		g.members = slices.DeleteFunc(g.members, func(x *Member) bool { return x == m })
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

// DropStream removes, without telling anyone, every group of stream
// (vhost, name) on instance s: the stream is deleted, and each member's
// connection drops the subscription itself.
func (co *Coordinator) DropStream(vhost, name string, s *osiris.Stream) {
	co.mu.Lock()
	defer co.mu.Unlock()
	for k, g := range co.mu.groups {
		if k.VHost == vhost && k.Stream == name && g.stream == s {
			co.dropGroupLocked(g)
		}
	}
}

// Reply handles the ConsumerUpdate response corr from owner. A reply to a
// deactivation completes the hand-over (the next member is sent
// ConsumerUpdate(active=1)) and Reply returns nil. A reply to a pending
// activation returns the member: the caller opens its reader and calls
// Activated. Unknown, stale and foreign replies return nil.
func (co *Coordinator) Reply(owner any, corr uint32) *Member {
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

// Activated completes the activation of m answered by reply corr: if m is
// still waiting for it, m becomes active and start (which starts the
// delivery goroutine; it must not block) is called with mu held. It
// reports false when the activation was overtaken (m left or was told to
// deactivate meanwhile); then the caller discards its reader.
func (co *Coordinator) Activated(m *Member, corr uint32, start func()) bool {
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

// GroupInfo describes a group for observers (tests, the management API).
type GroupInfo struct {
	Key         GroupKey
	SuperStream string
	Partition   int // -1 for a plain stream
	Members     []MemberInfo
}

// MemberInfo describes a member: its id and where it is in the
// hand-over ("inactive", "activating", "active", "deactivating").
type MemberInfo struct {
	ID    uint8
	State string
	Owner any // the owner given to NewMember (its connection)
}

// Groups returns every group with its members in registration order.
func (co *Coordinator) Groups() []GroupInfo {
	co.mu.Lock()
	defer co.mu.Unlock()
	out := make([]GroupInfo, 0, len(co.mu.groups))
	for _, g := range co.mu.groups {
		gi := GroupInfo{Key: g.key, SuperStream: g.superStream, Partition: g.partition}
		for _, m := range g.members {
			gi.Members = append(gi.Members, MemberInfo{ID: m.id, State: m.state.String(), Owner: m.owner})
		}
		out = append(out, gi)
	}
	return out
}

// Pending is the number of ConsumerUpdates awaiting a reply.
func (co *Coordinator) Pending() int {
	co.mu.Lock()
	defer co.mu.Unlock()
	return len(co.mu.pending)
}

// rebalanceLocked moves g towards its choice: it activates the choice when
// no member is current, or starts deactivating the current member when it
// is no longer the choice. A deactivating member is waited for.
//
// REQUIRES: co.mu held.
func (co *Coordinator) rebalanceLocked(g *group) {
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
			cur.sub.StopDelivery()
		}
		co.updateLocked(cur, sacDeactivating)
	}
}

// updateLocked moves m to state (activating or deactivating) and queues
// its ConsumerUpdate with a new correlation id.
//
// REQUIRES: co.mu held.
func (co *Coordinator) updateLocked(m *Member, state sacState) {
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
	m.sub.ConsumerUpdate(corr, state == sacActivating)
}

// detachLocked stops m's delivery and forgets its pending reply; the
// caller removes it from the group's members.
//
// REQUIRES: co.mu held.
func (co *Coordinator) detachLocked(m *Member) {
	switch m.state {
	case sacActive:
		m.sub.StopDelivery()
	case sacActivating, sacDeactivating:
		delete(co.mu.pending, m.corr)
	}
	m.state = sacInactive
	m.group = nil
}

// dropGroupLocked detaches every member of g and forgets g.
//
// REQUIRES: co.mu held.
func (co *Coordinator) dropGroupLocked(g *group) {
	for _, m := range g.members {
		co.detachLocked(m)
	}
	g.members, g.current = nil, nil
	if co.mu.groups[g.key] == g {
		delete(co.mu.groups, g.key)
	}
}
