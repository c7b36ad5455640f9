package queues

import (
	"errors"
	"fmt"
	"slices"
)

// Forgetting a node (rabbitmqctl forget_cluster_node; cluster/node's
// Node.Forget proposes it once it has checked the node is down): the
// catalog records the node as forgotten for good, and every replicated
// stream's and quorum queue's record drops it from its members, so new
// streams and queues leave it out, it is never chosen to lead, and the
// coordinator moves a leadership it still holds (it is unreachable).
//
// Majorities do not shrink: the record counts the member as lost (Lost),
// and both the commit (osiris's Replication.Members, at every open) and
// a leader move (cluster/node's answersNeeded) still take their majority
// of len(Members)+Lost, as if the node were a member that never answers
// again. Shrinking them would need more than a new count: a chunk
// committed on the forgotten node and the leader only is on one node
// left, so until every remaining member is known to hold the leader's
// log, a leader move among fewer answers could lose it (main's rule lets
// one answer of two members choose, which is safe only for a log whose
// every epoch had two members). Nothing is reopened, so no consumer or
// client is disturbed; availability is what it was with the node down.

// cmdForgetNode removes a node from the cluster for good.
type cmdForgetNode struct {
	Node string `json:"node"`
}

func (*cmdForgetNode) op() string { return "node.forget" }

func init() { registerCommand(func() command { return &cmdForgetNode{} }) }

func forgottenKey(node string) []byte { return []byte("nf/" + node) }

// ForgetNode proposes forgetting node (cmdForgetNode). The caller checks
// that the node is down and not this one.
func (b *Broker) ForgetNode(node string) error {
	if node == "" {
		return fmt.Errorf("queues: forget a node without a name: %w", ErrNotFound)
	}
	return b.execErr(&cmdForgetNode{Node: node})
}

// NodeForgotten reports whether node was forgotten.
func (b *Broker) NodeForgotten(node string) bool {
	var v bool
	return b.cat.get(forgottenKey(node), &v) == nil
}

// ForgottenNodes returns the forgotten nodes, sorted.
func (b *Broker) ForgottenNodes() []string {
	var out []string
	_ = b.cat.scan([]byte("nf/"), func(k, _ []byte) error {
		out = append(out, string(k[len("nf/"):]))
		return nil
	})
	return out
}

// SetOnForget sets the function called, after a node.forget command is
// applied (or restored from a snapshot), with the node's name. It runs
// on the catalog's apply path: it must not block nor propose.
func (b *Broker) SetOnForget(fn func(node string)) {
	b.cstreams.mu.Lock()
	b.cstreams.onForget = fn
	b.cstreams.mu.Unlock()
}

func (c *cmdForgetNode) apply(b *Broker) (any, error) {
	if err := b.cat.put(forgottenKey(c.Node), true); err != nil {
		return nil, err
	}
	if err := b.cat.delete(nodeAddrKey(c.Node)); err != nil {
		return nil, err
	}
	cs := &b.cstreams
	cs.mu.Lock()
	cs.nodes = slices.DeleteFunc(cs.nodes, func(n string) bool { return n == c.Node })
	fn := cs.onForget
	cs.mu.Unlock()

	without := func(members []string) ([]string, bool) {
		if !slices.Contains(members, c.Node) {
			return members, false
		}
		return slices.DeleteFunc(slices.Clone(members), func(n string) bool { return n == c.Node }), true
	}
	reg := b.queueReg()
	reg.opMu.Lock()
	var err error
	var streams []StreamDef
	var queues []*placedQueue
	var lostClassic []streamName
	b.mu.Lock()
	for _, def := range b.mu.placed {
		if m, ok := without(def.Members); ok {
			def.Members = m
			def.Lost++
			streams = append(streams, def)
		}
	}
	b.mu.Unlock()
	for _, def := range streams {
		if err = b.cat.put(streamKey(def.VHost, def.Name), def); err != nil {
			break
		}
		b.mu.Lock()
		if cur, ok := b.mu.placed[streamName{def.VHost, def.Name}]; ok && cur.Epoch == def.Epoch {
			b.mu.placed[streamName{def.VHost, def.Name}] = def
		}
		b.mu.Unlock()
	}
	if err == nil {
		reg.mu.Lock()
		for k, p := range reg.mu.placed {
			if _, ok := without(p.rec.Members); !ok {
				continue
			}
			if p.rec.Type == QueueClassic {
				// Not replicated: its only copy was the forgotten node's.
				lostClassic = append(lostClassic, k)
				continue
			}
			queues = append(queues, p)
		}
		reg.mu.Unlock()
		for _, p := range queues {
			reg.mu.Lock()
			rec := p.rec
			reg.mu.Unlock()
			rec.Members, _ = without(rec.Members)
			rec.Lost++
			if err = b.cat.put(queueKey(rec.VHost, rec.Name), rec); err != nil {
				break
			}
			reg.mu.Lock()
			p.rec = rec
			reg.mu.Unlock()
		}
	}
	reg.opMu.Unlock()
	for _, k := range lostClassic {
		// As RabbitMQ's forget_cluster_node: the node's classic queues go.
		if _, derr := (&cmdDeleteQuorum{VHost: k.vhost, Name: k.name}).apply(b); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queues: forget node %s: %w", c.Node, err)
	}
	b.log.Info("cluster: node forgotten", "node", c.Node, "streams", len(streams), "quorum_queues", len(queues))
	if fn != nil {
		fn(c.Node)
	}
	return nil, nil
}
