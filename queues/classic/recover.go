package classic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/warren-mq/warren/internal/rangeset"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

// The ack state and recovery. The ack state's format, under qa/<id> in
// the catalog or in the log's state for a LogState queue, is the package
// doc's (doc.go). The persister writes it
// with sync at most persistInterval after a change, and the queue writes
// it exactly when it closes (persist.go). After a crash,
// what was settled after the last write is not settled any more: those
// messages, and the delivered-but-unacked ones, are delivered again (at
// least once, never lost). Messages below the delivered mark come back
// with Redelivered set; a quorum queue's come back as requeued messages,
// each with its count (at least 1), delivered first.
//
// Recovery (recover) reads the ack state, then scans the log from the
// head: transient messages (delivery mode 1) written before the restart
// are settled, as RabbitMQ drops them, and the ready messages are
// rebuilt. The scan reads the header of every chunk from the head on, and
// the data only of chunks that hold a transient message or one with an
// expiration property (they carry a Bloom filter; see doc.go) —
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
//     expired when the queue starts. A classic queue keeps no delivery
//     counts: messages below the delivered mark come back redelivered. A
//     quorum queue's counts are upper bounds, exact for messages that
//     were not being delivered or requeued at the crash; one past the
//     delivery limit is dead-lettered when the queue starts. The sizes of
//     messages not read (plain persistent chunks of a queue without a
//     bytes limit) are unknown: they do not count toward a bytes limit a
//     policy sets later. Requeued messages of a classic queue come back
//     in id order with the fresh ones, as RabbitMQ's classic queues do.

// AckKeyPrefix starts the catalog keys of the queues' ack states.
const AckKeyPrefix = "qa/"

// AckKey is the catalog key of the ack state of the queue whose log has
// directory id: qa/<id u64 big-endian>.
func AckKey(id uint64) []byte { return binary.BigEndian.AppendUint64([]byte(AckKeyPrefix), id) }

// AckKeyID returns the queue id of an ack state's key.
func AckKeyID(key []byte) (uint64, bool) {
	if len(key) != len(AckKeyPrefix)+8 || string(key[:len(AckKeyPrefix)]) != AckKeyPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(AckKeyPrefix):]), true
}

// ackStateVersion is the format version of the persisted ack state; part of
// the on-disk format.
const (
	ackStateVersion   = 2
	ackStateVersionV1 = 1 // without counts
)

// appendAckStateLocked appends the persisted ack state with delivered
// mark mark to dst; ahead is passed to appendCountsLocked.
// REQUIRES: q.mu held.
func (q *Queue) appendAckStateLocked(dst []byte, mark uint64, ahead bool) []byte {
	dst = appendAckStateHead(dst, mark, &q.mu.settled)
	if !q.Quorum() {
		return appendCounts(dst, nil)
	}
	return q.appendCountsLocked(dst, ahead)
}

// appendAckStateHead appends an ack state's version, mark and settled
// ranges; the counts follow.
func appendAckStateHead(dst []byte, mark uint64, settled *rangeset.Set) []byte {
	dst = append(dst, ackStateVersion)
	dst = binary.AppendUvarint(dst, mark)
	return settled.AppendTo(dst)
}

// idCount is a message's delivery count in the persisted state.
type idCount struct {
	id uint64
	n  uint32
}

// appendCounts appends delivery counts: a uvarint number of entries,
// then per entry (ids ascending) the uvarint distance from the previous
// id (from 0) and the uvarint count (at least 1).
func appendCounts(dst []byte, cs []idCount) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cs)))
	var prev uint64
	for _, c := range cs {
		dst = binary.AppendUvarint(dst, c.id-prev)
		dst = binary.AppendUvarint(dst, uint64(c.n))
		prev = c.id
	}
	return dst
}

// ackState is a decoded ack state.
type ackState struct {
	mark    uint64
	settled rangeset.Set
	counts  map[uint64]uint32 // quorum delivery counts
}

