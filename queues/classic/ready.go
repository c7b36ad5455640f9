package classic

import (
	"math"
	"slices"
)

// The ready messages of a classic queue, by priority level.
//
// A queue without x-max-priority has one level; a priority queue has
// max-priority+1 (RabbitMQ's rabbit_priority_queue: a message's priority
// property clamped to the maximum, absent = 0). Delivery takes from the
// highest level that has a ready message; within a level, requeued
// messages (ascending id, as they were first enqueued) go before fresh
// ones, which go in id order: FIFO within a priority.
//
// A level holds:
//
//   - req, the requeued messages, each with what the queue must remember
//     of it (delivery count, body size, expiry instant);
//   - fresh, the never-delivered messages as spans: runs of consecutive
//     message ids enqueued together (one publish batch, or one chunk at
//     recovery) with their enqueue instant, the queue TTL then in effect
//     and their body sizes. A queue without priorities appends one span
//     per batch, so its ready set costs O(batches) plus 4 bytes a message
//     for the sizes: the fast path stays a cursor moving over the log.
//
// Ids inside a fresh span that left the ready set out of order (expired
// while not at the head, dead-lettered, settled) are in q.mu.claimed or
// q.mu.settled; takers skip them (both sets answer "beyond my last range"
// in O(1), the usual case for the ids at a span's front).
//
// Non-message offsets (osiris tracking chunks) are never inside a span:
// they are settled when their batch is stored (batchIDs).

// noExpiry is the expiry instant of a message that never expires.
const noExpiry = math.MaxInt64

// idRange is the ids [lo, hi).
type idRange struct{ lo, hi uint64 }

// freshSpan is a run of consecutive fresh message ids [lo, hi) of one level.
type freshSpan struct {
	lo, hi uint64
	at     int64    // enqueue instant, Unix ms
	ttl    int64    // queue message TTL in effect at enqueue, ms; -1: none
	sizes  []uint32 // body sizes of lo..hi-1; nil: unknown (recovered unread)
}

// level is one priority's ready messages.
type level struct {
	req   requeueSet
	fresh []freshSpan // fresh[head:] are live, ascending
	head  int
}

// pubMeta is what the queue reads of a message when it is published (or
// recovered): the body size, the priority and the per-message TTL.
type pubMeta struct {
	msgTTL   int64 // the expiration property, ms; -1: none
	size     uint32
	prio     uint8 // clamped to the queue's levels
	reserved bool  // counted in q.mu.pendPub (reject-publish admission)
}

// effectiveTTL is the TTL of a message: the smaller of the queue's and
// the message's; -1 when neither sets one.
func effectiveTTL(queueTTL, msgTTL int64) int64 {
	switch {
	case queueTTL < 0:
		return msgTTL
	case msgTTL < 0:
		return queueTTL
	}
	return min(queueTTL, msgTTL)
}

// expiryOf returns the expiry instant of a message enqueued at at with
// TTL ttl (effectiveTTL).
func expiryOf(at, ttl int64) int64 {
	if ttl < 0 {
		return noExpiry
	}
	return at + ttl
}

// headInfo is what the queue knew of a message it took off the ready set.
type headInfo struct {
	id    uint64
	prio  uint8
	req   bool   // it was requeued
	count uint32 // deliveries so far
	size  uint32
	sized bool  // size is known
	exp   int64 // requeued: its expiry; fresh: see at and ttl
	at    int64 // fresh: enqueue instant
	ttl   int64 // fresh: the queue TTL at enqueue
}

// skipEndLocked returns the first id >= id that is neither settled nor
// claimed.
// REQUIRES: q.mu held.
func (q *Queue) skipEndLocked(id uint64) uint64 {
	for {
		if e, ok := q.mu.settled.EndOf(id); ok {
			id = e
			continue
		}
		if q.mu.claimed.Len() > 0 {
			if e, ok := q.mu.claimed.EndOf(id); ok {
				id = e
				continue
			}
		}
		return id
	}
}

// frontLocked returns the first live fresh span of l, dropping the ids
// at its front that are no longer ready, or nil.
// REQUIRES: q.mu held.
func (q *Queue) frontLocked(l *level) *freshSpan {
	for l.head < len(l.fresh) {
		s := &l.fresh[l.head]
		if s.lo < s.hi {
			if next := q.skipEndLocked(s.lo); next > s.lo {
				s.advance(min(next, s.hi))
			}
			if s.lo < s.hi {
				return s
			}
		}
		l.fresh[l.head] = freshSpan{}
		l.head++
		if l.head == len(l.fresh) {
			l.fresh, l.head = l.fresh[:0], 0
		} else if l.head >= 64 && l.head >= len(l.fresh)/2 {
			n := copy(l.fresh, l.fresh[l.head:])
			clear(l.fresh[n:])
			l.fresh, l.head = l.fresh[:n], 0
		}
	}
	return nil
}

