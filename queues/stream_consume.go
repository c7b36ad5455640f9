package queues

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/classic"
	"github.com/warren-mq/warren/segment"
)

// A stream consumed as a queue, as rabbit_stream_queue serves AMQP
// consumers: the consumer reads the stream from where x-stream-offset
// says, non-destructively. Its prefetch count is message credit: a
// delivery takes one, and any settle (ack, requeue, discard) gives one
// back; nothing is removed or redelivered. x-stream-filter selects chunks
// by their Bloom filter only; as RabbitMQ does for AMQP consumers,
// messages are not filtered one by one (applications check the filter
// value themselves). A consumer with ConsumerOptions.Match (an AMQP 1.0
// receiver's property filter expressions) gets only the records it
// accepts, and the others take no credit. Compressed sub-batches, which only stream protocol
// clients can publish, are skipped, as RabbitMQ skips them.
//
// One goroutine per consumer reads the stream and hands the Sink one
// record at a time: a Delivery whose Stream is the consumer, whose ID is
// the record's offset and whose Body is the record (an AMQP 1.0 message;
// the front end converts it). It waits for credit and for new chunks, and
// ends when the consumer is stopped or the stream goes (then the Sink is
// told Cancelled).

// StreamConsumer is a consumer of a stream. Its Ack, Requeue and Discard
// give credit back, one per delivery settled.
type StreamConsumer struct {
	// Static after start.
	tag    string
	vhost  string
	stream string
	sink   Sink
	log    *slog.Logger
	r      *osiris.Reader
	start  uint64 // records below this offset are skipped
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine ends

	// hq is set for a history reader of a classic or quorum queue
	// (history_consume.go): records are queue records, decoded by dec.
	hq *Queue

	credited bool                     // ConsumerOptions.Credited: settling gives no credit back
	match    func(record []byte) bool // ConsumerOptions.Match; nil: every record
	credit   struct {
		sync.Mutex
		n int
	}
	wake chan struct{} // cap 1: credit was given; never closed

	// Owned by the goroutine.
	data    []byte
	scratch []byte
	d       Delivery
	dec     classic.HistoryDecoder // for hq
}

var _ Settler = (*StreamConsumer)(nil)

// A Subscription is a consumer of any queue type, as Broker.Consume
// returns it.
type Subscription interface {
	// Stop ends the consumer. For a stream it waits for the reading
	// goroutine, which calls the Sink: the caller must not hold a lock
	// the Sink takes.
	Stop()
}

// A CreditedSubscription is a Subscription made with
// ConsumerOptions.Credited (an AMQP 1.0 receiving link): deliveries take
// credit, and the front end sets it from the receiver's flow.
type CreditedSubscription interface {
	Subscription
	// SetCredit sets the deliveries the consumer may still get.
	SetCredit(n int)
	// DrainCredit uses the credit up as an AMQP 1.0 drain asks and
	// returns what was left unused. It may wait for the queue's
	// dispatcher: never call it from the Sink.
	DrainCredit() int
}

var (
	_ CreditedSubscription = (*StreamConsumer)(nil)
	_ CreditedSubscription = (*classic.Consumer)(nil)
)

// Consume attaches a consumer to queue name of any type (classic, quorum
// or stream), with the consumer arguments args, checked as RabbitMQ's
// queue type of that queue checks them. A missing queue is 404.
func (b *Broker) Consume(vhost, name string, o ConsumerOptions, args map[string]any) (Subscription, error) {
	q, err := b.Queue(vhost, name)
	if err != nil {
		if s, ok := b.LookupStream(vhost, name); ok {
			return b.consumeStream(vhost, name, s, o, args)
		}
		if rec, ok := b.queueReg().placement(vhost, name); ok && rec.Leader != b.opts.NodeName {
			return b.consumeRemote(vhost, name, rec, o, args) // proxy.go
		}
		return nil, err
	}
	return b.consumeQueue(q, o, args)
}

