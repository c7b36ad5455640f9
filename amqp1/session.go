package amqp1

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/warren-mq/warren/internal/amqp10/frame"
)

// A session (begin/end) carries links. Its flow control counts transfer
// frames both ways (core §2.5.6): Warren's incoming window starts at
// DefaultMaxIncomingWindow and is topped up with a flow once half is
// used, or closed (0) while a resource alarm blocks publishing, as
// RabbitMQ does; deliveries to the client wait while the client's
// incoming window is closed. Warren uses the client's channel and link
// handles as its own.

// session is one session. Its fields are guarded by conn.mu, except
// what is marked as the reader goroutine's.
type session struct {
	c       *conn
	channel uint16

	nextIncomingID uint32 // the next transfer id expected from the client
	incomingWindow uint32 // transfers the client may still send
	alarmed        bool   // the window is closed for an alarm

	nextOutgoingID     uint32 // the next transfer id Warren sends
	remoteIncomingID   uint32 // the client's next-incoming-id
	remoteIncomingWind uint32 // the client's incoming-window at remoteIncomingID
	remoteOutgoingWind uint32 // the client's outgoing-window (for the API)
	nextDeliveryID     uint32 // the next delivery id Warren assigns

	handleMax uint32
	in        map[uint32]*inLink // the client's senders, by handle
	// gone are the client's senders Warren detached, until the client's
	// detach: transfers already on their way are dropped, not an error.
	gone      map[uint32]bool
	outs      map[uint32]*outLink // the client's receivers, by handle
	unsettled map[uint32]*outDelivery
	pending   []*outDelivery // waiting for the client's incoming window
	ended     bool

	// Management link pairs (management.go): by link name, and their
	// halves by handle.
	mgmtPairs map[string]*mgmtPair
	mgmtIn    map[uint32]*mgmtLink // the client's senders to /management
	mgmtOut   map[uint32]*mgmtLink // the client's receivers from /management
}

// begin answers a begin: a new session on channel.
func (c *conn) begin(channel uint16, b *frame.Begin) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil
	}
	if _, ok := c.mu.sessions[channel]; ok {
		return &amqpError{cond: frame.CondNotAllowed, desc: fmt.Sprintf("session on channel %d already begun", channel)}
	}
	s := &session{
		c:                  c,
		channel:            channel,
		nextIncomingID:     b.NextOutgoingID,
		incomingWindow:     DefaultMaxIncomingWindow,
		remoteIncomingID:   0,
		remoteIncomingWind: b.IncomingWindow,
		remoteOutgoingWind: b.OutgoingWindow,
		handleMax:          min(b.HandleMax, DefaultLinkMax-1),
		in:                 map[uint32]*inLink{},
		outs:               map[uint32]*outLink{},
		unsettled:          map[uint32]*outDelivery{},
		mgmtPairs:          map[string]*mgmtPair{},
		mgmtIn:             map[uint32]*mgmtLink{},
		mgmtOut:            map[uint32]*mgmtLink{},
	}
	if c.broker.Alarms().Active() != 0 {
		s.incomingWindow, s.alarmed = 0, true
		go s.reopenAfterAlarm()
	}
	c.mu.sessions[channel] = s
	c.send(channel, &frame.Begin{
		RemoteChannel:    channel,
		HasRemoteChannel: true,
		NextOutgoingID:   s.nextOutgoingID,
		IncomingWindow:   s.incomingWindow,
		OutgoingWindow:   math.MaxUint32,
		HandleMax:        s.handleMax,
	})
	return nil
}

// handle dispatches a performative of the session (the reader
// goroutine). payload is a transfer's, valid until the next read.
func (s *session) handle(p frame.Performative, payload []byte) error {
	switch p := p.(type) {
	case *frame.Transfer:
		return s.transfer(p, payload)
	case *frame.Disposition:
		s.disposition(p)
		return nil
	case *frame.Flow:
		return s.flow(p)
	case *frame.Attach:
		return s.attach(p)
	case *frame.Detach:
		s.detach(p)
		return nil
	case *frame.End:
		s.end(nil)
		return nil
	}
	return &amqpError{cond: frame.CondIllegalState, desc: fmt.Sprintf("unexpected %T on a session", p)}
}