// advance drops the span's ids below lo.
func (s *freshSpan) advance(lo uint64) {
	if s.sizes != nil {
		s.sizes = s.sizes[lo-s.lo:]
	}
	s.lo = lo
}

// headLocked returns the message that is delivered next: its level,
// whether it is requeued, its id.
// REQUIRES: q.mu held.
func (q *Queue) headLocked() (p int, req bool, id uint64, ok bool) {
	for p = len(q.mu.levels) - 1; p >= 0; p-- {
		l := &q.mu.levels[p]
		if l.req.len() > 0 {
			return p, true, l.req.peek().id, true
		}
		if s := q.frontLocked(l); s != nil {
			return p, false, s.lo, true
		}
	}
	return 0, false, 0, false
}

// popHeadLocked takes the head that headLocked returned off the ready set.
// REQUIRES: q.mu held; headLocked just returned (p, req).
func (q *Queue) popHeadLocked(p int, req bool) headInfo {
	l := &q.mu.levels[p]
	q.mu.ready--
	if req {
		e := l.req.pop()
		q.mu.readyBytes -= int64(e.size)
		return headInfo{id: e.id, prio: uint8(p), req: true, count: e.count, size: e.size, sized: true, exp: e.exp}
	}
	s := &l.fresh[l.head]
	h := headInfo{id: s.lo, prio: uint8(p), at: s.at, ttl: s.ttl, exp: noExpiry}
	if s.sizes != nil {
		h.size, h.sized = s.sizes[0], true
		q.mu.readyBytes -= int64(h.size)
	}
	s.advance(s.lo + 1)
	return h
}

// enqueueLocked makes stored (or recovered) messages ready: ids, in
// ascending order, with their metas (nil: unknown sizes, priority 0, no
// per-message TTL), enqueued at at with queue TTL ttl. It registers
// their expiries. It does not apply the length limits.
// REQUIRES: q.mu held.
func (q *Queue) enqueueLocked(ids []idRange, metas []pubMeta, at, ttl int64) {
	k := 0
	var first, last uint64
	n := 0
	for _, r := range ids {
		for id := r.lo; id < r.hi; id++ {
			var m pubMeta
			if metas != nil {
				m = metas[k]
			} else {
				m.msgTTL = -1
			}
			k++
			if n == 0 {
				first = id
			}
			last = id
			n++
			l := &q.mu.levels[min(int(m.prio), len(q.mu.levels)-1)]
			q.appendFreshLocked(l, id, m.size, metas != nil, at, ttl)
			q.mu.ready++
			if metas != nil {
				q.mu.readyBytes += int64(m.size)
			}
			// Per-message TTLs shorter than the queue's get their own
			// expiry; the others expire with their batch.
			if m.msgTTL >= 0 && (ttl < 0 || m.msgTTL < ttl) {
				if m.msgTTL == 0 {
					q.addZeroLocked(id, id+1)
				} else {
					q.pushExpiryLocked(expiry{at + m.msgTTL, id, id + 1})
				}
			}
		}
	}
	q.mu.counts.Published += uint64(n)
	if n > 0 && ttl >= 0 {
		if ttl == 0 {
			q.addZeroLocked(first, last+1)
		} else {
			q.pushExpiryLocked(expiry{at + ttl, first, last + 1})
		}
	}
}

// appendFreshLocked appends id to l's fresh spans, extending the last one
// when id follows it and shares its enqueue instant and TTL.
// REQUIRES: q.mu held.
func (q *Queue) appendFreshLocked(l *level, id uint64, size uint32, sized bool, at, ttl int64) {
	if n := len(l.fresh); n > l.head {
		s := &l.fresh[n-1]
		if s.hi == id && s.at == at && s.ttl == ttl && (s.sizes != nil) == sized {
			s.hi++
			if sized {
				s.sizes = append(s.sizes, size)
			}
			return
		}
	}
	s := freshSpan{lo: id, hi: id + 1, at: at, ttl: ttl}
	if sized {
		s.sizes = append(make([]uint32, 0, 8), size)
	}
	l.fresh = append(l.fresh, s)
}

// removeReadyLocked takes every ready message with an id in [lo, hi) off
// the ready set and calls gone for each run of them (ascending) with its
// level. It returns how many it removed.
// REQUIRES: q.mu held.
func (q *Queue) removeReadyLocked(lo, hi uint64, gone func(r idRange)) int {
	removed := 0
	for p := range q.mu.levels {
		l := &q.mu.levels[p]
		for _, e := range l.req.removeRange(lo, hi) {
			q.mu.ready--
			q.mu.readyBytes -= int64(e.size)
			removed++
			gone(idRange{e.id, e.id + 1})
		}
		live := l.fresh[l.head:]
		// The first freshSpan that ends after lo.
		i, _ := slices.BinarySearchFunc(live, lo, func(s freshSpan, x uint64) int {
			if s.hi <= x {
				return -1
			}
			return 1
		})
		for ; i < len(live) && live[i].lo < hi; i++ {
			s := &live[i]
			a, b := max(s.lo, lo), min(s.hi, hi)
			for x := a; x < b; {
				x = q.skipEndLocked(x)
				if x >= b {
					break
				}
				y := min(q.mu.settled.NextIn(x, b), q.mu.claimed.NextIn(x, b))
				if s.sizes != nil {
					for _, sz := range s.sizes[x-s.lo : y-s.lo] {
						q.mu.readyBytes -= int64(sz)
					}
				}
				q.mu.ready -= int(y - x)
				removed += int(y - x)
				if x == s.lo {
					s.advance(y) // at the span's front: no need to mark
				}
				gone(idRange{x, y})
				x = y
			}
		}
		q.frontLocked(l)
	}
	return removed
}

