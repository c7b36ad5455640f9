package queues

import (
	"github.com/warren-mq/warren/osiris"
)

// Proxying (docs/design-cluster.md, "Queues in the catalog"): in a
// cluster, a client of one node may use a replicated queue another node
// leads. Its publishes are forwarded to the leader, which confirms them
// as its own publishers' (Destination, Publish), and its consumers are
// consumers at the leader whose deliveries and settlements travel
// between the nodes (Consume). The broker reaches other nodes only
// through a Proxy; cluster/node implements it over the node-to-node
// connections and serves the other side with PublishHere and
// ConsumeHere.

// Proxy reaches the queues other nodes run.
type Proxy interface {
	// Publish stores the queue record rec in queue vhost/name on node
	// and calls done once, as Queue.Publish does (nil: stored as the
	// queue confirms).
	Publish(node, vhost, name string, rec []byte, persistent bool, done func(error))
	// PublishStream appends the stream entry (a simple entry: u32 size,
	// then the AMQP 1.0 message) with its filter value (nil for none)
	// to stream vhost/name, which node leads, and calls done once, when
	// the stream has it as its own publishers' (committed).
	PublishStream(node, vhost, name string, entry, filter []byte, done func(error))
	// Consume starts a consumer of queue vhost/name on node with o's
	// tag, acknowledgement mode, exclusivity and prefetch; deliveries go
	// to o.Sink with Delivery.Via set to the returned subscription,
	// which settles them. When the consumer ends on its own (the queue
	// or its leader went), o.Sink's Cancelled is called with a nil
	// queue.
	Consume(node, vhost, name string, o ConsumerOptions, args map[string]any) (RemoteSubscription, error)
	// Get takes one message of queue vhost/name on node (basic.get);
	// false when the queue is empty. Unless noAck, the delivery's Via
	// settles it; until it does, the message is the getter's.
	Get(node, vhost, name string, noAck bool) (*Delivery, bool, error)
	// Counts returns the ready messages and consumers of queue
	// vhost/name on node; Purge empties it, returning what it removed.
	Counts(node, vhost, name string) (ready, consumers int, err error)
	Purge(node, vhost, name string) (int, error)
}

// RemoteSubscription is a consumer of a queue another node runs; it
// settles its deliveries. One made with ConsumerOptions.Credited is a
// CreditedSubscription too.
type RemoteSubscription interface {
	Subscription
	Settler
	// Node is the node running the queue.
	Node() string
}

// SetProxy gives a clustered broker its way to other nodes' queues.
// Without one, what another node leads is refused here.
func (b *Broker) SetProxy(p Proxy) {
	b.cstreams.mu.Lock()
	b.cstreams.proxy = p
	b.cstreams.mu.Unlock()
}

func (b *Broker) proxy() Proxy {
	b.cstreams.mu.Lock()
	defer b.cstreams.mu.Unlock()
	return b.cstreams.proxy
}

// remoteDest is a Destination's queue or stream on another node.
type remoteDest struct {
	p           Proxy
	node        string
	vhost, name string
	stream      bool
}

// PublishStreamHere appends a stream entry to a stream this node leads:
// the serving side of Proxy.PublishStream.
func (b *Broker) PublishStreamHere(vhost, name string, entry, filter []byte, done func(error)) {
	s, err := b.Stream(vhost, name)
	if err != nil {
		done(errNoQueue(vhost, name))
		return
	}
	batch := &osiris.Batch{
		Messages: []osiris.Message{{Entry: entry, Filter: filter}},
		Done:     func(r osiris.Result) { done(r.Err) },
	}
	if err := s.Submit(batch); err != nil {
		done(err)
	}
}

// PublishHere stores rec in a queue this node runs: the serving side
// of Proxy.Publish. A queue this node does not run fails done at once.
func (b *Broker) PublishHere(vhost, name string, rec []byte, persistent bool, done func(error)) {
	reg := b.queueReg()
	if q := reg.get(vhost, name); q != nil {
		q.Publish(rec, persistent, done)
		return
	}
	if p, ok := reg.placement(vhost, name); ok {
		done(errQueueElsewhere(vhost, name, p))
		return
	}
	done(errNoQueue(vhost, name))
}

// ConsumeHere starts a consumer of a classic or quorum queue this node
// runs: the local part of Consume, and the serving side of
// Proxy.Consume.
func (b *Broker) ConsumeHere(vhost, name string, o ConsumerOptions, args map[string]any) (Subscription, error) {
	reg := b.queueReg()
	q := reg.get(vhost, name)
	if q == nil {
		if p, ok := reg.placement(vhost, name); ok {
			return nil, errQueueElsewhere(vhost, name, p)
		}
		return nil, errNoQueue(vhost, name)
	}
	return b.consumeQueue(q, o, args)
}

