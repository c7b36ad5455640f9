// Package histcheck checks the history of a fault test: the messages
// publishers sent and had confirmed, and the deliveries and acks
// consumers saw, recorded from many goroutines while nodes crash and
// links break. Check then finds what a broker that promises
// at-least-once delivery of confirmed messages must never do.
//
// # Recording
//
// A message is named by its publisher's id and a sequence number the
// publisher gives it; a target is a queue or a stream. A test records
//
//   - Publish before it sends the message, once per target the message
//     is routed to (or once with target "" when it does not know: then
//     any target will do). Sending it again after a failure (a retry of
//     an unconfirmed message) is recorded again: the message then has
//     two copies.
//   - Confirm when the broker confirms it.
//   - Deliver when a consumer receives it, with the consumer's id and
//     the redelivered flag, from the consumer's one goroutine in the
//     order the deliveries arrived.
//   - Ack only for an ack the broker is known to have taken: the channel
//     stayed open after it (a later synchronous call on it returned, or
//     it was closed cleanly). An ack lost with its connection makes a
//     redelivery legitimate.
//
// Stop publishing and drain the consumers before Check: a confirmed
// message still in a queue counts as lost.
//
// # Violations
//
// Check reports, for each target T and message M (publisher P, sequence
// S), with c(M,T) the copies of M published to T (Publish events with
// target T or ""):
//
//   - Lost: M was confirmed and published to T (or to "" and then to no
//     target in particular) but never delivered from T (from any target).
//   - Reordered: consumer C received M from T, not redelivered, after
//     receiving (not redelivered) a message of P with a sequence >= S
//     from T. Redeliveries are exempt (an unacked message comes back
//     after later ones), as are messages with more than one copy.
//   - Duplicate: M was delivered from T after c(M,T) or more deliveries
//     of M from T had been acked. With one copy: any delivery after an
//     acked one. At-least-once allows repeats only of unacked deliveries.
//   - Unpublished: M was delivered from T but never published to T (nor
//     to ""), or confirmed but never published.
//
// A delivery that is a Duplicate is not also checked for order.
package histcheck

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// Kind is the kind of an event.
type Kind uint8

// Event kinds.
const (
	Publish Kind = iota + 1 // a publisher is about to send a message
	Confirm                 // the broker confirmed a message
	Deliver                 // a consumer received a message
	Ack                     // the broker took a consumer's ack of a message
)

