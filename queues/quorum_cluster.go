package queues

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/classic"
)

// Quorum queues in a cluster (docs/design-cluster.md, "Quorum queues"):
// a quorum queue's record in the catalog names its members
// (x-quorum-initial-group-size of the nodes), its leader (the declaring node) and the leader's epoch, as a
// stream's does. Each member holds a copy of the queue's log, replicated
// as a stream's is (osiris replication; cluster/node runs the pulls):
// the leader appends, the replicas copy, and an append is done (a
// publisher confirmed) once a majority holds it. The queue's ack state
// travels in the same log (classic.Def.LogState: osiris tracking), so a
// replica that becomes leader rebuilds the queue from its own copy with
// classic.Recover, as a restarted single node does from its disk.
//
// Only the leader runs the queue (the view: consumers, deliveries,
// acks); the registry holds the view there and nothing on the other
// members, where publishing to the queue is refused (a nack to
// confirming publishers, as RabbitMQ answers a quorum queue without a
// leader) until clients can be proxied to the leader.

// placedQueue is a replicated quorum queue as this node knows it.
type placedQueue struct {
	rec queueRecord    // Members, Leader, Epoch set; ID is this node's directory
	log *osiris.Stream // this member's copy while no view owns it; nil otherwise
	gen uint64         // bumped at each reopen: a recovery in flight checks it
}

// queuePlacement returns the placement of a replicated queue.
func (r *queueRegistry) placement(vhost, name string) (queueRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.mu.placed[streamName{vhost, name}]
	if !ok {
		return queueRecord{}, false
	}
	return p.rec, true
}

// queueLogOptionsFor returns the options a replicated queue's log opens
// with on this node, and whether this node holds a copy.
func (b *Broker) queueLogOptionsFor(rec queueRecord) (osiris.Options, bool) {
	opts := b.queueLogOptions()
	var member bool
	opts.Replication, member = b.replicationFor(rec.Members, rec.Lost, rec.Leader, rec.Epoch)
	return opts, member
}

// replicationFor returns this node's replication settings for a log of
// members (and lost, forgotten ones that still count for majorities)
// led by leader at epoch, and whether this node is a member.
func (b *Broker) replicationFor(members []string, lost int, leader string, epoch uint64) (*osiris.Replication, bool) {
	if !slices.Contains(members, b.opts.NodeName) {
		return nil, false
	}
	role := osiris.RoleReplica
	if leader == b.opts.NodeName {
		role = osiris.RoleLeader
	}
	return &osiris.Replication{Role: role, Member: b.opts.NodeName, Members: len(members) + lost, Epoch: epoch}, true
}

// placedDef is the queue definition of a replicated queue's record.
func placedDef(rec queueRecord) (QueueDef, error) {
	args, err := decodeArgs(rec.Args)
	if err != nil {
		return QueueDef{}, err
	}
	if rec.Type == QueueClassic {
		return QueueDef{VHost: rec.VHost, Name: rec.Name, ID: rec.ID, Type: rec.Type, Durable: !rec.Transient,
			Exclusive: rec.Exclusive, AutoDelete: rec.AutoDelete, Args: args}, nil
	}
	return QueueDef{VHost: rec.VHost, Name: rec.Name, ID: rec.ID, Type: rec.Type, Durable: true,
		AutoDelete: rec.AutoDelete, Args: args, LogState: true}, nil
}

// cmdDeclareQuorum creates a quorum queue on every member.
type cmdDeclareQuorum struct {
	Rec queueRecord `json:"rec"`
	// Token names a classic declare in flight on its home node
	// (classic_cluster.go).
	Token string `json:"token,omitempty"`
}

func (*cmdDeclareQuorum) op() string { return "queue.declare" }

// cmdDeleteQuorum deletes a quorum queue on every node.
type cmdDeleteQuorum struct {
	VHost string `json:"vhost"`
	Name  string `json:"name"`
}

func (*cmdDeleteQuorum) op() string { return "queue.delete" }

// cmdQueueLeader moves a quorum queue's leadership, as cmdStreamLeader
// does a stream's.
type cmdQueueLeader struct {
	VHost  string `json:"vhost"`
	Name   string `json:"name"`
	Leader string `json:"leader"`
	Epoch  uint64 `json:"epoch"`
}

func (*cmdQueueLeader) op() string { return "queue.leader" }

func init() {
	registerCommand(func() command { return &cmdDeclareQuorum{} })
	registerCommand(func() command { return &cmdDeleteQuorum{} })
	registerCommand(func() command { return &cmdQueueLeader{} })
}

