package prom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
	"github.com/warren-mq/warren/streamproto/wire"
)

// logMetrics are the logs' process-wide counters.
var logMetrics = &osiris.Metrics

// streamErrorNames are RabbitMQ's stream error counters, by response
// code (rabbit_stream_metrics.hrl).
var streamErrorNames = []struct {
	code wire.Code
	name string
}{
	{wire.CodeStreamDoesNotExist, "stream_does_not_exist"},
	{wire.CodeSubscriptionIDExists, "subscription_id_already_exists"},
	{wire.CodeSubscriptionIDDoesNotExist, "subscription_id_does_not_exist"},
	{wire.CodeStreamAlreadyExists, "stream_already_exists"},
	{wire.CodeStreamNotAvailable, "stream_not_available"},
	{wire.CodeSASLMechanismNotSupported, "sasl_mechanism_not_supported"},
	{wire.CodeAuthenticationFailure, "authentication_failure"},
	{wire.CodeSASLError, "sasl_error"},
	{wire.CodeSASLChallenge, "sasl_challenge"},
	{wire.CodeAuthenticationLoopback, "sasl_authentication_failure_loopback"},
	{wire.CodeVirtualHostAccessFailure, "vhost_access_failure"},
	{wire.CodeUnknownFrame, "unknown_frame"},
	{wire.CodeFrameTooLarge, "frame_too_large"},
	{wire.CodeInternalError, "internal_error"},
	{wire.CodeAccessRefused, "access_refused"},
	{wire.CodePreconditionFailed, "precondition_failed"},
	{wire.CodePublisherDoesNotExist, "publisher_does_not_exist"},
}

