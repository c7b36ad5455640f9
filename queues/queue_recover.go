package queues

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

// A durable queue's persisted state, besides its log, is its ack state in
// the catalog under qa/<id>:
//
//	+------------+------------------------+-----------------------------+
//	| version u8 | delivered mark uvarint | settled ranges (rangeSet)   |
//	+------------+------------------------+-----------------------------+
//
// The settled ranges are those of rangeSet.appendTo. The delivered mark is
// the offset after the highest message ever delivered.
//
// It is written (without sync) at most every persistInterval while it
// changes, and with sync when the queue closes. After a crash, what was
// settled after the last write is not settled any more: those messages,
// and the delivered-but-unacked ones, are delivered again (at least once,
// never lost). Messages below the delivered mark come back with
// Redelivered set: they may have been delivered before.
//
// Recovery (recover) reads the ack state, then scans the log from the
// head: transient messages (delivery mode 1) written before the restart
// are settled, as RabbitMQ drops them, and the ready messages are
// rebuilt. The scan reads the header of every chunk from the head on, and
// the data only of chunks that hold a transient message or one with an
// expiration property (they carry a Bloom filter; see queue_record.go) —
// or of every chunk for a priority queue or one with x-max-length-bytes,
// which need each message's priority or size. A backlog of plain
// persistent messages costs one small read per chunk.
//
// What recovery restores exactly and what approximately:
//
//   - Exact: which messages are ready (at least once: acks since the last
//     persist come back), their order and priorities, their per-message
//     TTLs and their sizes where they were read, the dead-letter state
//     (the x-death history is in the records; a message being
//     dead-lettered at the crash is dead-lettered again).
//   - Approximate: a message's enqueue instant is its chunk's timestamp
//     (the log writer's clock when the write began, within a group commit
//     of the publish), and the queue TTL applied to recovered messages is
//     the one in effect now, not the one at their enqueue (a policy may
//     have changed it). Messages past their expiry are dead-lettered as
//     expired when the queue starts. Delivery counts are not kept:
//     messages below the delivered mark come back redelivered. The
//     sizes of messages not read (plain persistent chunks of a queue
//     without a bytes limit) are unknown: they do not count toward a
//     bytes limit a policy sets later. Requeued messages come back in
//     id order with the fresh ones, as RabbitMQ's classic queues do.

// ackStateVersion is the format version of the persisted ack state; part of
// the on-disk format.
const ackStateVersion = 1

// encodeAckStateLocked appends the persisted ack state to dst.
// REQUIRES: q.mu held.
func (q *Queue) encodeAckStateLocked(dst []byte) []byte {
	dst = append(dst, ackStateVersion)
	dst = binary.AppendUvarint(dst, q.mu.deliveredMark)
	return q.mu.settled.appendTo(dst)
}

func decodeAckState(b []byte) (mark uint64, set rangeSet, err error) {
	if len(b) == 0 || b[0] != ackStateVersion {
		return 0, set, fmt.Errorf("queues: ack state: unknown version")
	}
	mark, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return 0, set, fmt.Errorf("queues: ack state: bad delivered mark")
	}
	rest, err := set.readFrom(b[1+n:])
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("queues: ack state: %d trailing bytes", len(rest))
	}
	return mark, set, err
}

// writeAckState persists the ack state if it changed (always when final).
func (q *Queue) writeAckState(final bool) error {
	q.mu.Lock()
	if !q.mu.dirty && !final {
		q.mu.Unlock()
		return nil
	}
	val := q.encodeAckStateLocked(nil)
	q.mu.dirty = false
	q.mu.Unlock()
	opts := pebble.NoSync
	if final {
		opts = pebble.Sync
	}
	if err := q.b.cat.db.Set(ackKey(q.def.ID), val, opts); err != nil {
		q.mu.Lock()
		q.markDirtyLocked() // try again later
		q.mu.Unlock()
		return fmt.Errorf("queues: persist ack state of %s: %w", rs("queue", q.def.Name, q.def.VHost), err)
	}
	return nil
}

