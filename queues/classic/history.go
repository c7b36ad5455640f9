package classic

import (
	"errors"
	"fmt"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/qerr"
)

// Queue history: a classic or quorum queue may keep its settled
// messages in its log, readable like a stream.
//
// A queue keeps its history when x-history-max-age or
// x-history-max-length-bytes (or the policy keys history-max-age,
// history-max-length-bytes; config.go) is set. Without them the sweep
// deletes every sealed segment wholly below the head, as it always did.
// With them it deletes a sealed segment only when it is wholly below the
// head AND outside the history limits, which are stream retention's
// (osiris.Stream.RetentionFloor): older than max-age by its newest
// chunk's timestamp, or beyond max-length-bytes counted from the tail
// (the whole log, unsettled messages included). Nothing else changes:
// the ack state, recovery and the hot paths are the same, and the
// history is the log itself, so there is nothing beside it to persist,
// recover or replicate: after a crash the log holds at least what the
// limits keep, less what an unsynced tail loses, and recovery starts
// from the head as before (segments below it are settled by
// construction).
//
// The sweep runs when the ack state changes (as before), when a publish
// lands on a queue with history (the log grew: the bytes limit may let
// old segments go), and, while settled segments wait only for their age,
// every historySweepInterval.
//
// A history reader (package queues: basic.consume with x-stream-offset)
// reads the log through its own osiris reader from HistoryReader: every
// record the log holds from its start, in log order, settled or not; it
// takes nothing from the queue's state. HistoryDecoder turns a record
// into a Delivery with an x-stream-offset header.

// hdrStreamOffset is the header a history delivery carries: its offset
// in the queue's log, as a stream queue's deliveries carry theirs.
const hdrStreamOffset = "x-stream-offset"

// historySweepInterval is how often the sweep looks at settled segments
// that wait for their age: a tenth of max-age, between one and ten
// seconds.
func historySweepInterval(maxAge time.Duration) time.Duration {
	return min(max(maxAge/10, time.Second), 10*time.Second)
}

// historyCut returns the offset the sweep truncates below for a queue
// with history: the head, or the history's floor when that is lower.
func (q *Queue) historyCut(cfg *queueConfig, head uint64) (uint64, error) {
	floor, err := q.log.RetentionFloor(cfg.histBytes, cfg.histAge)
	if err != nil {
		return 0, fmt.Errorf("history limits of %s: %w", qerr.Resource("queue", q.def.Name, q.def.VHost), err)
	}
	return min(head, floor), nil
}

// HistoryEnabled reports whether the queue keeps its settled history.
func (q *Queue) HistoryEnabled() bool { return q.config().history() }

// ErrNoHistory is the 406 of a history reader on a queue without
// history.
func ErrNoHistory(vhost, name string) *qerr.Error {
	return qerr.Errorf(qerr.CodePreconditionFailed,
		"%s keeps no history: x-stream-offset needs x-history-max-age or x-history-max-length-bytes (or a policy with history-max-age or history-max-length-bytes)",
		qerr.Resource("queue", name, vhost))
}

// HistoryReader returns a reader of the queue's log from spec for a
// history reader (406 when the queue keeps no history, 404 once it is
// deleted). The caller closes it. The queue's state is not touched.
func (q *Queue) HistoryReader(spec osiris.OffsetSpec) (*osiris.Reader, error) {
	if !q.HistoryEnabled() {
		return nil, ErrNoHistory(q.def.VHost, q.def.Name)
	}
	q.mu.Lock()
	closed := q.mu.closed
	q.mu.Unlock()
	if closed {
		return nil, q.errGone()
	}
	r, err := q.log.NewReader(spec, osiris.ReaderOptions{})
	if errors.Is(err, osiris.ErrClosed) {
		return nil, q.errGone()
	}
	return r, err
}

// AddHistoryReaders counts n more (or fewer) history readers of the
// queue, for HistoryStats.
func (q *Queue) AddHistoryReaders(n int) { q.histReaders.Add(int64(n)) }

