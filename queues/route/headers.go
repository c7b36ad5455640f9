package route

import (
	"slices"
	"strings"
	"time"

	"github.com/warren-mq/warren/queues/internal/fieldval"
)

// Headers exchange matching, as rabbit_exchange_type_headers does it in
// RabbitMQ 4.3:
//
//   - x-match is all (the default), any, all-with-x or any-with-x. The
//     x-match argument itself never takes part; other arguments whose key
//     starts "x-" take part only in the -with-x variants.
//   - An argument with a void value (nil) matches when the header is
//     present, whatever its value.
//   - Otherwise the header's value must equal the argument's exactly, as
//     Erlang's =:= compares the values without their AMQP types: integers
//     of any width are equal when their values are (int8 5 = int64 5),
//     an integer never equals a float, longstr and byte array compare by
//     bytes; arrays and tables compare element types too. A message's
//     timestamp header is compared in milliseconds (mc_amqpl's
//     routing_value multiplies it by 1000) and a binding's in seconds.
//   - all with no participating arguments matches every message; any
//     matches none.

// x-match modes: the values of a headers binding's x-match argument.
const (
	XMatchAll      = "all"
	XMatchAny      = "any"
	XMatchAllWithX = "all-with-x"
	XMatchAnyWithX = "any-with-x"
)

// headersMatcher is a headers binding's arguments, prepared.
type headersMatcher struct {
	any     bool
	entries []headerEntry // sorted by key
}

type headerEntry struct {
	key   string
	idx   int32 // the key's index in the exchange's headersRouter
	value any
	void  bool
}

// headersRouter is a headers exchange: its bindings, tried in turn, and
// the argument keys they use, interned so that routing hashes each
// message header once rather than once per binding.
type headersRouter struct {
	all     []*Binding
	keyIdx  map[string]int32
	keyRefs []int32 // by key index: entries using the key; 0 when free
	free    []int32
}

// headersScratch holds a message's headers by key index during a Route
// call (part of the pooled routing).
type headersScratch struct {
	gen  uint32
	seen []uint32 // by key index: gen when the message has the key
	vals []any    // by key index: the message's value, when seen
	set  []int32  // indexes of vals to clear after the call
}

func (h *headersRouter) add(b *Binding) {
	for i := range b.hm.entries {
		e := &b.hm.entries[i]
		idx, ok := h.keyIdx[e.key]
		if !ok {
			if n := len(h.free); n > 0 {
				idx = h.free[n-1]
				h.free = h.free[:n-1]
			} else {
				idx = int32(len(h.keyRefs))
				h.keyRefs = append(h.keyRefs, 0)
			}
			h.keyIdx[e.key] = idx
		}
		h.keyRefs[idx]++
		e.idx = idx
	}
	h.all = append(h.all, b)
}

func (h *headersRouter) remove(b *Binding) {
	if !slices.Contains(h.all, b) {
		return
	}
	h.all = removeBinding(h.all, b)
	for _, e := range b.hm.entries {
		if h.keyRefs[e.idx]--; h.keyRefs[e.idx] == 0 {
			delete(h.keyIdx, e.key)
			h.free = append(h.free, e.idx)
		}
	}
}

func (h *headersRouter) route(r *routing, _ []string, headers map[string]any) {
	if len(h.all) == 0 {
		return
	}
	s := &r.headers
	s.begin(len(h.keyRefs))
	for k, v := range headers {
		if idx, ok := h.keyIdx[k]; ok {
			s.seen[idx] = s.gen
			s.vals[idx] = v
			s.set = append(s.set, idx)
		}
	}
	for _, b := range h.all {
		if b.hm.match(s) {
			r.hit(b)
		}
	}
}

// begin starts matching one message against n interned keys.
func (s *headersScratch) begin(n int) {
	s.gen++
	if s.gen == 0 {
		clear(s.seen)
		s.gen = 1
	}
	s.seen = growStamps(s.seen, n)
	if len(s.vals) < n {
		s.vals = slices.Grow(s.vals, n-len(s.vals))[:n]
	}
}

// release drops the references to the last message's header values.
func (s *headersScratch) release() {
	for _, idx := range s.set {
		s.vals[idx] = nil
	}
	s.set = s.set[:0]
}

func newHeadersMatcher(args map[string]any) *headersMatcher {
	mode, _ := args["x-match"].(string) // an invalid one is all, as in RabbitMQ
	withX := mode == XMatchAllWithX || mode == XMatchAnyWithX
	m := &headersMatcher{any: mode == XMatchAny || mode == XMatchAnyWithX}
	for k, v := range args {
		if k == "x-match" || !withX && strings.HasPrefix(k, "x-") {
			continue
		}
		m.entries = append(m.entries, headerEntry{key: k, value: v, void: v == nil})
	}
	slices.SortFunc(m.entries, func(a, b headerEntry) int { return strings.Compare(a.key, b.key) })
	return m
}

// match reports whether the message headers in s satisfy the binding.
func (m *headersMatcher) match(s *headersScratch) bool {
	if m.any {
		for i := range m.entries {
			e := &m.entries[i]
			if s.seen[e.idx] == s.gen && (e.void || headerValueEqual(e.value, s.vals[e.idx])) {
				return true
			}
		}
		return false
	}
	for i := range m.entries {
		e := &m.entries[i]
		if s.seen[e.idx] != s.gen || !e.void && !headerValueEqual(e.value, s.vals[e.idx]) {
			return false
		}
	}
	return true
}

// headerValueEqual compares a binding argument with a message header at
// the top level of the headers table.
func headerValueEqual(arg, header any) bool {
	if t, ok := header.(time.Time); ok {
		header = t.Unix() * 1000
	}
	return fieldval.ExactEqual(arg, header)
}
