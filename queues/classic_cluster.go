package queues

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
)

// Classic queues in a cluster (docs/design-cluster.md, "Queues in the
// catalog"): a classic queue is the cluster's name but its declaring
// node's queue, as in RabbitMQ 4.x. Its record (a queue.declare command,
// as a quorum queue's) names that node, its home, as its only member and
// leader; the home creates and runs the queue exactly as a single node
// does (its log, its ack state in the node's catalog, fan-out by
// reference), and every other node knows it: declares there are checked
// against the record, bindings to it are the cluster's, and publishers
// and consumers there reach it through the proxy (proxy.go). Classic
// queues are not replicated: while the home node is down, its queues are
// out of reach.
//
// An exclusive queue belongs to a connection of its home node: the
// declare names the connection through a token only the home node can
// resolve (ownerTokens), other nodes answer 405 (locked), and the home
// deletes the queue through the cluster's log when the connection
// closes. A queue that is not durable goes with its home node's restart:
// the home deletes the records of those it no longer has
// (dropLostClassic) once it is back in the cluster.

// ownerTokens maps the tokens of this process's classic declares in
// flight to their declaring connections, for the home node's apply: a
// declare applied again after a restart finds no token, and creates
// nothing (a durable queue is open already; a transient one is gone).
var ownerTokens sync.Map // string -> declaring

// declaring is a classic declare in flight: its owner, for an exclusive
// queue.
type declaring struct{ owner any }

// declareClassicCluster proposes a new classic queue homed on this node.
// REQUIRES: reg.opMu held; it is let go across the proposal.
func (b *Broker) declareClassicCluster(reg *queueRegistry, def QueueDef, owner any) (*Queue, error) {
	args, err := encodeArgs(def.Args)
	if err != nil {
		return nil, err
	}
	node := b.repl.node
	c := &cmdDeclareQuorum{Rec: queueRecord{VHost: def.VHost, Name: def.Name, Type: QueueClassic,
		AutoDelete: def.AutoDelete, Args: args, Members: []string{node}, Leader: node,
		Transient: !def.Durable, Exclusive: def.Exclusive}}
	var t [12]byte
	_, _ = rand.Read(t[:])
	c.Token = hex.EncodeToString(t[:])
	ownerTokens.Store(c.Token, declaring{owner})
	defer ownerTokens.Delete(c.Token)
	reg.opMu.Unlock()
	_, err = b.exec(c)
	reg.opMu.Lock()
	if err != nil {
		return nil, err
	}
	q := reg.get(def.VHost, def.Name)
	if q == nil {
		return nil, fmt.Errorf("queues: %s was declared but is not open here", rs("queue", def.Name, def.VHost))
	}
	return q, nil
}

// declarePlacedClassicLocked is queue.declare's apply for a classic
// queue, once the name is known to be free: the home node creates the
// queue, every node records it.
// REQUIRES: reg.opMu held; it unlocks it.
func (b *Broker) declarePlacedClassicLocked(reg *queueRegistry, c *cmdDeclareQuorum) (any, error) {
	rec := c.Rec
	key := streamName{rec.VHost, rec.Name}
	p := &placedQueue{rec: rec}
	var q *Queue
	if rec.Leader == b.opts.NodeName {
		def, err := placedDef(rec)
		if err != nil {
			reg.opMu.Unlock()
			return nil, err
		}
		if d, fresh := ownerTokens.Load(c.Token); fresh {
			var owner any
			if rec.Exclusive {
				owner = d.(declaring).owner
			}
			b.watchQueuePolicies()
			if q, err = b.createQueue(reg, def, owner); err != nil {
				reg.opMu.Unlock()
				return nil, err
			}
			p.rec.ID = q.Def().ID
		} else if !rec.Transient {
			// Applied again after a restart, the queue's own record
			// written and not its placement: the queue is open here.
			if q = reg.get(rec.VHost, rec.Name); q != nil {
				p.rec.ID = q.Def().ID
			}
		}
	}
	if home := rec.Leader == b.opts.NodeName; !home || (!rec.Transient && q != nil) {
		// The other nodes' record, for any queue; the home's own for a
		// durable one (createQueue wrote it without the placement). A
		// transient queue's home keeps none: after its restart the
		// queue is gone (dropLostClassic).
		if err := b.cat.put(queueKey(rec.VHost, rec.Name), p.rec); err != nil {
			reg.opMu.Unlock()
			if q != nil {
				q.BeginShutdown(false, false)
				q.FinishShutdown(true)
			}
			return nil, err
		}
	}
	fresh := q != nil && reg.get(rec.VHost, rec.Name) == nil
	reg.mu.Lock()
	reg.mu.placed[key] = p
	if q != nil {
		reg.mu.queues[key] = q
	}
	reg.mu.Unlock()
	b.topoQueueAdded(rec.VHost, rec.Name, !rec.Transient)
	if fresh {
		b.churn.QueuesCreated.Add(1)
		q.Start()
	}
	reg.opMu.Unlock()
	return nil, nil
}

// dropLostClassic deletes, through the cluster's log, the records of the
// classic queues homed here that this node no longer has: those that
// were not durable (gone with its restart). Called once the node is back
// in its cluster.
func (b *Broker) dropLostClassic() error {
	reg := b.queueReg()
	reg.mu.Lock()
	var lost []streamName
	for k, p := range reg.mu.placed {
		if p.rec.Type == QueueClassic && p.rec.Leader == b.opts.NodeName && reg.mu.queues[k] == nil && p.rec.Transient {
			lost = append(lost, k)
		}
	}
	reg.mu.Unlock()
	for _, k := range lost {
		if _, err := b.exec(&cmdDeleteQuorum{VHost: k.vhost, Name: k.name}); err != nil {
			return err
		}
	}
	return nil
}