// end ends the session, with e as the error when Warren ends it: its
// links stop (unsettled deliveries are requeued) and end is answered.
func (s *session) end(e *amqpError) {
	c := s.c
	c.mu.Lock()
	if s.ended {
		c.mu.Unlock()
		return
	}
	s.ended = true
	delete(c.mu.sessions, s.channel)
	outs := s.outs
	unsettled := s.unsettled
	pending := s.pending
	s.outs, s.unsettled, s.pending = map[uint32]*outLink{}, map[uint32]*outDelivery{}, nil
	s.in = map[uint32]*inLink{}
	s.mgmtPairs, s.mgmtIn, s.mgmtOut = map[string]*mgmtPair{}, map[uint32]*mgmtLink{}, map[uint32]*mgmtLink{}
	closed := c.mu.closed
	c.mu.Unlock()
	for _, l := range outs {
		l.stop()
	}
	requeue(unsettled, pending)
	if !closed {
		end := &frame.End{}
		if e != nil {
			end.Error = e.frameError()
		}
		c.send(s.channel, end)
	}
}

// endSessions ends every session when the connection ends.
func (c *conn) endSessions() {
	c.mu.Lock()
	c.mu.closed = true
	ss := make([]*session, 0, len(c.mu.sessions))
	for _, s := range c.mu.sessions {
		ss = append(ss, s)
	}
	c.mu.Unlock()
	for _, s := range ss {
		s.end(nil)
	}
}

// requeue gives back the deliveries that were not settled.
func requeue(unsettled map[uint32]*outDelivery, pending []*outDelivery) {
	for _, d := range unsettled {
		d.settler.Requeue(d.id)
	}
	for _, d := range pending {
		if d.mgmt == nil && !d.link.noAck {
			d.settler.Requeue(d.id)
		}
	}
}

// sessionFlowLocked fills in f's session fields.
// REQUIRES: c.mu held.
func (s *session) sessionFlowLocked(f *frame.Flow) {
	f.NextIncomingID, f.HasNextIncomingID = s.nextIncomingID, true
	f.IncomingWindow = s.incomingWindow
	f.NextOutgoingID = s.nextOutgoingID
	f.OutgoingWindow = math.MaxUint32
}

// flow handles the client's flow: the session's window, and a link's
// credit.
func (s *session) flow(f *frame.Flow) error {
	c := s.c
	c.mu.Lock()
	if f.HasNextIncomingID {
		s.remoteIncomingID = f.NextIncomingID
	}
	s.remoteIncomingWind = f.IncomingWindow
	s.remoteOutgoingWind = f.OutgoingWindow
	if !f.HasHandle {
		acks := s.sendPendingLocked()
		if f.Echo {
			var reply frame.Flow
			s.sessionFlowLocked(&reply)
			c.send(s.channel, &reply)
		}
		c.mu.Unlock()
		ackAll(acks)
		return nil
	}
	if l := s.outs[f.Handle]; l != nil {
		drain := l.creditLocked(f)
		acks := s.sendPendingLocked()
		sub := l.sub
		c.mu.Unlock()
		ackAll(acks)
		if drain {
			go l.drain(sub)
		}
		return nil
	}
	if l := s.in[f.Handle]; l != nil {
		// A sender's flow (delivery-count, available); Warren's credit
		// is its own to give. Echo asks for Warren's state.
		if f.Echo {
			s.inLinkFlowLocked(l)
		}
		c.mu.Unlock()
		return nil
	}
	if l, out := s.mgmtOut[f.Handle]; out || s.mgmtIn[f.Handle] != nil {
		if !out {
			l = s.mgmtIn[f.Handle]
		}
		s.mgmtLinkFlowLocked(l, out, f)
		acks := s.sendPendingLocked()
		c.mu.Unlock()
		ackAll(acks)
		return nil
	}
	c.mu.Unlock()
	s.end(&amqpError{cond: frame.CondUnattachedHandle, desc: fmt.Sprintf("Unattached handle: %d", f.Handle)})
	return nil
}

// disposition settles deliveries Warren sent (role receiver: the client
// is the receiver); the client's dispositions of what it sent are
// ignored, Warren settles those itself.
func (s *session) disposition(d *frame.Disposition) {
	if d.Role != frame.RoleReceiver {
		return
	}
	last := d.Last
	if last < d.First {
		last = d.First
	}
	c := s.c
	c.mu.Lock()
	var done []*outDelivery
	for id := d.First; ; id++ {
		if od, ok := s.unsettled[id]; ok {
			delete(s.unsettled, id)
			done = append(done, od)
		}
		if id == last {
			break
		}
	}
	c.mu.Unlock()
	for _, od := range done {
		od.settle(d.State)
	}
}