// consumeQueue starts a consumer of a classic or quorum queue this node
// runs.
func (b *Broker) consumeQueue(q *Queue, o ConsumerOptions, args map[string]any) (Subscription, error) {
	vhost, name := q.Def().VHost, q.Def().Name
	if _, ok := args["x-stream-offset"]; ok {
		return b.consumeHistory(q, o, args) // history_consume.go
	}
	prio, err := ConsumerPriority(q, args)
	if err != nil {
		return nil, err
	}
	if q.Quorum() && o.Channel != nil && o.Channel.Limit != 0 {
		// RabbitMQ ≤4.2: a quorum queue refuses a channel with an active
		// global qos (rabbit_quorum_queue:consume, limiter_active).
		return nil, Errorf(CodeNotImplemented, "queue '%s' in vhost '%s' does not support global qos", name, vhost)
	}
	o.Priority = prio
	c, err := q.Consume(o)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// consumeStream checks the consumer as rabbit_stream_queue:consume does,
// in its order, and starts it.
func (b *Broker) consumeStream(vhost, name string, s *osiris.Stream, o ConsumerOptions, args map[string]any) (*StreamConsumer, error) {
	res := rs("queue", name, vhost)
	spec, start, err := StreamOffsetSpec(args, res, time.Now())
	if err != nil {
		return nil, err
	}
	for _, k := range [...]string{"x-priority", "x-consumer-timeout"} {
		if _, ok := args[k]; ok {
			return nil, Errorf(CodePreconditionFailed, "invalid arg '%s' for %s of queue type rabbit_stream_queue", k, res)
		}
	}
	switch {
	case o.Prefetch == 0 && !o.Credited:
		return nil, Errorf(CodePreconditionFailed, "consumer prefetch count is not set for stream %s", res)
	case o.NoAck:
		return nil, Errorf(CodeNotImplemented, "automatic acknowledgement not supported by stream %s", res)
	case o.Channel != nil && o.Channel.Limit > 0:
		return nil, Errorf(CodeNotImplemented, "%s does not support global qos", res)
	case o.Sink == nil:
		return nil, Errorf(CodeInternalError, "consumer without a sink")
	}
	// Read-ahead: a consumer reads every chunk's data, so a run of small
	// chunks is one pread rather than two per chunk.
	r, err := s.NewReader(spec, osiris.ReaderOptions{Filter: StreamFilter(args), ReadAhead: true})
	if err != nil {
		return nil, Errorf(CodePreconditionFailed, "failed consuming from stream %s: %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &StreamConsumer{
		tag: o.Tag, vhost: vhost, stream: name, sink: o.Sink, log: b.log, r: r, start: start,
		cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1), match: o.Match,
	}
	sc.credit.n = o.Prefetch
	if o.Credited {
		sc.credited, sc.credit.n = true, max(o.Credit, 0)
	}
	labels := pprof.Labels("stream-consumer", name, "tag", o.Tag)
	go pprof.Do(ctx, labels, sc.run)
	return sc, nil
}

// StreamOffsetSpec reads x-stream-offset as rabbit_stream_queue:
// parse_offset_arg does: absent is next; "first", "last", "next"; an
// integer is an offset (records before it in its chunk are skipped, so
// it is also returned as the start); a timestamp (seconds) is a time; any
// other string is an interval back from now ("1h", "30m", "7D"; units Y M
// D h m s). res names the queue in the 406 error.
func StreamOffsetSpec(args map[string]any, res string, now time.Time) (osiris.OffsetSpec, uint64, error) {
	v, ok := args["x-stream-offset"]
	if !ok {
		return osiris.Next(), 0, nil
	}
	invalid := func(typ, val string) error {
		return Errorf(CodePreconditionFailed, "invalid arg 'x-stream-offset' for %s: {invalid_stream_offset_arg,{%s,%s}}", res, typ, val)
	}
	if b, ok := v.([]byte); ok {
		switch string(b) { // parse_offset_arg({_, <<"first">>}) takes any type
		case "first", "last", "next":
			v = string(b)
		}
	}
	switch x := v.(type) {
	case string:
		switch x {
		case "first":
			return osiris.First(), 0, nil
		case "last":
			return osiris.Last(), 0, nil
		case "next":
			return osiris.Next(), 0, nil
		}
		d, err := ParseMaxAge(x)
		if err != nil || !allDigits(x[:len(x)-1]) {
			return osiris.OffsetSpec{}, 0, invalid("longstr", fmt.Sprintf("<<%q>>", x))
		}
		return osiris.AtTimestamp(now.Add(-d).UnixMilli()), 0, nil
	case time.Time:
		return osiris.AtTimestamp(x.Unix() * 1000), 0, nil
	case int8, uint8, int16, uint16, int32, uint32, int64:
		n, _ := argInt(x)
		if n < 0 {
			n = 0
		}
		return osiris.AtOffset(uint64(n)), uint64(n), nil
	}
	return osiris.OffsetSpec{}, 0, invalid(fieldType(v), fmt.Sprint(v))
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// StreamFilter reads x-stream-filter (a string or an array of strings)
// and x-stream-match-unfiltered (a boolean, with a filter only) as
// rabbit_stream_queue:filter_spec does; nil when there is no filter.
func StreamFilter(args map[string]any) *segment.Matcher {
	var values [][]byte
	switch f := args["x-stream-filter"].(type) {
	case string:
		values = [][]byte{[]byte(f)}
	case []any:
		values = [][]byte{}
		for _, e := range f {
			if s, ok := e.(string); ok {
				values = append(values, []byte(s))
			}
		}
	default:
		return nil
	}
	unfiltered, _ := args["x-stream-match-unfiltered"].(bool)
	return segment.NewMatcher(values, unfiltered)
}

// Stop ends the consumer and waits for its goroutine.
func (sc *StreamConsumer) Stop() {
	sc.cancel()
	<-sc.done
}

// Ack gives one credit back per delivery (none to a credited consumer).
func (sc *StreamConsumer) Ack(ids ...uint64) { sc.grant(len(ids)) }

// Requeue gives credit back: a stream does not redeliver.
func (sc *StreamConsumer) Requeue(ids ...uint64) { sc.grant(len(ids)) }

// Release gives credit back, as Requeue.
func (sc *StreamConsumer) Release(ids ...uint64) { sc.grant(len(ids)) }

// Discard gives credit back: a stream removes nothing.
func (sc *StreamConsumer) Discard(ids ...uint64) { sc.grant(len(ids)) }

// SetCredit sets a credited consumer's credit to n (an AMQP 1.0 flow's
// link-credit).
func (sc *StreamConsumer) SetCredit(n int) {
	sc.credit.Lock()
	sc.credit.n = max(n, 0)
	sc.credit.Unlock()
	sc.wakeUp()
}

// DrainCredit sets the credit to 0 and returns what was left: a stream
// consumer's records come as its reader reaches them, so what is not
// already on its way is not waited for.
func (sc *StreamConsumer) DrainCredit() int {
	sc.credit.Lock()
	defer sc.credit.Unlock()
	left := sc.credit.n
	sc.credit.n = 0
	return left
}

// grant gives n credits back.
func (sc *StreamConsumer) grant(n int) {
	if sc.credited {
		return
	}
	sc.credit.Lock()
	sc.credit.n += n
	sc.credit.Unlock()
	sc.wakeUp()
}

func (sc *StreamConsumer) wakeUp() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// take takes one credit, waiting for one; false when the consumer ends.
func (sc *StreamConsumer) take(ctx context.Context) bool {
	for {
		sc.credit.Lock()
		if sc.credit.n > 0 {
			sc.credit.n--
			sc.credit.Unlock()
			return true
		}
		sc.credit.Unlock()
		select {
		case <-sc.wake:
		case <-ctx.Done():
			return false
		}
	}
}

// run reads chunks and delivers their records.
func (sc *StreamConsumer) run(ctx context.Context) {
	defer close(sc.done)
	defer sc.r.Close()
	if sc.hq != nil {
		defer sc.hq.AddHistoryReaders(-1)
		sc.dec.Init(sc.hq)
		defer sc.dec.Close()
	}
	for {
		c, err := sc.r.Next(ctx)
		if err != nil {
			sc.ended(ctx, err)
			return
		}
		if sc.data, err = c.ReadData(sc.data); err != nil {
			sc.ended(ctx, err)
			return
		}
		// The chunk's data is in sc.data: let the segment go while this
		// consumer waits for credit.
		sc.r.Park()
		first := c.Header.ChunkID
		stopped := false
		sc.scratch, err = segment.Walk(sc.data, sc.scratch, true, func(rec []byte, i uint64) bool {
			if first+i < sc.start {
				return true
			}
			if sc.match != nil && !sc.match(rec) {
				return true // filtered out: no credit taken
			}
			sc.d = Delivery{Stream: sc, ConsumerTag: sc.tag, ID: first + i, RoutingKey: sc.stream, Body: rec}
			if sc.hq != nil {
				if err := sc.dec.Fill(&sc.d, rec, first+i); err != nil {
					sc.log.Warn("history reader: unreadable record skipped", "queue", sc.stream, "offset", first+i, "err", err)
					return true
				}
			}
			if !sc.take(ctx) {
				stopped = true
				return false
			}
			sc.sink.Deliver(&sc.d)
			return true
		})
		if stopped {
			return
		}
		if err != nil {
			sc.log.Warn("stream consumer: bad entry, rest of the chunk skipped", "stream", sc.stream, "chunk", first, "err", err)
		}
	}
}

// ended handles the end of reading: nothing when the consumer was
// stopped; otherwise (the stream was deleted, or reading failed) the Sink
// is told the consumer is cancelled, as for a deleted queue.
func (sc *StreamConsumer) ended(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	if !errors.Is(err, osiris.ErrClosed) {
		sc.log.Warn("stream consumer: read failed", "stream", sc.stream, "err", err)
	}
	sc.sink.Cancelled(nil, sc.tag)
}
