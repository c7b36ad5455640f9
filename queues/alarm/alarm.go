// Package alarm holds the node's resource alarms, as RabbitMQ's
// rabbit_alarm does: a memory alarm when the process uses more than its
// high watermark, a disk alarm when the data directory's file system has
// less free space than its limit. Every front end and the management
// API read one Set (the Broker's); a Monitor raises and clears the
// alarms from readings, real ones in the daemon, injected ones in tests.
//
// While an alarm is in effect the protocol front ends stop reading
// publishers; everything that frees space (consumers, acks, retention,
// queue deletion and purges) keeps working.
package alarm

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Resource is what an alarm is about; Resources are a set of them.
type Resource uint32

// The resources, as bits.
const (
	Memory Resource = 1 << iota
	Disk
)

// String is RabbitMQ's name of the resource in its health checks'
// bodies (rabbit_alarm:format_as_map): "memory", "disk space".
func (r Resource) String() string {
	switch r {
	case Memory:
		return "memory"
	case Disk:
		return "disk space"
	}
	return "unknown"
}

// Each calls f for every resource in the set, memory first.
func (r Resource) Each(f func(Resource)) {
	for _, one := range []Resource{Memory, Disk} {
		if r&one != 0 {
			f(one)
		}
	}
}

// BlockedReason is the reason connection.blocked carries for the
// resources (rabbit_reader:blocked_by_message): "low on memory", "low on
// disk", "low on memory & disk".
func (r Resource) BlockedReason() string {
	var parts []string
	if r&Memory != 0 {
		parts = append(parts, "memory")
	}
	if r&Disk != 0 {
		parts = append(parts, "disk")
	}
	return "low on " + strings.Join(parts, " & ")
}

// Set is the node's alarms in effect and the readings behind them. The
// zero Set has no alarm; its methods are safe for concurrent use. Active
// is one atomic load, cheap enough for every publish frame.
type Set struct {
	on atomic.Uint32 // Resource bits in effect

	// The last readings and limits, for the API and the metrics; 0 until
	// a monitor has read them.
	memUsed, memLimit, diskFree, diskLimit atomic.Uint64

	mu struct {
		sync.Mutex
		changed chan struct{} // closed at the next change; nil: none made yet
	}
}

// Active returns the resources whose alarm is in effect (0: none).
func (s *Set) Active() Resource { return Resource(s.on.Load()) }

// Set turns r's alarm on or off and reports whether that changed
// anything; a change wakes every Changed waiter.
func (s *Set) Set(r Resource, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.on.Load()
	v := old &^ uint32(r)
	if on {
		v |= uint32(r)
	}
	if v == old {
		return false
	}
	s.on.Store(v)
	if s.mu.changed != nil {
		close(s.mu.changed)
		s.mu.changed = nil
	}
	return true
}

// Changed returns a channel closed at the next change of the alarms.
// Read Active after taking it: a change between the two is not missed.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.changed == nil {
		s.mu.changed = make(chan struct{})
	}
	return s.mu.changed
}

// Wait returns once no alarm is in effect (true) or when stop is closed
// (false).
func (s *Set) Wait(stop <-chan struct{}) bool {
	for {
		ch := s.Changed()
		if s.Active() == 0 {
			return true
		}
		select {
		case <-ch:
		case <-stop:
			return false
		}
	}
}

// Readings are the monitors' last readings and limits, in bytes; a zero
// limit means that resource is not monitored.
type Readings struct {
	MemUsed, MemLimit   uint64
	DiskFree, DiskLimit uint64
}

// Readings returns the last readings.
func (s *Set) Readings() Readings {
	return Readings{
		MemUsed: s.memUsed.Load(), MemLimit: s.memLimit.Load(),
		DiskFree: s.diskFree.Load(), DiskLimit: s.diskLimit.Load(),
	}
}