func decodeAckState(b []byte) (st ackState, err error) {
	if len(b) == 0 || (b[0] != ackStateVersion && b[0] != ackStateVersionV1) {
		return st, fmt.Errorf("queues: ack state: unknown version")
	}
	v := b[0]
	mark, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return st, fmt.Errorf("queues: ack state: bad delivered mark")
	}
	st.mark = mark
	rest, err := st.settled.ReadFrom(b[1+n:])
	if err != nil {
		return st, err
	}
	if v == ackStateVersion {
		if st.counts, rest, err = readCounts(rest); err != nil {
			return st, err
		}
	}
	if len(rest) != 0 {
		return st, fmt.Errorf("queues: ack state: %d trailing bytes", len(rest))
	}
	return st, nil
}

// readCounts decodes what appendCounts wrote, returning the rest.
func readCounts(b []byte) (map[uint64]uint32, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) { // each entry takes at least 2 bytes
		return nil, b, fmt.Errorf("queues: ack state: bad count of delivery counts")
	}
	b = b[k:]
	if n == 0 {
		return nil, b, nil
	}
	m := make(map[uint64]uint32, n)
	var id uint64
	for i := uint64(0); i < n; i++ {
		d, k1 := binary.Uvarint(b)
		if k1 <= 0 || (i > 0 && d == 0) {
			return nil, b, fmt.Errorf("queues: ack state: delivery count %d: bad id", i)
		}
		c, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || c == 0 || c > math.MaxUint32 {
			return nil, b, fmt.Errorf("queues: ack state: delivery count %d: bad count", i)
		}
		b = b[k1+k2:]
		id += d
		m[id] = uint32(c)
	}
	return m, b, nil
}

// persistTick runs on the sweep timer.
func (q *Queue) persistTick() {
	if err := q.sweep(); err != nil {
		q.env.Logger.Error("queues: sweep", "vhost", q.def.VHost, "queue", q.def.Name, "err", err)
	}
}

// sweep deletes the log segments wholly below the head (and, for a
// queue that keeps its history, outside the history limits: history.go)
// and closes
// basic.get's reader when no Get used it since the last run. (A crash
// between a deletion and the persisting of the acks that allowed it
// loses nothing: recovery takes what is missing from the log as
// settled.)
func (q *Queue) sweep() error {
	q.persistMu.Lock()
	defer q.persistMu.Unlock()
	q.mu.Lock()
	if q.mu.persistDone {
		q.mu.Unlock()
		return nil
	}
	q.mu.timerSet = false
	head := q.mu.settled.FirstGap(0)
	q.mu.Unlock()

	cut, cfg := head, q.config()
	var err error
	if cfg.history() {
		cut, err = q.historyCut(cfg, head)
	}
	// References since the last journal checkpoint stay: a rebuild after
	// a crash finds the last one the log kept (refs.go).
	cut = min(cut, q.journalFloor.Load())
	if q.log.CanTruncateBefore(cut) {
		var terr error
		if _, terr = q.log.TruncateBefore(cut); errors.Is(terr, osiris.ErrClosed) {
			terr = nil
		}
		err = errors.Join(err, terr)
	}
	if cfg.history() && cfg.histAge > 0 && q.log.CanTruncateBefore(head) {
		// Settled segments wait for their age: look again later.
		q.mu.Lock()
		q.scheduleInLocked(historySweepInterval(cfg.histAge))
		q.mu.Unlock()
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
	return err
}

// recover rebuilds the state of a reopened durable queue from its ack
// state and its log. No other goroutine uses the queue yet; its timers
// start, and expired messages go, in start, once every queue is open.
func (q *Queue) recover() error {
	as, err := q.loadAckState()
	if err != nil {
		return err
	}
	set, mark := as.settled, as.mark
	st := q.log.Stats()
	end := st.NextOffset
	set.ClipAt(end) // defensive: nothing at or past the log's end is settled
	mark = min(mark, end)
	set.AddRange(0, st.FirstOffset) // what was truncated
	head := set.FirstGap(0)
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
				q.mu.settled.AddRange(prev, h.ChunkID) // tracking chunks between user chunks
			}
			lo, hi := max(h.ChunkID, head), h.NextOffset()
			ids, metas = ids[:0], metas[:0]
			if h.BloomSize == 0 && !readAll {
				// Only persistent messages without a TTL of their own:
				// take them from the header (sizes unknown).
				for x := lo; x < hi; {
					x = q.mu.settled.FirstGap(x)
					if x >= hi {
						break
					}
					y := q.mu.settled.NextIn(x, hi)
					ids = append(ids, idRange{x, y})
					x = y
				}
				q.recoverReadyLocked(ids, nil, h.Timestamp, cfg.ttl, mark, as.counts)
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
					if id < lo || q.mu.settled.Contains(id) {
						continue
					}
					rec, err := parseRecord(e.Data)
					if err != nil {
						q.mu.settled.Add(id)
						q.logDropped(id, true, err)
						continue
					}
					if !rec.persistent && !q.Quorum() {
						q.mu.settled.Add(id) // transient: gone with the restart (quorum queues keep it)
						continue
					}
					m, err := parseMeta(rec, q.maxPrio)
					if err != nil {
						q.mu.settled.Add(id)
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
				q.recoverReadyLocked(ids, metas, h.Timestamp, cfg.ttl, mark, as.counts)
			}
			prev = hi
		}
		if prev < end {
			q.mu.settled.AddRange(prev, end) // trailing tracking chunks
		}
	}
	q.mu.tail = end
	q.mu.deliveredMark = mark
	q.mu.redeliverBelow = mark
	q.mu.markSafe, q.mu.markAtFlush = mark, mark // on disk already
	q.markDirtyLocked()                          // persist the cleaned state; delete settled segments
	return nil
}