// consumeRemote starts a consumer of a replicated queue its leader runs
// elsewhere, through the proxy.
func (b *Broker) consumeRemote(vhost, name string, rec queueRecord, o ConsumerOptions, args map[string]any) (Subscription, error) {
	p := b.proxy()
	if p == nil {
		return nil, errQueueElsewhere(vhost, name, rec)
	}
	if _, ok := args["x-stream-offset"]; ok {
		return nil, Errorf(CodeNotImplemented, "a history reader of %s must connect to its leader's node '%s'", rs("queue", name, vhost), rec.Leader)
	}
	if o.Channel != nil && o.Channel.Limit != 0 {
		return nil, Errorf(CodeNotImplemented, "queue '%s' in vhost '%s' does not support global qos", name, vhost)
	}
	return p.Consume(rec.Leader, vhost, name, o, args)
}

// EncodeArgs encodes an argument table as the catalog stores it (an
// AMQP short stays a short), for a proxy to carry.
func EncodeArgs(args map[string]any) ([]byte, error) { return encodeArgs(args) }

// DecodeArgs decodes what EncodeArgs made.
func DecodeArgs(b []byte) (map[string]any, error) { return decodeArgs(b) }

// GetHere is basic.get of a queue this node runs: the serving side of
// Proxy.Get.
func (b *Broker) GetHere(vhost, name string, owner any, noAck bool, fn func(*Delivery)) (bool, error) {
	reg := b.queueReg()
	q := reg.get(vhost, name)
	if q == nil {
		if p, ok := reg.placement(vhost, name); ok {
			return false, errQueueElsewhere(vhost, name, p)
		}
		return false, errNoQueue(vhost, name)
	}
	if err := q.CheckGet(); err != nil {
		return false, err
	}
	return q.Get(owner, noAck, fn)
}

// GetRemote is basic.get of a queue another node runs, through the
// proxy: the delivery (its Via settles it), with the queue's type for
// the counters. An error when the queue is no other node's.
func (b *Broker) GetRemote(vhost, name string, noAck bool) (d *Delivery, got bool, qtype string, err error) {
	rec, ok := b.queueReg().placement(vhost, name)
	p := b.proxy()
	if !ok || rec.Leader == b.opts.NodeName {
		return nil, false, "", errNoQueue(vhost, name)
	}
	if p == nil {
		return nil, false, "", errQueueElsewhere(vhost, name, rec)
	}
	d, got, err = p.Get(rec.Leader, vhost, name, noAck)
	return d, got, rec.Type, err
}

// CountsHere returns the ready messages and consumers of a queue this
// node runs (queue.declare-ok's counts): the serving side of
// Proxy.Counts.
func (b *Broker) CountsHere(vhost, name string) (ready, consumers int, err error) {
	q, err := b.Queue(vhost, name)
	if err != nil {
		return 0, 0, err
	}
	ready, consumers = q.Declared()
	return ready, consumers, nil
}

// PurgeHere purges a queue this node runs: the serving side of
// Proxy.Purge. owner is the purging connection (an exclusive queue is
// its owner's alone).
func (b *Broker) PurgeHere(vhost, name string, owner any) (int, error) {
	q, err := b.Queue(vhost, name)
	if err != nil {
		return 0, err
	}
	if err := q.CheckOwner(owner); err != nil {
		return 0, err
	}
	return q.Purge()
}

// remoteOf returns the proxy and the node running a queue another node
// runs; an error for a queue that is no other node's.
func (b *Broker) remoteOf(vhost, name string) (Proxy, queueRecord, error) {
	rec, ok := b.queueReg().placement(vhost, name)
	if !ok || rec.Leader == b.opts.NodeName {
		return nil, rec, errNoQueue(vhost, name)
	}
	if rec.Exclusive {
		return nil, rec, errQueueLocked(vhost, name) // its owner is a connection of its home node
	}
	p := b.proxy()
	if p == nil {
		return nil, rec, errQueueElsewhere(vhost, name, rec)
	}
	return p, rec, nil
}

// CountsRemote returns the ready messages and consumers of a queue
// another node runs.
func (b *Broker) CountsRemote(vhost, name string) (ready, consumers int, err error) {
	p, rec, err := b.remoteOf(vhost, name)
	if err != nil {
		return 0, 0, err
	}
	return p.Counts(rec.Leader, vhost, name)
}

// PurgeRemote purges a queue another node runs.
func (b *Broker) PurgeRemote(vhost, name string) (int, error) {
	p, rec, err := b.remoteOf(vhost, name)
	if err != nil {
		return 0, err
	}
	return p.Purge(rec.Leader, vhost, name)
}
