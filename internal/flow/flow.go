// Package flow is publisher flow control, Warren's counterpart of
// RabbitMQ's credit flow: it bounds the bytes a connection has read from
// its client and handed to queues and streams that their log writers
// have not written yet.
//
// Without it a publisher that does not wait for confirms is limited only
// by how fast the connection's reader parses: every message read is
// queued ahead of the log writers, and a slow disk lets hundreds of
// megabytes pile up in memory. With it, each connection has a Credit of
// a few megabytes. The reader takes credit for every message it hands
// over (Take) and, before it reads the next publish, waits while the
// credit is spent (Wait); the writers give it back as they finish with
// each message (Give). While the reader waits the socket is not read,
// so TCP pushes back on the client, and the connection shows "flow" in
// the management API, as RabbitMQ's do.
//
// The hot path is an atomic add per message on each side. Only a Give
// that finds the reader waiting, with the credit back at the resume
// point, signals a channel.
package flow

import (
	"sync/atomic"
	"time"
)

// DefaultLimit is a connection's credit unless configured otherwise.
const DefaultLimit = 4 << 20

// MessageOverhead is what Take charges for a message besides its bytes:
// about the bookkeeping each one carries until it is written (its
// record's header, the log batch's entry, its completion callback), so
// that a flood of empty messages is bounded too.
const MessageOverhead = 256

// Credit is one connection's publish budget, in bytes. Take is called
// from the connection's reader goroutine only; Give from any goroutine.
// The reader waits (Wait) once Held reaches the limit and resumes when it
// is back to half of it, so a connection held by a slow writer is read
// in runs of at least half its credit rather than one message at a time.
type Credit struct {
	// Static after New.
	limit  int64
	resume int64
	epoch  time.Time // Flow's monotonic reference

	held    atomic.Int64 // bytes taken and not given back
	peak    atomic.Int64 // the highest held that Take saw; stored by the reader only
	waiting atomic.Bool  // the reader is in Wait
	wake    chan struct{}
	// lastHeld is when the last Wait that held the reader ended, as
	// nanoseconds since epoch; 0: never held.
	lastHeld atomic.Int64
	holds    atomic.Uint64 // Waits that held the reader
}

// New returns a credit of limit bytes (DefaultLimit if limit <= 0).
func New(limit int64) *Credit {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Credit{limit: limit, resume: limit / 2, epoch: time.Now(), wake: make(chan struct{}, 1)}
}

// Limit is the credit's size in bytes.
func (c *Credit) Limit() int64 { return c.limit }

// Take charges n bytes. The reader calls it when it hands a message
// over; the matching Give comes when the message has been written (or
// failed). Held may go above the limit by the last message taken: the
// reader checks before it reads a message, not after.
func (c *Credit) Take(n int64) {
	h := c.held.Add(n)
	if h > c.peak.Load() {
		c.peak.Store(h) // only the reader stores, so no lost update
	}
}

// Give returns n bytes taken earlier, and wakes a waiting reader once
// the credit is back at its resume point.
func (c *Credit) Give(n int64) {
	if c.held.Add(-n) <= c.resume && c.waiting.Load() {
		select {
		case c.wake <- struct{}{}:
		default: // a wake is pending already
		}
	}
}

// Spent reports whether the reader must Wait before reading a publish.
func (c *Credit) Spent() bool { return c.held.Load() >= c.limit }

// Wait holds the reader while the credit is spent, until it is back at
// half the limit. held reports whether it waited at all (the credit may
// have come back since the caller's Spent); ok is false if stop was
// closed first.
func (c *Credit) Wait(stop <-chan struct{}) (held, ok bool) {
	if !c.Spent() {
		return false, true
	}
	c.holds.Add(1)
	c.waiting.Store(true)
	defer func() {
		c.waiting.Store(false)
		c.lastHeld.Store(max(int64(time.Since(c.epoch)), 1))
	}()
	// waiting is set before held is read, and Give lowers held before
	// it reads waiting, so one of the two sees the other: a Give that
	// reaches the resume point after this check finds waiting set.
	for c.held.Load() > c.resume {
		select {
		case <-c.wake:
		case <-stop:
			return true, false
		}
	}
	return true, true
}

// Held is the bytes taken and not given back.
func (c *Credit) Held() int64 { return c.held.Load() }

// Peak is the highest Held has been after a Take.
func (c *Credit) Peak() int64 { return c.peak.Load() }

// Holds counts the Waits that held the reader.
func (c *Credit) Holds() uint64 { return c.holds.Load() }

// Waiting reports whether the reader is held now.
func (c *Credit) Waiting() bool { return c.waiting.Load() }

// Flow reports whether the reader is held now or was within the last
// window: the management API shows such a connection in state "flow"
// (RabbitMQ's reader shows it for 5 s after it was last blocked by credit
// flow, its channels for 1 s).
func (c *Credit) Flow(window time.Duration) bool {
	if c.waiting.Load() {
		return true
	}
	last := c.lastHeld.Load()
	return last != 0 && time.Since(c.epoch)-time.Duration(last) < window
}
