package queues

import (
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/queues/classic"
)

// Message counters for the Prometheus endpoint, RabbitMQ's "global
// counters" (rabbit_global_counters): per protocol, and for deliveries
// per protocol and queue type. Each connection counts into its own
// Counters with atomic adds on the goroutines that already do the work
// (no lock, no allocation, no shared cache line between connections);
// a scrape sums the open connections' counters and those of the
// connections that have ended (kept in the registry when they are
// removed), so a counter never goes down.

// Proto is a protocol as the counters label it.
type Proto uint8

// Protocols, in RabbitMQ's label spelling (ProtoNames).
const (
	ProtoAMQP091 Proto = iota
	ProtoStream
	ProtoAMQP10
	NumProtos
)

// ProtoNames are the protocol label values, by Proto.
var ProtoNames = [NumProtos]string{"amqp091", "stream", "amqp10"}

// QType is a queue type as the counters label it.
type QType uint8

// Queue types, in RabbitMQ's label spelling (QTypeNames): the volatile
// type is direct reply-to's.
const (
	QTClassic QType = iota
	QTQuorum
	QTStream
	QTVolatile
	NumQTypes
)

// QTypeNames are the queue_type label values, by QType.
var QTypeNames = [NumQTypes]string{"rabbit_classic_queue", "rabbit_quorum_queue", "rabbit_stream_queue", "rabbit_volatile_queue"}

// QTypeOf is the counters' type of a queue type name (QueueClassic,
// QueueQuorum, QueueStream).
func QTypeOf(typ string) QType {
	switch typ {
	case QueueQuorum:
		return QTQuorum
	case QueueStream:
		return QTStream
	}
	return QTClassic
}

// SizeBuckets are the upper bounds of RabbitMQ's message size histogram
// (rabbit_msg_size_metrics), bytes; a last bucket takes the rest.
var SizeBuckets = [...]uint64{100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000}

// Counters are one connection's message counters. The zero value is
// ready; fields only grow.
type Counters struct {
	Received           atomic.Uint64 // messages published by the client
	ReceivedConfirm    atomic.Uint64 // of them, on channels in confirm mode
	Routed             atomic.Uint64 // routed to at least one queue or stream
	UnroutableDropped  atomic.Uint64 // non-mandatory, routed nowhere
	UnroutableReturned atomic.Uint64 // mandatory, returned
	Confirmed          atomic.Uint64 // confirms sent (acks, not nacks)
	// ReceivedBytes are the published messages' bytes: AMQP bodies, the
	// stream protocol's Publish frames (warren_ metric).
	ReceivedBytes atomic.Uint64
	// FlowHolds counts the times publisher flow control held the
	// connection's reader (internal/flow; warren_ metric).
	FlowHolds atomic.Uint64

	Delivery [NumQTypes]DeliveryCounters

	// Sizes counts published message sizes by SizeBuckets (the last
	// slot is above them all); SizeSum is their sum.
	Sizes   [len(SizeBuckets) + 1]atomic.Uint64
	SizeSum atomic.Uint64
}

// DeliveryCounters are deliveries from one queue type.
type DeliveryCounters struct {
	Delivered        atomic.Uint64 // every delivery: consume and get, both ack modes
	ConsumeManualAck atomic.Uint64
	ConsumeAutoAck   atomic.Uint64
	GetManualAck     atomic.Uint64
	GetAutoAck       atomic.Uint64
	GetEmpty         atomic.Uint64
	Redelivered      atomic.Uint64
	Acknowledged     atomic.Uint64
}

// ObserveSize counts a published message of n bytes.
func (c *Counters) ObserveSize(n int) {
	i := 0
	for i < len(SizeBuckets) && uint64(n) > SizeBuckets[i] {
		i++
	}
	c.Sizes[i].Add(1)
	c.SizeSum.Add(uint64(n))
	c.ReceivedBytes.Add(uint64(n))
}

