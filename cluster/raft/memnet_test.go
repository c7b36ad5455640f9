package raft

import (
	"sync"
	"testing"
	"time"
)

// memNet is an in-process network between hosts with switches the
// tests flip: a node down (nothing to or from it), a one-way cut, and a
// delay per direction. Every message goes through the envelope codec.
type memNet struct {
	t  testing.TB
	wg sync.WaitGroup // delayed deliveries in flight

	mu struct {
		sync.Mutex
		hosts map[uint64]*Host
		down  map[uint64]bool
		cut   map[[2]uint64]bool // {from, to}
		delay map[[2]uint64]time.Duration
	}
}

func newMemNet(t testing.TB) *memNet {
	n := &memNet{t: t}
	n.mu.hosts = make(map[uint64]*Host)
	n.mu.down = make(map[uint64]bool)
	n.mu.cut = make(map[[2]uint64]bool)
	n.mu.delay = make(map[[2]uint64]time.Duration)
	return n
}

// transport is node from's Transport.
func (n *memNet) transport(from uint64) Transport { return memTransport{n, from} }

func (n *memNet) attach(h *Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.hosts[h.NodeID()] = h
}

func (n *memNet) detach(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.mu.hosts, id)
}

// setDown drops everything to and from node (or stops doing so).
func (n *memNet) setDown(node uint64, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.down[node] = down
}

// setCut drops what from sends to to (or stops doing so).
func (n *memNet) setCut(from, to uint64, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.cut[[2]uint64{from, to}] = cut
}

// partition cuts both ways between every node of a and every node of b.
func (n *memNet) partition(a, b []uint64, cut bool) {
	for _, x := range a {
		for _, y := range b {
			n.setCut(x, y, cut)
			n.setCut(y, x, cut)
		}
	}
}

func (n *memNet) setDelay(from, to uint64, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.delay[[2]uint64{from, to}] = d
}

// wait waits for the delayed deliveries in flight.
func (n *memNet) wait() { n.wg.Wait() }

type memTransport struct {
	n    *memNet
	from uint64
}

func (t memTransport) Send(to uint64, envs []Envelope) {
	n := t.n
	n.mu.Lock()
	drop := n.mu.down[t.from] || n.mu.down[to] || n.mu.cut[[2]uint64{t.from, to}]
	delay := n.mu.delay[[2]uint64{t.from, to}]
	sender := n.mu.hosts[t.from]
	n.mu.Unlock()
	if drop {
		if sender != nil {
			sender.ReportUnreachable(to)
		}
		return
	}
	b, err := AppendEnvelopes(nil, envs)
	if err != nil {
		n.t.Errorf("encode envelopes: %v", err)
		return
	}
	deliver := func() {
		got, err := DecodeEnvelopes(b)
		if err != nil {
			n.t.Errorf("decode envelopes: %v", err)
			return
		}
		n.mu.Lock()
		h := n.mu.hosts[to]
		n.mu.Unlock()
		if h != nil {
			h.Receive(t.from, got)
		}
	}
	if delay == 0 {
		deliver()
		return
	}
	n.wg.Add(1)
	time.AfterFunc(delay, func() {
		defer n.wg.Done()
		deliver()
	})
}