// declareQuorumCluster proposes a new quorum queue, decided here: its
// members (x-quorum-initial-group-size of the nodes, placement.go), this
// node the leader (unless its locator asks for balance), epoch 1. It
// returns the queue when
// this node runs it once applied (it leads it).
// REQUIRES: reg.opMu held; it is let go across the proposal (apply
// takes it).
func (b *Broker) declareQuorumCluster(reg *queueRegistry, def QueueDef) (*Queue, error) {
	size, balanced := quorumPlacementArgs(def.Args)
	members, leader, err := b.place(true, size, balanced)
	if err != nil {
		return nil, err
	}
	args, err := encodeArgs(def.Args)
	if err != nil {
		return nil, err
	}
	rec := queueRecord{VHost: def.VHost, Name: def.Name, Type: def.Type, AutoDelete: def.AutoDelete, Args: args,
		Members: members, Leader: leader, Epoch: 1}
	reg.opMu.Unlock()
	_, err = b.exec(&cmdDeclareQuorum{Rec: rec})
	reg.opMu.Lock()
	if err != nil {
		return nil, err
	}
	return reg.get(def.VHost, def.Name), nil
}

// existingPlacedLocked answers the declare of a quorum queue this node
// knows of but does not run: declare-ok when equivalent.
// REQUIRES: reg.opMu held.
func existingPlacedLocked(rec queueRecord, def QueueDef) error {
	cur, err := placedDef(rec)
	if err != nil {
		return err
	}
	if rec.Exclusive {
		return errQueueLocked(rec.VHost, rec.Name) // its owner is a connection of its home node
	}
	return checkQueueEquivalence(cur, def.Durable, def.AutoDelete, def.Args)
}

func (c *cmdDeclareQuorum) apply(b *Broker) (any, error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	rec := c.Rec
	key := streamName{rec.VHost, rec.Name}
	if cur, ok := reg.placement(rec.VHost, rec.Name); ok {
		reg.opMu.Unlock()
		def, err := placedDef(rec)
		if err != nil {
			return nil, err
		}
		return nil, existingPlacedLocked(cur, def)
	}
	if q := reg.get(rec.VHost, rec.Name); q != nil && !(rec.Type == QueueClassic && rec.Leader == b.opts.NodeName && q.Def().Type == QueueClassic) {
		reg.opMu.Unlock()
		// A queue of this node's own (one from before it was in a
		// cluster) has the name.
		return nil, Errorf(CodePreconditionFailed, "inequivalent arg 'x-queue-type' for %s: received '%s' but current is '%s'",
			rs("queue", rec.Name, rec.VHost), QueueQuorum, q.Def().Type)
	}
	if _, ok := b.LookupStream(rec.VHost, rec.Name); ok {
		reg.opMu.Unlock()
		return nil, Errorf(CodePreconditionFailed, "inequivalent arg 'x-queue-type' for %s: received '%s' but current is '%s'",
			rs("queue", rec.Name, rec.VHost), QueueQuorum, QueueStream)
	}
	if !b.VHostExists(rec.VHost) {
		reg.opMu.Unlock()
		return nil, Errorf(CodeNotFound, "no vhost '%s'", rec.VHost)
	}
	if rec.Type == QueueClassic {
		return b.declarePlacedClassicLocked(reg, c) // classic_cluster.go; unlocks reg.opMu
	}
	opts, member := b.queueLogOptionsFor(rec)
	p := &placedQueue{rec: rec}
	var q *Queue
	if member {
		id, err := b.cat.nextStreamID()
		if err != nil {
			reg.opMu.Unlock()
			return nil, err
		}
		p.rec.ID = id
		cfg := reg.queueLogConfig(true)
		cfg.Epoch = rec.Epoch
		s, err := osiris.Create(b.queueDir(true, id), cfg, opts)
		if err != nil {
			reg.opMu.Unlock()
			return nil, fmt.Errorf("queues: create %s: %w", rs("queue", rec.Name, rec.VHost), err)
		}
		if err := b.cat.put(queueKey(rec.VHost, rec.Name), p.rec); err != nil {
			s.Delete()
			reg.opMu.Unlock()
			return nil, err
		}
		if rec.Leader == b.opts.NodeName {
			def, err := placedDef(p.rec)
			if err != nil {
				s.Delete()
				reg.opMu.Unlock()
				return nil, err
			}
			b.watchQueuePolicies()
			q = classic.New(b.qenv, def, nil, s)
		} else {
			p.log = s
		}
	} else if err := b.cat.put(queueKey(rec.VHost, rec.Name), p.rec); err != nil {
		reg.opMu.Unlock()
		return nil, err
	}
	reg.mu.Lock()
	reg.mu.placed[key] = p
	if q != nil {
		reg.mu.queues[key] = q
	}
	reg.mu.Unlock()
	b.topoQueueAdded(rec.VHost, rec.Name, true)
	if q != nil {
		b.churn.QueuesCreated.Add(1)
		q.Start()
	}
	reg.opMu.Unlock()
	if member {
		b.streamOpened(rec.VHost, rec.Name)
	}
	return nil, nil
}