// hasReadyInLocked reports whether a message with an id in [lo, hi) is
// ready.
// REQUIRES: q.mu held.
func (q *Queue) hasReadyInLocked(lo, hi uint64) bool {
	for p := range q.mu.levels {
		l := &q.mu.levels[p]
		if i, _ := l.req.search(lo); i < l.req.len() && l.req.entries()[i].id < hi {
			return true
		}
		live := l.fresh[l.head:]
		i, _ := slices.BinarySearchFunc(live, lo, func(s freshSpan, x uint64) int {
			if s.hi <= x {
				return -1
			}
			return 1
		})
		for ; i < len(live) && live[i].lo < hi; i++ {
			if q.skipEndLocked(max(live[i].lo, lo)) < min(live[i].hi, hi) {
				return true
			}
		}
	}
	return false
}

// clearReadyLocked empties the ready set, calling gone for each run of
// ready ids. It returns how many messages it removed.
// REQUIRES: q.mu held.
func (q *Queue) clearReadyLocked(gone func(r idRange)) int {
	n := q.mu.ready
	for p := range q.mu.levels {
		l := &q.mu.levels[p]
		for _, e := range l.req.entries() {
			gone(idRange{e.id, e.id + 1})
		}
		l.req.clear()
		for _, s := range l.fresh[l.head:] {
			for x := s.lo; x < s.hi; {
				x = q.skipEndLocked(x)
				if x >= s.hi {
					break
				}
				y := min(q.mu.settled.NextIn(x, s.hi), q.mu.claimed.NextIn(x, s.hi))
				gone(idRange{x, y})
				x = y
			}
		}
		clear(l.fresh)
		l.fresh, l.head = l.fresh[:0], 0
	}
	q.mu.ready, q.mu.readyBytes = 0, 0
	return n
}

// requeueSet holds returned messages in ascending id order.
type requeueSet struct {
	e     []reqEntry // e[start:] sorted by id
	start int
}

type reqEntry struct {
	id    uint64
	count uint32 // deliveries so far
	size  uint32 // body size
	exp   int64  // expiry instant, kept from the first enqueue; noExpiry
	seq   uint64 // order of requeues in the queue (returnReadyLocked)
}

func (s *requeueSet) len() int            { return len(s.e) - s.start }
func (s *requeueSet) peek() reqEntry      { return s.e[s.start] }
func (s *requeueSet) entries() []reqEntry { return s.e[s.start:] }

func (s *requeueSet) clear() {
	clear(s.e)
	s.e, s.start = s.e[:0], 0
}

func (s *requeueSet) pop() reqEntry {
	x := s.e[s.start]
	s.start++
	if s.start == len(s.e) {
		s.clear()
	}
	return x
}

func (s *requeueSet) add(x reqEntry) {
	if s.start > 0 && s.start >= len(s.e)/2 {
		n := copy(s.e, s.e[s.start:])
		s.e, s.start = s.e[:n], 0
	}
	live := s.e[s.start:]
	if len(live) == 0 || x.id > live[len(live)-1].id {
		s.e = append(s.e, x) // the common case: ids come back in order
		return
	}
	i, found := s.search(x.id)
	if found {
		return
	}
	s.e = slices.Insert(s.e, s.start+i, x)
}

// search finds id among the live entries.
func (s *requeueSet) search(id uint64) (int, bool) {
	return slices.BinarySearchFunc(s.e[s.start:], id, func(e reqEntry, id uint64) int {
		switch {
		case e.id < id:
			return -1
		case e.id > id:
			return 1
		}
		return 0
	})
}

// removeRange removes the entries with ids in [lo, hi) and returns them
// (valid until the next change).
func (s *requeueSet) removeRange(lo, hi uint64) []reqEntry {
	if s.len() == 0 || lo >= hi {
		return nil
	}
	i, _ := s.search(lo)
	j, _ := s.search(hi)
	if i == j {
		return nil
	}
	out := slices.Clone(s.e[s.start+i : s.start+j])
	s.e = slices.Delete(s.e, s.start+i, s.start+j)
	if s.start == len(s.e) {
		s.clear()
	}
	return out
}