// loadAckState reads the queue's ack state: from its log for a LogState
// queue (the newest state the log holds, osiris.Stream.State), from the
// catalog otherwise; the zero state when it has none.
func (q *Queue) loadAckState() (ackState, error) {
	if !q.def.LogState {
		return q.env.Persister.load(q.def.ID)
	}
	b := q.log.State()
	if b == nil {
		return ackState{}, nil
	}
	as, err := decodeAckState(b)
	if err != nil {
		return ackState{}, fmt.Errorf("queues: ack state in the log of %s: %w", q.def.Name, err)
	}
	return as, nil
}

// recoverReadyLocked makes recovered messages ready as enqueueLocked
// does, except that a quorum queue's messages below the delivered mark,
// which may have been delivered, become requeued messages with their
// delivery counts (at least 1).
// REQUIRES: q.mu held.
func (q *Queue) recoverReadyLocked(ids []idRange, metas []pubMeta, at, ttl int64, mark uint64, counts map[uint64]uint32) {
	if !q.Quorum() || len(ids) == 0 || ids[0].lo >= mark {
		q.enqueueLocked(ids, metas, at, ttl)
		return
	}
	k := 0 // index in metas
	for i, r := range ids {
		for id := r.lo; id < r.hi; id, k = id+1, k+1 {
			m := pubMeta{msgTTL: -1}
			if metas != nil {
				m = metas[k]
			}
			if id >= mark {
				// The rest never went out.
				rest := append([]idRange{{id, r.hi}}, ids[i+1:]...)
				if metas != nil {
					metas = metas[k:]
				}
				q.enqueueLocked(rest, metas, at, ttl)
				return
			}
			q.returnReadyLocked(reqEntry{id: id, count: max(counts[id], 1), size: m.size,
				exp: expiryOf(at, effectiveTTL(ttl, m.msgTTL))}, m.prio)
		}
	}
}

// dropOverLimitLocked dead-letters the requeued messages of a quorum
// queue whose delivery count is past its delivery limit: those a crash
// returned (recover), as RabbitMQ does when a consumer goes down.
// REQUIRES: q.mu held.
func (q *Queue) dropOverLimitLocked() {
	if !q.Quorum() {
		return
	}
	var over []uint64
	for p := range q.mu.levels {
		for _, e := range q.mu.levels[p].req.entries() {
			if q.overDeliveryLimitLocked(e.count) {
				over = append(over, e.id)
			}
		}
	}
	if len(over) == 0 {
		return
	}
	dead := q.deadFn(reasonDeliveryLimit)
	for _, id := range over {
		q.removeReadyLocked(id, id+1, dead)
	}
}