// HistoryStats describe a queue's history: what its log holds now.
type HistoryStats struct {
	MaxAge   time.Duration // x-history-max-age in effect; 0: none
	MaxBytes int64         // x-history-max-length-bytes in effect; 0: none
	// Messages are the records the log holds, FirstOffset to
	// LastOffset: the settled history and the messages still in the
	// queue. Bytes are its segment files' sizes.
	Messages    uint64
	Bytes       int64
	FirstOffset uint64
	LastOffset  uint64 // valid when Messages > 0
	// FirstTimestamp is the oldest chunk's timestamp (Unix ms; 0 when
	// empty).
	FirstTimestamp int64
	Segments       int
	Readers        int // history readers attached
}

// History returns the queue's history now; false when it keeps none.
func (q *Queue) History() (HistoryStats, bool) {
	c := q.config()
	if !c.history() {
		return HistoryStats{}, false
	}
	st := q.log.Stats()
	h := HistoryStats{
		MaxAge: c.histAge, MaxBytes: c.histBytes, Bytes: st.Bytes, FirstOffset: st.FirstOffset,
		FirstTimestamp: st.FirstTimestamp, Segments: st.Segments, Readers: int(q.histReaders.Load()),
	}
	if st.NextOffset > st.FirstOffset {
		h.Messages, h.LastOffset = st.NextOffset-st.FirstOffset, st.NextOffset-1
	}
	return h, true
}

// HistoryDecoder makes history deliveries of queue log records. One per
// reader; not safe for concurrent use.
type HistoryDecoder struct {
	body  bodyReader // resolves reference records; Init sets its queue
	strs  strCaches
	props []byte // the last delivery's properties
	table []byte // scratch: their headers table
}

// Init makes h decode the records of q's log: a reference record
// (fan-out by reference) is read from q's vhost's body log.
func (h *HistoryDecoder) Init(q *Queue) { h.body.q = q }

// Close releases h's reader of the body log, if it has one.
func (h *HistoryDecoder) Close() { h.body.cr.close() }

// Fill sets d's message from rec, the record at offset in a queue's log
// (a segment entry's data): exchange, routing key, body, and the
// properties with an x-stream-offset header (long) set to offset. d's
// slices are valid until the next Fill. A record that does not parse is
// an error (the reader skips it, as the queue drops it).
func (h *HistoryDecoder) Fill(d *Delivery, rec []byte, offset uint64) error {
	if isRef(rec) {
		if h.body.q == nil {
			return fmt.Errorf("offset %d: a reference record, and no queue to resolve it: %w", offset, errBadRecord)
		}
		var err error
		if rec, err = h.body.resolve(rec); err != nil {
			return err
		}
	}
	r, err := parseRecord(rec)
	if err != nil {
		return err
	}
	if string(r.exchange) != h.strs.exchange {
		h.strs.exchange = string(r.exchange)
	}
	if string(r.routingKey) != h.strs.routingKey {
		h.strs.routingKey = string(r.routingKey)
	}
	if err := h.setOffset(r.props, offset); err != nil {
		return fmt.Errorf("offset %d: properties: %w", offset, err)
	}
	props := h.props
	d.ID, d.History = offset, true
	d.Exchange, d.RoutingKey, d.Props, d.Body = h.strs.exchange, h.strs.routingKey, props, r.body
	d.AMQP10Props = r.props10
	return nil
}

// setOffset sets h.props to props with the x-stream-offset header (long)
// set to offset: the publisher's headers in their order, without one of
// that name, then x-stream-offset. It reuses h's buffers: no allocation
// once they have grown.
func (h *HistoryDecoder) setOffset(props []byte, offset uint64) error {
	pv, err := amqptab.ScanProps(props)
	if err != nil {
		return err
	}
	table, start := amqptab.Begin(h.table[:0])
	if hdrs := pv.Value(props, amqptab.FlagHeaders); hdrs != nil {
		if err := amqptab.ScanTable(hdrs, func(k []byte, tag byte, v []byte) error {
			if string(k) != hdrStreamOffset {
				table = amqptab.AppendRaw(append(append(table, byte(len(k))), k...), tag, v)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	table = amqptab.AppendLong(amqptab.AppendKey(table, hdrStreamOffset), int64(offset))
	h.table = amqptab.End(table, start)
	h.props = amqptab.AppendProps(h.props[:0], props, &pv, 0, h.table)
	return nil
}