// global emits RabbitMQ's global counters (rabbit_global_counters):
// per protocol, per protocol and queue type, dead-lettering, and the
// stream protocol's errors.
func (sc *scrape) global(e *emitter, d *data) {
	b := sc.s.cfg.Broker
	var vals [queues.NumProtos]queues.CounterValues
	for p := range queues.NumProtos {
		vals[p] = b.ProtoCounters(p)
	}
	proto := []string{"protocol"}
	perProto := func(name, help string, pick func(*queues.CounterValues) uint64) {
		e.labelled(name, help, counter, proto, func(add func(float64, ...string)) {
			for p := range queues.NumProtos {
				add(float64(pick(&vals[p])), queues.ProtoNames[p])
			}
		})
	}
	perProto("messages_received_total", "Total number of messages received from publishers", func(v *queues.CounterValues) uint64 { return v.Received })
	perProto("messages_received_confirm_total", "Total number of messages received from publishers expecting confirmations", func(v *queues.CounterValues) uint64 { return v.ReceivedConfirm })
	perProto("messages_routed_total", "Total number of messages routed to queues or streams", func(v *queues.CounterValues) uint64 { return v.Routed })
	perProto("messages_unroutable_dropped_total", "Total number of messages published as non-mandatory into an exchange and dropped as unroutable", func(v *queues.CounterValues) uint64 { return v.UnroutableDropped })
	perProto("messages_unroutable_returned_total", "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", func(v *queues.CounterValues) uint64 { return v.UnroutableReturned })
	perProto("messages_confirmed_total", "Total number of messages confirmed to publishers", func(v *queues.CounterValues) uint64 { return v.Confirmed })
	e.labelled("publishers", "Current number of publishers", gauge, proto, func(add func(float64, ...string)) {
		for p := range queues.NumProtos {
			add(float64(d.publishers[p]), queues.ProtoNames[p])
		}
	})
	e.labelled("consumers", "Current number of consumers", gauge, proto, func(add func(float64, ...string)) {
		for p := range queues.NumProtos {
			add(float64(d.protoConsumers[p]), queues.ProtoNames[p])
		}
	})

	// Deliveries: AMQP 0-9-1 from every queue type, the stream protocol
	// from streams only (as RabbitMQ initialises them).
	pq := []string{"protocol", "queue_type"}
	perType := func(name, help string, pick func(*queues.DeliveryValues) uint64) {
		e.labelled(name, help, counter, pq, func(add func(float64, ...string)) {
			for qt := range queues.NumQTypes {
				add(float64(pick(&vals[queues.ProtoAMQP091].Delivery[qt])), queues.ProtoNames[queues.ProtoAMQP091], queues.QTypeNames[qt])
			}
			add(float64(pick(&vals[queues.ProtoStream].Delivery[queues.QTStream])), queues.ProtoNames[queues.ProtoStream], queues.QTypeNames[queues.QTStream])
		})
	}
	perType("messages_delivered_total", "Total number of messages delivered to consumers", func(v *queues.DeliveryValues) uint64 { return v.Delivered })
	perType("messages_delivered_consume_manual_ack_total", "Total number of messages delivered to consumers using basic.consume with manual acknowledgment", func(v *queues.DeliveryValues) uint64 { return v.ConsumeManualAck })
	perType("messages_delivered_consume_auto_ack_total", "Total number of messages delivered to consumers using basic.consume with automatic acknowledgment", func(v *queues.DeliveryValues) uint64 { return v.ConsumeAutoAck })
	perType("messages_delivered_get_manual_ack_total", "Total number of messages delivered to consumers using basic.get with manual acknowledgment", func(v *queues.DeliveryValues) uint64 { return v.GetManualAck })
	perType("messages_delivered_get_auto_ack_total", "Total number of messages delivered to consumers using basic.get with automatic acknowledgment", func(v *queues.DeliveryValues) uint64 { return v.GetAutoAck })
	perType("messages_get_empty_total", "Total number of times basic.get operations fetched no message", func(v *queues.DeliveryValues) uint64 { return v.GetEmpty })
	perType("messages_redelivered_total", "Total number of messages redelivered to consumers", func(v *queues.DeliveryValues) uint64 { return v.Redelivered })
	perType("messages_acknowledged_total", "Total number of messages acknowledged by consumers", func(v *queues.DeliveryValues) uint64 { return v.Acknowledged })

	sc.deadLettered(e)

	errs := b.StreamErrors()
	for _, se := range streamErrorNames {
		e.labelled("stream_error_"+se.name+"_total", "Total number of commands rejected with "+se.name+" error", counter, proto, func(add func(float64, ...string)) {
			add(float64(errs[uint8(se.code)].Load()), queues.ProtoNames[queues.ProtoStream])
		})
	}
}

// deadLettered emits the dead-letter counters with RabbitMQ's label sets:
// each (queue type, strategy) pair has the reasons it can have. Warren
// has no at-least-once strategy (its dead-lettering is at least once
// anyway, see queues/classic/dlx.go), so that pair of quorum queues
// stays at zero, as does direct reply-to's maxlen.
func (sc *scrape) deadLettered(e *emitter) {
	dl := sc.s.cfg.Broker.DeadLettered()
	const (
		rejected, expired, maxlen, deliveryLimit = 0, 1, 2, 3
	)
	type series struct {
		qt       string
		strategy string
		quorum   bool
		withDLX  bool
		zero     bool // a label set Warren never counts into
	}
	sets := []series{
		{"rabbit_volatile_queue", "disabled", false, false, true},
		{"rabbit_classic_queue", "disabled", false, false, false},
		{"rabbit_classic_queue", "at_most_once", false, true, false},
		{"rabbit_quorum_queue", "disabled", true, false, false},
		{"rabbit_quorum_queue", "at_most_once", true, true, false},
		{"rabbit_quorum_queue", "at_least_once", true, true, true},
	}
	lbl := []string{"queue_type", "dead_letter_strategy"}
	reason := func(name, help string, r int, has func(series) bool) {
		e.labelled(name, help, counter, lbl, func(add func(float64, ...string)) {
			for _, s := range sets {
				if !has(s) {
					continue
				}
				v := 0.0
				if !s.zero {
					v = float64(dl.Load(s.quorum, s.withDLX, r))
				}
				add(v, s.qt, s.strategy)
			}
		})
	}
	notVolatile := func(s series) bool { return s.qt != "rabbit_volatile_queue" }
	reason("messages_dead_lettered_maxlen_total", "Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx", maxlen,
		func(s series) bool { return s.strategy != "at_least_once" })
	reason("messages_dead_lettered_expired_total", "Total number of messages dead-lettered due to message TTL exceeded", expired, notVolatile)
	reason("messages_dead_lettered_rejected_total", "Total number of messages dead-lettered due to basic.reject or basic.nack", rejected, notVolatile)
	reason("messages_dead_lettered_delivery_limit_total", "Total number of messages dead-lettered due to delivery-limit exceeded", deliveryLimit,
		func(s series) bool { return s.qt == "rabbit_quorum_queue" })
	e.labelled("messages_dead_lettered_confirmed_total", "Total number of messages dead-lettered and confirmed by target queues", counter, lbl, func(add func(float64, ...string)) {
		add(0, "rabbit_quorum_queue", "at_least_once")
	})
}