// Deliver counts one delivery of qt, by consume or get, with or without
// acks to come.
func (c *Counters) Deliver(qt QType, get, noAck, redelivered bool) {
	d := &c.Delivery[qt]
	d.Delivered.Add(1)
	switch {
	case get && noAck:
		d.GetAutoAck.Add(1)
	case get:
		d.GetManualAck.Add(1)
	case noAck:
		d.ConsumeAutoAck.Add(1)
	default:
		d.ConsumeManualAck.Add(1)
	}
	if redelivered {
		d.Redelivered.Add(1)
	}
}

// CounterValues is a snapshot of Counters, plain numbers.
type CounterValues struct {
	Received, ReceivedConfirm, Routed, UnroutableDropped, UnroutableReturned, Confirmed uint64
	ReceivedBytes, FlowHolds                                                            uint64

	Delivery [NumQTypes]DeliveryValues
	Sizes    [len(SizeBuckets) + 1]uint64
	SizeSum  uint64
}

// DeliveryValues is a snapshot of DeliveryCounters.
type DeliveryValues struct {
	Delivered, ConsumeManualAck, ConsumeAutoAck, GetManualAck, GetAutoAck, GetEmpty, Redelivered, Acknowledged uint64
}

// addTo adds c's values to v.
func (c *Counters) addTo(v *CounterValues) {
	v.Received += c.Received.Load()
	v.ReceivedConfirm += c.ReceivedConfirm.Load()
	v.Routed += c.Routed.Load()
	v.UnroutableDropped += c.UnroutableDropped.Load()
	v.UnroutableReturned += c.UnroutableReturned.Load()
	v.Confirmed += c.Confirmed.Load()
	v.ReceivedBytes += c.ReceivedBytes.Load()
	v.FlowHolds += c.FlowHolds.Load()
	for i := range c.Delivery {
		d, o := &c.Delivery[i], &v.Delivery[i]
		o.Delivered += d.Delivered.Load()
		o.ConsumeManualAck += d.ConsumeManualAck.Load()
		o.ConsumeAutoAck += d.ConsumeAutoAck.Load()
		o.GetManualAck += d.GetManualAck.Load()
		o.GetAutoAck += d.GetAutoAck.Load()
		o.GetEmpty += d.GetEmpty.Load()
		o.Redelivered += d.Redelivered.Load()
		o.Acknowledged += d.Acknowledged.Load()
	}
	for i := range c.Sizes {
		v.Sizes[i] += c.Sizes[i].Load()
	}
	v.SizeSum += c.SizeSum.Load()
}

// Churn counts what RabbitMQ's connection_churn_metrics count, node-wide.
type Churn struct {
	ConnectionsOpened, ConnectionsClosed atomic.Uint64
	ChannelsOpened, ChannelsClosed       atomic.Uint64
	QueuesDeclared, QueuesCreated        atomic.Uint64
	QueuesDeleted                        atomic.Uint64
}

// Churn returns the broker's churn counters; front ends count channels
// on them, the broker counts connections and queues.
func (b *Broker) Churn() *Churn { return &b.churn }

// StreamErrors counts the stream protocol's error responses by response
// code (RabbitMQ's rabbitmq_global_stream_error_*_total): index by the
// code's low byte. Errors are rare, so the counters are node-wide.
type StreamErrors [256]atomic.Uint64

// StreamErrors returns the broker's stream protocol error counters.
func (b *Broker) StreamErrors() *StreamErrors { return &b.streamErrs }

// retiredCounters are the counters of ended connections, per protocol;
// guarded by the connection registry's lock.
type retiredCounters [NumProtos]CounterValues

// ProtoCounters returns the message counters of protocol p summed over
// every connection the broker has had.
func (b *Broker) ProtoCounters(p Proto) CounterValues {
	r := &b.conns
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.mu.retired[p]
	for e := range r.mu.conns {
		if e.proto == p && e.ctr != nil {
			e.ctr.addTo(&v)
		}
	}
	return v
}

// DeadLettered returns the broker's dead-letter counters
// (classic.DeadLetterCounters).
func (b *Broker) DeadLettered() *classic.DeadLetterCounters { return &b.deadLettered }

// AckStateCovered is when the last write of the durable queues' ack
// states that reached the disk began: every ack applied before it
// survives a crash (classic.Persister.Covered). The zero time before
// the first write.
func (b *Broker) AckStateCovered() time.Time { return b.persist.Covered() }
