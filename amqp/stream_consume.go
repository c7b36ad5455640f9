package amqp

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/segment"
)

// basic.consume on a stream, as rabbit_stream_queue serves AMQP 0-9-1
// consumers: the consumer reads the stream from where x-stream-offset
// says, non-destructively. Its prefetch count is message credit: a
// delivery takes one, and any settle (ack, nack, reject, with or without
// requeue, recover) gives one back; nothing is removed or redelivered.
// Deliveries carry the record's offset in the x-stream-offset header.
// x-stream-filter selects chunks by their Bloom filter only; as RabbitMQ
// does for AMQP 0-9-1 consumers, messages are not filtered one by one
// (applications check x-stream-filter-value themselves).
//
// One goroutine per consumer reads the stream and delivers; it waits for
// credit, for new chunks and for the connection's output queue, and ends
// when the consumer is cancelled, its channel closes or the stream goes.

// streamConsumer is a consumer of a stream.
type streamConsumer struct {
	// Static after start.
	cs     *consumer
	stream string // the stream's name, the routing key of records without x-routing-key
	r      *osiris.Reader
	start  uint64 // records below this offset are skipped
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine ends

	credit struct {
		sync.Mutex
		n int
	}
	wake chan struct{} // cap 1: credit was given; never closed

	// Owned by the goroutine.
	data    []byte
	props   []byte
	deliver wire.BasicDeliver
}