// deleteQuorumCluster proposes the deletion of a replicated queue. The
// if-unused and if-empty conditions are checked where the queue runs
// (on its leader); elsewhere they cannot be, and the deletion goes ahead.
func (b *Broker) deleteQuorumCluster(q *Queue, vhost, name string, ifUnused, ifEmpty bool) (int, error) {
	if q != nil {
		ready, consumers := q.Counts()
		if ifUnused && consumers > 0 {
			return 0, Errorf(CodePreconditionFailed, "%s in use", rs("queue", name, vhost))
		}
		if ifEmpty && ready > 0 {
			return 0, Errorf(CodePreconditionFailed, "%s not empty", rs("queue", name, vhost))
		}
	}
	res, err := b.exec(&cmdDeleteQuorum{VHost: vhost, Name: name})
	n, _ := res.(int)
	return n, err
}

func (c *cmdDeleteQuorum) apply(b *Broker) (any, error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	key := streamName{c.VHost, c.Name}
	reg.mu.Lock()
	p := reg.mu.placed[key]
	delete(reg.mu.placed, key)
	q := reg.mu.queues[key]
	reg.mu.Unlock()
	if p == nil {
		reg.opMu.Unlock()
		return 0, nil // deleted already
	}
	n := 0
	var err error
	if q != nil {
		n, _ = q.BeginShutdown(false, false)
		err = b.unregisterQueueLocked(reg, q)
	} else {
		if p.log != nil {
			err = p.log.Delete()
		}
		err = errors.Join(err, b.cat.delete(queueKey(c.VHost, c.Name)))
		b.topoQueueRemoved(c.VHost, c.Name)
	}
	p.gen++
	reg.opMu.Unlock()
	if q != nil {
		err = errors.Join(err, q.FinishShutdown(true))
	}
	b.queueDeleted(c.VHost, c.Name)
	return n, err
}

// QueuePlacements returns every replicated queue's placement.
func (b *Broker) QueuePlacements() []Placement {
	reg := b.queueReg()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	out := make([]Placement, 0, len(reg.mu.placed))
	for _, p := range reg.mu.placed {
		if p.rec.Type != QueueClassic { // a classic queue is not replicated: its home runs it
			out = append(out, placementOfQueue(p.rec))
		}
	}
	return out
}

func placementOfQueue(rec queueRecord) Placement {
	return Placement{VHost: rec.VHost, Name: rec.Name, Members: rec.Members, Leader: rec.Leader, Epoch: rec.Epoch, Queue: true, Lost: rec.Lost}
}

// queueLog returns this member's copy of a replicated queue's log.
func (b *Broker) queueLog(vhost, name string) (*osiris.Stream, bool) {
	reg := b.queueReg()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	key := streamName{vhost, name}
	if p, ok := reg.mu.placed[key]; ok {
		if p.log != nil {
			return p.log, true
		}
		if q := reg.mu.queues[key]; q != nil {
			return q.Log(), true
		}
	}
	return nil, false
}

func (c *cmdQueueLeader) apply(b *Broker) (any, error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	key := streamName{c.VHost, c.Name}
	reg.mu.Lock()
	p := reg.mu.placed[key]
	q := reg.mu.queues[key]
	reg.mu.Unlock()
	switch {
	case p == nil:
		reg.opMu.Unlock()
		return nil, fmt.Errorf("queue %q in vhost %q: %w", c.Name, c.VHost, ErrNotFound)
	case c.Epoch <= p.rec.Epoch || !slices.Contains(p.rec.Members, c.Leader):
		reg.opMu.Unlock()
		return nil, nil // stale, or applied before a restart
	}
	rec := p.rec
	rec.Leader, rec.Epoch = c.Leader, c.Epoch
	if err := b.cat.put(queueKey(rec.VHost, rec.Name), rec); err != nil {
		reg.opMu.Unlock()
		return nil, err
	}
	reg.mu.Lock()
	p.rec = rec
	p.gen++
	old := p.log
	p.log = nil
	if q != nil {
		delete(reg.mu.queues, key)
	}
	reg.mu.Unlock()
	if q != nil {
		q.BeginShutdown(false, false)
	}
	reg.opMu.Unlock()
	// The old instance goes: its consumers are told (basic.cancel), its
	// log closes; then this member reopens its copy in its new role.
	var err error
	if q != nil {
		err = q.FinishHandoff()
	} else if old != nil {
		err = old.Close()
	}
	if err != nil {
		b.log.Warn("cluster: closing a quorum queue for its new leader", "vhost", rec.VHost, "queue", rec.Name, "err", err)
	}
	if _, member := b.queueLogOptionsFor(rec); !member {
		return nil, nil
	}
	reg.opMu.Lock()
	err = b.openPlacedLocked(reg, p)
	reg.opMu.Unlock()
	b.streamOpened(rec.VHost, rec.Name)
	return nil, err
}