// persistTick runs on the persist timer.
func (q *Queue) persistTick() {
	if err := q.persist(); err != nil {
		q.b.log.Error("queues: persist", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
	}
}

// persist writes the ack state of a durable queue if it changed, deletes
// the log segments wholly below the head, and closes basic.get's reader
// when no Get used it since the last run.
func (q *Queue) persist() error {
	q.persistMu.Lock()
	defer q.persistMu.Unlock()
	q.mu.Lock()
	if q.mu.persistDone {
		q.mu.Unlock()
		return nil
	}
	q.mu.timerSet = false
	head := q.mu.settled.firstGap(0)
	if !q.def.Durable {
		q.mu.dirty = false
	}
	q.mu.Unlock()

	var errs []error
	if q.def.Durable {
		errs = append(errs, q.writeAckState(false))
	}
	if q.log.CanTruncateBefore(head) {
		if _, err := q.log.TruncateBefore(head); err != nil && !errors.Is(err, osiris.ErrClosed) {
			errs = append(errs, err)
		}
	}

	// Close basic.get's reader once Gets stop.
	again := true // Get busy: look again later
	if q.get.TryLock() {
		again = q.get.used
		q.get.used = false
		if !again {
			q.get.rd.close()
		}
		q.get.Unlock()
	}
	if again {
		q.mu.Lock()
		q.scheduleLocked()
		q.mu.Unlock()
	}
	return errors.Join(errs...)
}

// recover rebuilds the state of a reopened durable queue from its ack
// state and its log. No other goroutine uses the queue yet; its timers
// start, and expired messages go, in start, once every queue is open.
func (q *Queue) recover() error {
	var set rangeSet
	var mark uint64
	val, closer, err := q.b.cat.db.Get(ackKey(q.def.ID))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return err
	default:
		mark, set, err = decodeAckState(val)
		closer.Close()
		if err != nil {
			return err
		}
	}
	st := q.log.Stats()
	end := st.NextOffset
	set.clipAt(end) // defensive: nothing at or past the log's end is settled
	mark = min(mark, end)
	set.addRange(0, st.FirstOffset) // what was truncated
	head := set.firstGap(0)
	cfg := q.config()
	// Read every message when the queue needs their priorities or sizes;
	// otherwise only the chunks with a transient or expiring message.
	readAll := q.maxPrio > 0 || cfg.maxBytes >= 0

	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.settled = set
	if head < end {
		// The scan reads without the lock, but nothing else runs yet.
		r, err := q.log.NewReader(osiris.AtOffset(head), osiris.ReaderOptions{})
		if err != nil {
			return err
		}
		defer r.Close()
		prev := head
		var buf []byte
		var ids []idRange
		var metas []pubMeta
		for {
			c, ok, err := r.TryNext()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			h := c.Header
			if h.NextOffset() <= head {
				continue
			}
			if h.ChunkID > prev {
				q.mu.settled.addRange(prev, h.ChunkID) // tracking chunks between user chunks
			}
			lo, hi := max(h.ChunkID, head), h.NextOffset()
			ids, metas = ids[:0], metas[:0]
			if h.BloomSize == 0 && !readAll {
				// Only persistent messages without a TTL of their own:
				// take them from the header (sizes unknown).
				for x := lo; x < hi; {
					x = q.mu.settled.firstGap(x)
					if x >= hi {
						break
					}
					y := q.mu.settled.nextIn(x, hi)
					ids = append(ids, idRange{x, y})
					x = y
				}
				q.enqueueLocked(ids, nil, h.Timestamp, cfg.ttl)
			} else {
				if buf, err = c.ReadData(buf); err != nil {
					return err
				}
				id := h.ChunkID
				for data := buf; len(data) > 0; id++ {
					e, rest, err := segment.ParseEntry(data)
					if err != nil || e.SubBatch {
						return fmt.Errorf("queues: chunk %d: bad entry: %w", h.ChunkID, segment.ErrCorrupt)
					}
					data = rest
					if id < lo || q.mu.settled.contains(id) {
						continue
					}
					rec, err := parseRecord(e.Data)
					if err != nil {
						q.mu.settled.add(id)
						q.logDropped(id, true, err)
						continue
					}
					if !rec.persistent && !q.Quorum() {
						q.mu.settled.add(id) // transient: gone with the restart (quorum queues keep it)
						continue
					}
					m, err := parseMeta(rec, q.maxPrio)
					if err != nil {
						q.mu.settled.add(id)
						q.logDropped(id, true, err)
						continue
					}
					if n := len(ids); n > 0 && ids[n-1].hi == id {
						ids[n-1].hi++
					} else {
						ids = append(ids, idRange{id, id + 1})
					}
					metas = append(metas, m)
				}
				q.enqueueLocked(ids, metas, h.Timestamp, cfg.ttl)
			}
			prev = hi
		}
		if prev < end {
			q.mu.settled.addRange(prev, end) // trailing tracking chunks
		}
	}
	q.mu.tail = end
	q.mu.deliveredMark = mark
	q.mu.redeliverBelow = mark
	q.markDirtyLocked() // persist the cleaned state; delete settled segments
	return nil
}

// clipAt removes every offset >= x.
func (s *rangeSet) clipAt(x uint64) {
	i := s.find(x) // first range with hi >= x
	if i < len(s.r) && s.r[i].lo < x {
		s.r[i].hi = x
		i++
	}
	s.r = s.r[:i]
}