// attach answers an attach: a client sender is Warren's receiving link
// (publish.go), a client receiver its sending link (consume.go). A
// refused link is attached with a null terminus and detached at once
// with the error, as the spec (§2.6.3) and RabbitMQ do.
func (s *session) attach(a *frame.Attach) error {
	c := s.c
	c.mu.Lock()
	_, inUse := s.in[a.Handle]
	_, outUse := s.outs[a.Handle]
	inUse = inUse || s.gone[a.Handle]
	_, mgmtInUse := s.mgmtIn[a.Handle]
	_, mgmtOutUse := s.mgmtOut[a.Handle]
	c.mu.Unlock()
	if inUse || outUse || mgmtInUse || mgmtOutUse {
		s.end(&amqpError{cond: frame.CondHandleInUse, desc: fmt.Sprintf("Handle %d in use", a.Handle)})
		return nil
	}
	if a.Handle > s.handleMax {
		return &amqpError{cond: frame.CondFramingError, desc: fmt.Sprintf("link handle %d exceeds maximum link handle %d", a.Handle, s.handleMax)}
	}
	var err *amqpError
	if isMgmtAttach(a) {
		err = s.attachMgmt(a)
	} else if a.Role == frame.RoleSender {
		err = s.attachIn(a)
	} else {
		err = s.attachOut(a)
	}
	if err == nil {
		return nil
	}
	c.log.Debug("link refused", "name", a.Name, "condition", err.cond, "description", err.desc)
	reply := &frame.Attach{Name: a.Name, Handle: a.Handle, SndSettleMode: a.SndSettleMode, RcvSettleMode: a.RcvSettleMode}
	if a.Role == frame.RoleSender {
		reply.Role, reply.Source = frame.RoleReceiver, a.Source
	} else {
		reply.Role, reply.Target = frame.RoleSender, a.Target
		reply.HasInitialDeliveryCount = true
	}
	c.send(s.channel, reply)
	c.send(s.channel, &frame.Detach{Handle: a.Handle, Closed: true, Error: err.frameError()})
	return nil
}

// detach answers a detach: the link goes, its unsettled deliveries are
// requeued.
func (s *session) detach(d *frame.Detach) {
	c := s.c
	c.mu.Lock()
	var l *outLink
	if l = s.outs[d.Handle]; l != nil {
		delete(s.outs, d.Handle)
	}
	var unsettled map[uint32]*outDelivery
	var pending []*outDelivery
	if l != nil {
		unsettled = map[uint32]*outDelivery{}
		for id, od := range s.unsettled {
			if od.link == l {
				unsettled[id] = od
				delete(s.unsettled, id)
			}
		}
		keep := s.pending[:0]
		for _, od := range s.pending {
			if od.link == l {
				pending = append(pending, od)
			} else {
				keep = append(keep, od)
			}
		}
		s.pending = keep
	}
	_, wasIn := s.in[d.Handle]
	delete(s.in, d.Handle)
	delete(s.gone, d.Handle)
	wasMgmt := s.detachMgmtLocked(d.Handle)
	ended := s.ended
	c.mu.Unlock()
	if l != nil {
		l.stop()
		requeue(unsettled, pending)
	}
	if !ended && (l != nil || wasIn || wasMgmt) {
		c.send(s.channel, &frame.Detach{Handle: d.Handle, Closed: d.Closed})
	}
}

// detachLink detaches a link on Warren's side with an error (the link
// stays known until the client's detach).
// REQUIRES: c.mu held.
func (s *session) detachLinkLocked(handle uint32, e *amqpError) {
	delete(s.in, handle)
	if s.gone == nil {
		s.gone = map[uint32]bool{}
	}
	s.gone[handle] = true
	s.c.send(s.channel, &frame.Detach{Handle: handle, Closed: true, Error: e.frameError()})
}

// reopenAfterAlarm waits for the alarms to clear and opens the session's
// incoming window again with a flow.
func (s *session) reopenAfterAlarm() {
	c := s.c
	if !c.broker.Alarms().Wait(c.stop) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended || !s.alarmed || c.mu.closed {
		return
	}
	s.alarmed = false
	s.incomingWindow = DefaultMaxIncomingWindow
	var f frame.Flow
	s.sessionFlowLocked(&f)
	c.send(s.channel, &f)
}

// deliveryTag is the tag of delivery id: its 4 bytes.
func deliveryTag(id uint32) []byte { return binary.BigEndian.AppendUint32(nil, id) }

// countFrames counts the frames in b (whole frames, as appended).
func countFrames(b []byte) uint32 {
	n := uint32(0)
	for len(b) >= frame.HeaderSize {
		size := binary.BigEndian.Uint32(b)
		if size < frame.HeaderSize || int(size) > len(b) {
			break
		}
		b = b[size:]
		n++
	}
	return n
}

// ackAll acks deliveries sent pre-settled.
func ackAll(ds []*outDelivery) {
	for _, d := range ds {
		d.settler.Ack(d.id)
	}
}