// consumeStream is basic.consume on the stream s named name: the
// consumer arguments and RabbitMQ's requirements (a prefetch count,
// manual acks, no global qos), then the reader and its goroutine.
func (ch *channel) consumeStream(m *wire.BasicConsume, name string, s *osiris.Stream) error {
	res := fmt.Sprintf("queue '%s' in vhost '%s'", name, ch.c.vhost)
	tag := m.ConsumerTag
	if tag == "" {
		tag = randomName("amq.ctag-")
	}
	ch.mu.Lock()
	_, dup := ch.mu.consumers[tag]
	ch.mu.Unlock()
	if dup {
		return newError(wire.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	spec, start, err := streamOffsetSpec(m.Arguments, res, time.Now())
	if err != nil {
		return err
	}
	for _, k := range [...]string{"x-priority", "x-consumer-timeout"} {
		if _, ok := m.Arguments[k]; ok {
			return newError(wire.PreconditionFailed, "invalid arg '%s' for %s of queue type rabbit_stream_queue", k, res)
		}
	}
	// rabbit_stream_queue:consume, in its order.
	switch {
	case ch.prefetch == 0:
		return newError(wire.PreconditionFailed, "consumer prefetch count is not set for stream %s", res)
	case m.NoAck:
		return newError(wire.NotImplemented, "automatic acknowledgement not supported by stream %s", res)
	case ch.limit.Limit > 0:
		return newError(wire.NotImplemented, "%s does not support global qos", res)
	}
	r, err := s.NewReader(spec, osiris.ReaderOptions{Filter: streamFilter(m.Arguments)})
	if err != nil {
		return newError(wire.PreconditionFailed, "failed consuming from stream %s: %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &streamConsumer{stream: name, r: r, start: start, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	sc.credit.n = ch.prefetch
	sc.cs = &consumer{ch: ch, tag: tag, stream: sc}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.mu.closed {
		cancel()
		r.Close()
		return nil
	}
	ch.mu.consumers[tag] = sc.cs
	if !m.NoWait {
		// Queued under ch.mu: the first delivery, which takes ch.mu,
		// follows it.
		ch.c.send(ch.id, &wire.BasicConsumeOk{ConsumerTag: tag})
	}
	labels := pprof.Labels("amqp-stream-consumer", name, "tag", tag)
	go pprof.Do(ctx, labels, sc.run)
	return nil
}

// streamOffsetSpec reads x-stream-offset as rabbit_stream_queue:
// parse_offset_arg does: absent is next; "first", "last", "next"; an
// integer is an offset (records before it in its chunk are skipped); a
// timestamp (seconds) is a time; any other string is an interval back
// from now ("1h", "30m", "7D"; units Y M D h m s).
func streamOffsetSpec(args wire.Table, res string, now time.Time) (osiris.OffsetSpec, uint64, error) {
	v, ok := args["x-stream-offset"]
	if !ok {
		return osiris.Next(), 0, nil
	}
	invalid := func(typ, val string) error {
		return newError(wire.PreconditionFailed, "invalid arg 'x-stream-offset' for %s: {invalid_stream_offset_arg,{%s,%s}}", res, typ, val)
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
		d, err := queues.ParseMaxAge(x)
		if err != nil || !allDigits(x[:len(x)-1]) {
			return osiris.OffsetSpec{}, 0, invalid("longstr", fmt.Sprintf("<<%q>>", x))
		}
		return osiris.AtTimestamp(now.Add(-d).UnixMilli()), 0, nil
	case time.Time:
		return osiris.AtTimestamp(x.Unix() * 1000), 0, nil
	case int8, uint8, int16, uint16, int32, uint32, int64:
		n := toInt64(x)
		if n < 0 {
			n = 0
		}
		return osiris.AtOffset(uint64(n)), uint64(n), nil
	}
	return osiris.OffsetSpec{}, 0, invalid(typeName(v), fmt.Sprint(v))
}

func allDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case uint8:
		return int64(x)
	case int16:
		return int64(x)
	case uint16:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

// streamFilter reads x-stream-filter (a string or an array of strings)
// and x-stream-match-unfiltered (a boolean, with a filter only) as
// rabbit_stream_queue:filter_spec does; nil when there is no filter.
func streamFilter(args wire.Table) *segment.Matcher {
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

// stop ends the consumer and waits for its goroutine. The caller must not
// hold ch.mu (the goroutine takes it to deliver).
func (sc *streamConsumer) stop() {
	sc.cancel()
	<-sc.done
}

// grant gives n credits back (n settled deliveries).
func (sc *streamConsumer) grant(n int) {
	sc.credit.Lock()
	sc.credit.n += n
	sc.credit.Unlock()
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// take takes one credit, waiting for one; false when the consumer ends.
func (sc *streamConsumer) take(ctx context.Context) bool {
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

// run reads chunks and delivers their records: simple entries and
// uncompressed sub-batches record by record; compressed sub-batches are
// skipped, as RabbitMQ skips them for AMQP consumers (stream protocol
// clients only).
func (sc *streamConsumer) run(ctx context.Context) {
	defer close(sc.done)
	defer sc.r.Close()
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
		off := c.Header.ChunkID
		data := sc.data
		for len(data) > 0 {
			e, rest, err := segment.ParseEntry(data)
			if err != nil {
				sc.cs.ch.c.log.Warn("stream consumer: bad entry, chunk skipped", "stream", sc.stream, "chunk", c.Header.ChunkID, "err", err)
				break
			}
			data = rest
			switch {
			case !e.SubBatch:
				if !sc.record(ctx, e.Data, off) {
					return
				}
			case e.Compression == segment.CompressionNone:
				recs := e.Data
				for i := uint32(0); i < e.Records; i++ {
					rec, more, ok := splitRecord(recs)
					if !ok {
						break
					}
					recs = more
					if !sc.record(ctx, rec, off+uint64(i)) {
						return
					}
				}
			}
			off += uint64(e.Records)
		}
	}
}

// splitRecord splits the first u32-size-prefixed record of a sub-batch.
func splitRecord(b []byte) (rec, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	if n > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// record delivers one record when it is at or after the start, once the
// consumer has credit; false when the consumer ends.
func (sc *streamConsumer) record(ctx context.Context, rec []byte, off uint64) bool {
	if off < sc.start {
		return true
	}
	if !sc.take(ctx) {
		return false
	}
	d := convertStreamRecord(rec, off, sc.stream, sc.props)
	sc.props = d.props[:0]
	return sc.send(&d)
}

// send sends one delivery; false when the consumer is no longer the
// channel's (cancelled or closed).
func (sc *streamConsumer) send(d *streamDelivery) bool {
	ch := sc.cs.ch
	ch.c.out.waitRoom()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.mu.closed || ch.mu.consumers[sc.cs.tag] != sc.cs {
		return false
	}
	ch.mu.nextTag++
	tag := ch.mu.nextTag
	ch.mu.unacked = append(ch.mu.unacked, pendingAck{tag: tag, sc: sc, at: monoNow()})
	sc.deliver = wire.BasicDeliver{ConsumerTag: sc.cs.tag, DeliveryTag: tag, Exchange: d.exchange, RoutingKey: d.key}
	frameMax := ch.c.frameMax
	ch.c.out.frames(func(b []byte) []byte {
		b = wire.AppendMethodFrame(b, ch.id, &sc.deliver)
		b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(d.body)), d.props)
		return wire.AppendBodyFrames(b, ch.id, d.body, frameMax)
	})
	return true
}

// ended handles the end of reading: nothing when the consumer was
// stopped; otherwise (the stream was deleted, or reading failed) the
// consumer is cancelled, and the client hears basic.cancel if it said it
// understands it, as for a deleted queue.
func (sc *streamConsumer) ended(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	ch := sc.cs.ch
	if !errors.Is(err, osiris.ErrClosed) {
		ch.c.log.Warn("stream consumer: read failed", "stream", sc.stream, "err", err)
	}
	ch.mu.Lock()
	if ch.mu.consumers[sc.cs.tag] != sc.cs {
		ch.mu.Unlock()
		return
	}
	delete(ch.mu.consumers, sc.cs.tag)
	ch.notifyCancelledLocked(sc.cs.tag)
	ch.mu.Unlock()
}

// settleStream gives the credit of settled stream deliveries back to
// their consumers and returns the other deliveries, for their queues.
func settleStream(acks []pendingAck) []pendingAck {
	n := 0
	for _, a := range acks {
		if a.sc != nil {
			n++
		}
	}
	if n == 0 {
		return acks
	}
	rest := make([]pendingAck, 0, len(acks)-n)
	var last *streamConsumer
	run := 0
	for _, a := range acks {
		switch {
		case a.sc == nil:
			rest = append(rest, a)
		case a.sc == last:
			run++
		default:
			if last != nil {
				last.grant(run)
			}
			last, run = a.sc, 1
		}
	}
	if last != nil {
		last.grant(run)
	}
	return rest
}

// stop ends the consumer at its queue or stream.
func (cs *consumer) stop() {
	if cs.reply != nil {
		cs.stopReply()
		return
	}
	if cs.stream != nil {
		cs.stream.stop()
		return
	}
	cs.q.Cancel(cs.qc)
}
