package queues

import (
	"errors"

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
}

// RemoteSubscription is a consumer of a queue another node runs; it
// settles its deliveries.
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

// errNoProxy is a proxied operation this node cannot make.
var errNoProxy = errors.New("queues: no proxy to other nodes")

// consumeRemote starts a consumer of a replicated queue its leader runs
// elsewhere, through the proxy.
func (b *Broker) consumeRemote(vhost, name string, rec queueRecord, o ConsumerOptions, args map[string]any) (Subscription, error) {
	p := b.proxy()
	if p == nil || o.Credited {
		// AMQP 1.0's credited consumers are not proxied yet.
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