func (k Kind) String() string {
	switch k {
	case Publish:
		return "publish"
	case Confirm:
		return "confirm"
	case Deliver:
		return "deliver"
	case Ack:
		return "ack"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one recorded event. Which fields matter depends on Kind.
type Event struct {
	Kind        Kind
	Target      string // queue or stream; "" for Confirm, and for a Publish to any target
	Consumer    string // Deliver only
	Publisher   string // the message's publisher
	Seq         uint64 // the message's sequence number at its publisher
	Redelivered bool   // Deliver only
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %s/%d", e.Kind, e.Publisher, e.Seq)
	if e.Target != "" {
		s += " target=" + e.Target
	}
	if e.Consumer != "" {
		s += " consumer=" + e.Consumer
	}
	if e.Redelivered {
		s += " redelivered"
	}
	return s
}

// History is the events of a run in the order they were recorded. Its
// methods may be called from any goroutine. The zero value is empty and
// ready.
type History struct {
	mu     sync.Mutex
	events []Event
}

// Record appends e.
func (h *History) Record(e Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

// Publish records that publisher is about to send message seq, routed
// to target ("" for any).
func (h *History) Publish(publisher string, seq uint64, target string) {
	h.Record(Event{Kind: Publish, Target: target, Publisher: publisher, Seq: seq})
}

// Confirm records that the broker confirmed publisher's message seq.
func (h *History) Confirm(publisher string, seq uint64) {
	h.Record(Event{Kind: Confirm, Publisher: publisher, Seq: seq})
}

// Deliver records that consumer received publisher's message seq from
// target.
func (h *History) Deliver(target, consumer, publisher string, seq uint64, redelivered bool) {
	h.Record(Event{Kind: Deliver, Target: target, Consumer: consumer, Publisher: publisher, Seq: seq, Redelivered: redelivered})
}

// Ack records that the broker took an ack of publisher's message seq
// delivered from target.
func (h *History) Ack(target, publisher string, seq uint64) {
	h.Record(Event{Kind: Ack, Target: target, Publisher: publisher, Seq: seq})
}

// Events returns a copy of the events so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// ViolationKind says which promise a violation breaks.
type ViolationKind uint8

// Violation kinds; the package doc defines each.
const (
	Lost ViolationKind = iota + 1
	Reordered
	Duplicate
	Unpublished
)

func (k ViolationKind) String() string {
	switch k {
	case Lost:
		return "lost"
	case Reordered:
		return "reordered"
	case Duplicate:
		return "duplicate"
	case Unpublished:
		return "unpublished"
	}
	return fmt.Sprintf("ViolationKind(%d)", uint8(k))
}

// Violation is one broken promise.
type Violation struct {
	Kind      ViolationKind
	Target    string // "" for a message lost from every target
	Publisher string
	Seq       uint64
	Event     int    // index of the offending event; -1 for Lost
	Detail    string // what happened, for the test's log
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s/%d target=%q: %s", v.Kind, v.Publisher, v.Seq, v.Target, v.Detail)
}

// msg names a message.
type msg struct {
	publisher string
	seq       uint64
}

// inTarget names a message in a target.
type inTarget struct {
	target string
	msg
}

// stream names one consumer's deliveries of one publisher's messages
// from one target.
type stream struct {
	target, consumer, publisher string
}

// Check returns the violations in the history, sorted by kind, target,
// publisher and sequence.
func (h *History) Check() []Violation {
	events := h.Events()
	var out []Violation
	// copies[M][T]: Publish events of M with target T ("" for any).
	copies := map[msg]map[string]int{}
	confirmed := map[msg]int{} // index of the first Confirm
	for i, e := range events {
		m := msg{e.Publisher, e.Seq}
		switch e.Kind {
		case Publish:
			if copies[m] == nil {
				copies[m] = map[string]int{}
			}
			copies[m][e.Target]++
		case Confirm:
			if _, ok := confirmed[m]; !ok {
				confirmed[m] = i
			}
		}
	}
	copiesIn := func(m msg, target string) int { return copies[m][target] + copies[m][""] }

	delivered := map[inTarget]int{} // deliveries of M from T
	anywhere := map[msg]bool{}      // M delivered from some target
	acked := map[inTarget]int{}     // acks of M from T
	last := map[stream]uint64{}     // highest sequence delivered, not redelivered
	seen := map[stream]bool{}
	for i, e := range events {
		m := msg{e.Publisher, e.Seq}
		mt := inTarget{e.Target, m}
		switch e.Kind {
		case Deliver:
			n := copiesIn(m, e.Target)
			switch {
			case n == 0 && copies[m] == nil:
				out = append(out, Violation{Unpublished, e.Target, e.Publisher, e.Seq, i,
					fmt.Sprintf("delivered to %s, never published", e.Consumer)})
			case n == 0:
				out = append(out, Violation{Unpublished, e.Target, e.Publisher, e.Seq, i,
					fmt.Sprintf("delivered to %s from a target it was not published to (%v)", e.Consumer, targets(copies[m]))})
			case acked[mt] >= n:
				out = append(out, Violation{Duplicate, e.Target, e.Publisher, e.Seq, i,
					fmt.Sprintf("delivered to %s (redelivered=%v) after %d acked deliveries of %d copies", e.Consumer, e.Redelivered, acked[mt], n)})
			case !e.Redelivered && n == 1:
				s := stream{e.Target, e.Consumer, e.Publisher}
				if seen[s] && e.Seq <= last[s] {
					out = append(out, Violation{Reordered, e.Target, e.Publisher, e.Seq, i,
						fmt.Sprintf("delivered to %s after %s/%d", e.Consumer, e.Publisher, last[s])})
				}
				if !seen[s] || e.Seq > last[s] {
					last[s], seen[s] = e.Seq, true
				}
			}
			delivered[mt]++
			anywhere[m] = true
		case Ack:
			acked[mt]++
		}
	}
	for m, i := range confirmed {
		if copies[m] == nil {
			out = append(out, Violation{Unpublished, "", m.publisher, m.seq, i, "confirmed, never published"})
			continue
		}
		for t := range copies[m] {
			if t == "" {
				if !anywhere[m] {
					out = append(out, Violation{Lost, "", m.publisher, m.seq, -1, "confirmed, never delivered from any target"})
				}
			} else if delivered[inTarget{t, m}] == 0 {
				out = append(out, Violation{Lost, t, m.publisher, m.seq, -1, "confirmed, never delivered from " + t})
			}
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Target, b.Target),
			cmp.Compare(a.Publisher, b.Publisher), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Event, b.Event))
	})
	return out
}

// targets returns the targets a message was published to, sorted.
func targets(m map[string]int) []string {
	var ts []string
	for t := range m {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}
