package queues

import (
	"context"
	"runtime/pprof"
	"time"

	"github.com/warren-mq/warren/queues/classic"
)

// A history reader: basic.consume with x-stream-offset on a classic or
// quorum queue that keeps its history (x-history-max-age,
// x-history-max-length-bytes; classic/history.go). It is a stream
// consumer (stream_consume.go) over the queue's log: it reads every
// record the log holds from x-stream-offset on (first, last, next, an
// offset, a timestamp, an interval: StreamOffsetSpec), in log order,
// settled or not, and follows the tail. Each delivery is the queue's
// record as an ordinary consumer would get it, with redelivered=false
// and an x-stream-offset header (long): a message that was requeued and
// delivered again appears once, at its log position.
//
// It is checked as a stream consumer is (rabbit_stream_queue:consume):
// it needs a prefetch count, which is its credit (a delivery takes one,
// any ack, nack or reject gives one back), manual acks, and no global
// qos; x-priority is refused. A queue without history refuses it with a
// 406. It leaves the queue alone: it is not one of the queue's consumers
// (not in consumer_count, not served by the dispatcher, no effect on
// single active consumer, auto-delete or x-expires), and its acks settle,
// requeue or dead-letter nothing. The queue counts it among its history
// readers (classic.HistoryStats.Readers). x-stream-filter is ignored: a
// queue log's chunk filters mark transient and expiring messages, not
// application filter values. AMQP 1.0 receivers get one through the
// rabbitmq:stream-offset-spec source filter (package amqp1), with
// link credit (ConsumerOptions.Credited) instead of a prefetch.

// consumeHistory checks a history reader of q and starts it.
func (b *Broker) consumeHistory(q *Queue, o ConsumerOptions, args map[string]any) (*StreamConsumer, error) {
	def := q.Def()
	res := "history of " + rs("queue", def.Name, def.VHost)
	if err := q.CheckOwner(o.Owner); err != nil {
		return nil, err
	}
	if !q.HistoryEnabled() {
		return nil, classic.ErrNoHistory(def.VHost, def.Name)
	}
	spec, start, err := StreamOffsetSpec(args, res, time.Now())
	if err != nil {
		return nil, err
	}
	if _, ok := args["x-priority"]; ok {
		return nil, Errorf(CodePreconditionFailed, "invalid arg 'x-priority' for %s", res)
	}
	switch {
	case o.Prefetch == 0 && !o.Credited:
		return nil, Errorf(CodePreconditionFailed, "consumer prefetch count is not set for %s", res)
	case o.NoAck:
		return nil, Errorf(CodeNotImplemented, "automatic acknowledgement not supported by %s", res)
	case o.Channel != nil && o.Channel.Limit > 0:
		return nil, Errorf(CodeNotImplemented, "%s does not support global qos", res)
	case o.Sink == nil:
		return nil, Errorf(CodeInternalError, "consumer without a sink")
	}
	r, err := q.HistoryReader(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &StreamConsumer{
		tag: o.Tag, vhost: def.VHost, stream: def.Name, sink: o.Sink, log: b.log, r: r, start: start, hq: q,
		cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	sc.credit.n = o.Prefetch
	if o.Credited {
		sc.credited, sc.credit.n = true, max(o.Credit, 0)
	}
	q.AddHistoryReaders(1)
	labels := pprof.Labels("history-reader", def.Name, "tag", o.Tag)
	go pprof.Do(ctx, labels, sc.run)
	return sc, nil
}