// openPlacedLocked opens this member's copy of a replicated queue in its
// role: a replica's log is held for its pull; a leader's is recovered
// into the queue (recoverPlaced) once its log is committed.
// REQUIRES: reg.opMu held; p's log not open.
func (b *Broker) openPlacedLocked(reg *queueRegistry, p *placedQueue) error {
	opts, _ := b.queueLogOptionsFor(p.rec)
	if opts.Replication.Role == osiris.RoleReplica {
		opts.Replication.Epoch = 0 // a replica takes its leader's epochs from the chunks
	}
	s, err := osiris.Open(b.queueDir(true, p.rec.ID), opts)
	if err != nil {
		b.log.Error("cluster: open a quorum queue's log", "vhost", p.rec.VHost, "queue", p.rec.Name, "err", err)
		return err
	}
	reg.mu.Lock()
	p.log = s
	gen := p.gen
	reg.mu.Unlock()
	if opts.Replication.Role == osiris.RoleLeader {
		go b.recoverPlaced(p, gen, s)
	}
	return nil
}

// recoverPlaced makes the queue of a leader's log: once the log this
// member opened with is committed (a majority holds it: nothing it
// rebuilds from can be replaced), it rebuilds the queue from the log
// and its ack state in it, registers and starts it. It gives up when
// the queue is reopened or deleted meanwhile.
func (b *Broker) recoverPlaced(p *placedQueue, gen uint64, s *osiris.Stream) {
	reg := b.queueReg()
	current := func() bool {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		return p.gen == gen && p.log == s
	}
	want := s.Stats().LastChunkID
	for s.CommittedChunkID() < want {
		if !current() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	reg.opMu.Lock()
	defer reg.opMu.Unlock()
	if !current() {
		return
	}
	def, err := placedDef(p.rec)
	if err == nil {
		var q *Queue
		q, err = classic.Recover(b.qenv, def, s, classic.NoJournalFloor)
		if err == nil {
			key := streamName{def.VHost, def.Name}
			reg.mu.Lock()
			p.log = nil
			reg.mu.queues[key] = q
			reg.mu.Unlock()
			q.Start()
			b.log.Info("cluster: leading quorum queue", "vhost", def.VHost, "queue", def.Name, "epoch", p.rec.Epoch)
			return
		}
	}
	b.log.Error("cluster: recover a quorum queue as its leader", "vhost", p.rec.VHost, "queue", p.rec.Name, "err", err)
}

// MoveQueueLeader proposes leader as the replicated queue's leader with
// epoch; refused (a no-op) unless epoch is above the current one.
func (b *Broker) MoveQueueLeader(vhost, name, leader string, epoch uint64) error {
	return b.execErr(&cmdQueueLeader{VHost: vhost, Name: name, Leader: leader, Epoch: epoch})
}

// errQueueElsewhere is the answer to a client of a node that does not
// run the replicated queue it uses.
func errQueueElsewhere(vhost, name string, rec queueRecord) *Error {
	return Errorf(CodeNotFound, "%s is led by node '%s': connect to that node", rs("queue", name, vhost), rec.Leader)
}

// PlacedQueue returns a replicated queue's definition and placement.
func (b *Broker) PlacedQueue(vhost, name string) (QueueDef, Placement, bool) {
	rec, ok := b.queueReg().placement(vhost, name)
	if !ok {
		return QueueDef{}, Placement{}, false
	}
	def, err := placedDef(rec)
	if err != nil {
		return QueueDef{}, Placement{}, false
	}
	return def, placementOfQueue(rec), true
}

// PlacedQueueNames returns the names of vhost's replicated queues.
func (b *Broker) PlacedQueueNames(vhost string) []string {
	reg := b.queueReg()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var out []string
	for k := range reg.mu.placed {
		if k.vhost == vhost {
			out = append(out, k.name)
		}
	}
	return out
}
