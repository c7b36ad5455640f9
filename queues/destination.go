package queues

import (
	"encoding/binary"
	"errors"

	"github.com/warren-mq/warren/osiris"
)

// A message routed to queues goes to each Destination the routed names
// designate, of any type: a classic or quorum queue appends the record
// (the AMQP 0-9-1-native format, EncodeRecord), a stream appends the
// message as an AMQP 1.0 message in one simple entry, with its filter
// value, as rabbit_stream_queue:deliver does. Each format is encoded once
// per message, however many destinations share it.

// Destination is a routed name resolved to a queue of some type.
type Destination struct {
	q *Queue
	s *osiris.Stream
	b *Broker
	// away is why a replicated queue led by another node cannot take
	// the message here (quorum_cluster.go): publishing fails with it.
	away error
	// remote is a replicated queue another node leads, reached through
	// the proxy (proxy.go).
	remote *remoteDest
}

// Destination returns the queue or stream name designates; false when it
// is neither. It allocates nothing, except for a replicated queue
// another node leads.
func (b *Broker) Destination(vhost, name string) (Destination, bool) {
	q, s := b.LookupDestination(vhost, name)
	if s != nil && b.repl != nil {
		// A replicated stream another node leads: its leader appends.
		if def, ok := b.StreamPlacement(vhost, name); ok && def.Leader != b.opts.NodeName {
			if p := b.proxy(); p != nil {
				return Destination{b: b, remote: &remoteDest{p: p, node: def.Leader, vhost: vhost, name: name, stream: true}}, true
			}
		}
	}
	if q == nil && s == nil && b.repl != nil {
		if rec, ok := b.queueReg().placement(vhost, name); ok {
			if p := b.proxy(); p != nil && rec.Leader != b.opts.NodeName {
				return Destination{b: b, remote: &remoteDest{p: p, node: rec.Leader, vhost: vhost, name: name}}, true
			}
			return Destination{b: b, away: errQueueElsewhere(vhost, name, rec)}, true
		}
		if def, ok := b.StreamPlacement(vhost, name); ok {
			// A stream with no copy on this node (not a member).
			return Destination{b: b, away: Errorf(CodeNotFound, "%s has no replica on this node: its leader is node '%s'",
				rs("queue", name, vhost), def.Leader)}, true
		}
	}
	return Destination{q: q, s: s, b: b}, q != nil || s != nil
}

// shared reports whether d takes a fan-out's reference rather than a
// copy: it is a durable classic or quorum queue (bodies.go) whose ack
// state is not in its log. A LogState queue's log is replicated, and a
// reference into the vhost's body log, which is this node's alone,
// would mean nothing on the member that takes over: its records must be
// self-contained.
func (d Destination) shared() bool {
	if d.q == nil {
		return false
	}
	def := d.q.Def()
	return def.Durable && !def.LogState
}

// Queue is the destination's classic or quorum queue, nil for a stream.
func (d Destination) Queue() *Queue { return d.q }

// StreamEncoder encodes a message for streams, as the front end that
// received it knows how.
type StreamEncoder interface {
	// AppendStreamMessage appends the message, as an AMQP 1.0 message,
	// to dst and returns the extended slice and the message's filter
	// value (nil for none).
	AppendStreamMessage(dst []byte) (out, filter []byte, err error)
}

// Publishing is a message to publish to destinations.
type Publishing struct {
	Record     []byte // for classic and quorum queues
	Persistent bool
	Stream     StreamEncoder // for streams; called once, if a destination is a stream
	SizeHint   int           // about the size of the AMQP 1.0 message, to size its buffer
}

// errEntryTooLarge is a message whose AMQP 1.0 encoding does not fit a
// simple entry's 31-bit size.
var errEntryTooLarge = errors.New("queues: message too large for a stream entry")

// Publish stores p in every destination; done is called once per
// destination, when it has stored it (or failed to). Classic and quorum
// queues confirm as Queue.Publish says; streams once their writer has
// written the chunk, without fsync, as RabbitMQ's streams do.
//
// A message for two or more durable classic or quorum queues is stored
// once, with a reference in each (bodies.go).
func Publish(dsts []Destination, p *Publishing, done func(error)) {
	var entry, filter []byte
	var err error
	encoded := false
	refs := false
	if len(dsts) > 1 {
		n := 0
		for _, d := range dsts {
			if d.shared() {
				n++
			}
		}
		if n > 1 && dsts[0].b != nil {
			if bl := dsts[0].b.bodyLog(vhostOf(dsts)); bl != nil {
				refs = bl.publish(dsts, p, done)
			}
		}
	}
	for _, d := range dsts {
		if d.away != nil {
			done(d.away)
			continue
		}
		if r := d.remote; r != nil && !r.stream {
			r.p.Publish(r.node, r.vhost, r.name, p.Record, p.Persistent, done)
			continue
		}
		if d.q != nil {
			if !refs || !d.shared() {
				d.q.Publish(p.Record, p.Persistent, done)
			}
			continue
		}
		if !encoded {
			entry, filter, err = streamEntry(p)
			encoded = true
		}
		if err != nil {
			done(err)
			continue
		}
		if r := d.remote; r != nil {
			r.p.PublishStream(r.node, r.vhost, r.name, entry, filter, done)
			continue
		}
		b := &osiris.Batch{
			Messages: []osiris.Message{{Entry: entry, Filter: filter}},
			Done:     func(r osiris.Result) { done(r.Err) },
		}
		if err := d.s.Submit(b); err != nil {
			done(err) // closed or deleted meanwhile
		}
	}
}

// vhostOf is the vhost of dsts' queues (routing never leaves a vhost).
func vhostOf(dsts []Destination) string {
	for _, d := range dsts {
		if d.q != nil {
			return d.q.Def().VHost
		}
	}
	return ""
}

// streamEntry encodes p as a simple entry: u32 size (top bit clear), then
// the AMQP 1.0 message.
func streamEntry(p *Publishing) (entry, filter []byte, err error) {
	entry = make([]byte, 4, 4+256+p.SizeHint)
	entry, filter, err = p.Stream.AppendStreamMessage(entry)
	if err == nil && len(entry)-4 > 1<<31-1 {
		err = errEntryTooLarge
	}
	if err != nil {
		return nil, nil, err
	}
	binary.BigEndian.PutUint32(entry, uint32(len(entry)-4))
	return entry, filter, nil
}