// messageSizes emits RabbitMQ 4.x's message size histogram (AMQP 0-9-1
// publishes; RabbitMQ does not measure the stream protocol's either).
func (sc *scrape) messageSizes(e *emitter, _ *data) {
	v := sc.s.cfg.Broker.ProtoCounters(queues.ProtoAMQP091)
	bounds := make([]float64, len(queues.SizeBuckets))
	for i, b := range queues.SizeBuckets {
		bounds[i] = float64(b)
	}
	e.histogram("message_size_bytes", "Size of messages received from publishers", bounds, v.Sizes[:], float64(v.SizeSum),
		[]string{"protocol"}, queues.ProtoNames[queues.ProtoAMQP091])
}

// alarms emits RabbitMQ's alarm gauges: 1 while the alarm is in
// effect.
func (sc *scrape) alarms(e *emitter) {
	active := sc.s.cfg.Broker.Alarms().Active()
	e.one("free_disk_space_watermark", "is 1 if free disk space watermark alarm is in effect", untyped, bit(active&alarm.Disk != 0))
	e.one("memory_used_watermark", "is 1 if VM memory watermark alarm is in effect", untyped, bit(active&alarm.Memory != 0))
}

func bit(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

// warren emits what only Warren measures.
func (sc *scrape) warren(e *emitter, d *data) {
	m := logMetrics
	e.one("log_bytes_written_total", "Bytes appended to segment files (chunk headers and data) by every stream and queue log", counter, float64(m.BytesWritten.Load()))
	e.one("log_chunks_written_total", "Chunks appended to segment files by every stream and queue log", counter, float64(m.ChunksWritten.Load()))
	chunks := make([]uint64, len(m.ChunkSizes))
	for i := range m.ChunkSizes {
		chunks[i] = m.ChunkSizes[i].Load()
	}
	e.histogram("chunk_size_bytes", "Entry data per chunk written", osiris.ChunkSizeBuckets[:], chunks, float64(m.ChunkBytes.Load()), nil)
	syncs := make([]uint64, len(m.Syncs))
	for i := range m.Syncs {
		syncs[i] = m.Syncs[i].Load()
	}
	e.histogram("fsync_duration_seconds", "Time to fsync a segment file and its index", osiris.SyncBuckets[:], syncs, float64(m.SyncNanos.Load())/1e9, nil)
	e.one("retention_segments_deleted_total", "Stream segments deleted by retention (max-age, max-length-bytes)", counter, float64(m.RetentionSegments.Load()))
	e.one("retention_bytes_deleted_total", "Bytes of the stream segments deleted by retention", counter, float64(m.RetentionBytes.Load()))
	e.one("stream_publishes_deduplicated_total", "Stream publishes dropped as duplicates of a producer's earlier publishing ids (and confirmed)", counter, float64(m.Duplicates.Load()))
	b := sc.s.cfg.Broker
	if t := b.AckStateCovered(); !t.IsZero() {
		e.one("ack_state_persisted_timestamp_seconds", "When the last write of the durable queues' ack states that reached the disk began: every ack applied before it survives a crash", gauge, float64(t.UnixNano())/1e9)
	}
	e.labelled("messages_received_bytes_total", "Bytes of messages received from publishers (AMQP bodies; stream protocol Publish frames)", counter, []string{"protocol"}, func(add func(float64, ...string)) {
		for p := range queues.NumProtos {
			add(float64(b.ProtoCounters(p).ReceivedBytes), queues.ProtoNames[p])
		}
	})
	e.labelled("flow_control_holds_total", "Times publisher flow control stopped reading a connection until its queues' and streams' writers had written what it had published", counter, []string{"protocol"}, func(add func(float64, ...string)) {
		for p := range queues.NumProtos {
			add(float64(b.ProtoCounters(p).FlowHolds), queues.ProtoNames[p])
		}
	})
	bodies, refs := b.FanoutCounts()
	e.one("fanout_bodies_total", "Messages routed to several durable queues and stored once, in their vhost's body log", counter, float64(bodies))
	e.one("fanout_references_total", "References to those messages written to the queues' logs in place of copies", counter, float64(refs))
	bls := b.BodyLogStats()
	e.labelled("body_log_bytes", "Bytes of the segment files of a vhost's body log (fan-out by reference)", gauge, []string{"vhost"}, func(add func(float64, ...string)) {
		for _, st := range bls {
			add(float64(st.Bytes), st.VHost)
		}
	})
	e.labelled("body_log_segments", "Segment files of a vhost's body log", gauge, []string{"vhost"}, func(add func(float64, ...string)) {
		for _, st := range bls {
			add(float64(st.Segments), st.VHost)
		}
	})
	per := sc.perObject()
	obj := func(name, help string, t prometheus.ValueType, pick func(*qrow) (float64, bool)) {
		if !per {
			var sum float64
			for i := range d.queues {
				if v, ok := pick(&d.queues[i]); ok {
					sum += v
				}
			}
			e.one(name, help, t, sum)
			return
		}
		e.labelled(name, help, t, queueLabels, func(add func(float64, ...string)) {
			for i := range d.queues {
				if v, ok := pick(&d.queues[i]); ok {
					add(v, d.queues[i].vhost, d.queues[i].name)
				}
			}
		})
	}
	obj("queue_messages_published_total", "Messages enqueued on a classic or quorum queue", counter, func(q *qrow) (float64, bool) { return float64(q.ctr.Published), !q.stream })
	obj("queue_messages_delivered_total", "Messages delivered from a classic or quorum queue to consumers and basic.get, both acknowledgement modes", counter, func(q *qrow) (float64, bool) {
		return float64(q.ctr.Delivered + q.ctr.Got), !q.stream
	})
	// Queue history (x-history-max-age, x-history-max-length-bytes):
	// only queues that keep one have samples.
	obj("queue_history_messages", "Messages in a classic or quorum queue's history: its log, settled and still queued", gauge, func(q *qrow) (float64, bool) { return float64(q.hist.Messages), q.hasHist })
	obj("queue_history_bytes", "Bytes of the segment files of a classic or quorum queue's history", gauge, func(q *qrow) (float64, bool) { return float64(q.hist.Bytes), q.hasHist })
	obj("queue_history_segments", "Segment files of a classic or quorum queue's history", gauge, func(q *qrow) (float64, bool) { return float64(q.hist.Segments), q.hasHist })
	obj("queue_history_readers", "History readers (consumers with x-stream-offset) attached to a classic or quorum queue", gauge, func(q *qrow) (float64, bool) { return float64(q.hist.Readers), q.hasHist })
	obj("stream_messages", "Records in a stream (from its first to its next offset)", gauge, func(q *qrow) (float64, bool) { return float64(q.ready), q.stream })
	obj("stream_size_bytes", "Bytes of a stream's segment files", gauge, func(q *qrow) (float64, bool) { return float64(q.streamBytes), q.stream })
}
