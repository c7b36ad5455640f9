package amqp1

import (
	"fmt"
	"sync/atomic"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/flow"
	"github.com/warren-mq/warren/internal/msgconv"
	"github.com/warren-mq/warren/queues"
)

// Publishing: a client's sending link is Warren's receiving link. Its
// target is fixed at attach (an exchange and key, or a queue) or null,
// each message's "to" naming it then. Warren grants DefaultMaxLinkCredit
// and tops it up when half is used. A message is reassembled from its
// transfers (up to MaxMessageSize), converted and routed: classic and
// quorum queues store it as the AMQP 0-9-1 record (msgconv.To091),
// streams as the AMQP 1.0 message with RabbitMQ's x-exchange and
// x-routing-key annotations. An unsettled delivery is settled with
// accepted once every queue has stored it (as 0-9-1 confirms: a durable
// message in a durable queue once fsynced), released when it routed
// nowhere, rejected when a queue failed it or (null target) its "to" is
// bad.

// inLink is a receiving link (the client sends). Guarded by conn.mu;
// the reassembly fields are the reader goroutine's.
type inLink struct {
	handle        uint32
	name          string
	anonymous     bool   // null target: each message's "to"
	tgt           target // otherwise
	settled       bool   // snd-settle-mode settled: every transfer is settled
	deliveryCount uint32
	credit        uint32
	addr          string                 // the target's address, for the API
	sndMode       frame.SenderSettleMode // as attached, for the API
	unconfirmed   atomic.Int32           // unsettled messages not yet stored

	// Reassembly of a multi-transfer delivery (the reader goroutine's).
	asm        []byte
	asmActive  bool
	asmID      uint32
	asmSettled bool
}

// attachIn attaches a client's sender.
func (s *session) attachIn(a *frame.Attach) *amqpError {
	c := s.c
	if a.Target == nil {
		return &amqpError{cond: frame.CondInvalidField, desc: "Attach refused: target is missing"}
	}
	if a.Target.Coordinator {
		return &amqpError{cond: frame.CondNotImplemented, desc: "Transactions not supported"}
	}
	l := &inLink{handle: a.Handle, name: a.Name, settled: a.SndSettleMode == frame.SndSettled, deliveryCount: a.InitialDeliveryCount,
		addr: a.Target.Address, sndMode: a.SndSettleMode}
	if a.Target.Address == "" {
		l.anonymous = true
	} else {
		t, err := parseTarget(a.Target.Address)
		if err != nil {
			return &amqpError{cond: frame.CondInvalidField, desc: fmt.Sprintf("Attach refused: {bad_address_string,<<\"%s\">>}", a.Target.Address)}
		}
		if e := c.checkWrite(t.exchange); e != nil {
			return e
		}
		if queues.IsReplyName(t.queue) {
			if _, ok := c.broker.Replies().Lookup(c.vhost, t.queue); !ok {
				return &amqpError{cond: frame.CondNotFound, desc: fmt.Sprintf("no queue '%s' in vhost '%s'", t.queue, c.vhost)}
			}
		} else if t.queue != "" {
			if _, ok := c.broker.Destination(c.vhost, t.queue); !ok {
				return &amqpError{cond: frame.CondNotFound, desc: fmt.Sprintf("no queue '%s' in vhost '%s'", t.queue, c.vhost)}
			}
		} else if _, err := c.broker.Exchange(c.vhost, t.exchange); err != nil {
			return &amqpError{cond: frame.CondNotFound, desc: errText(err)}
		}
		l.tgt = t
	}
	l.credit = DefaultMaxLinkCredit
	c.mu.Lock()
	defer c.mu.Unlock()
	s.in[a.Handle] = l
	c.send(s.channel, &frame.Attach{
		Name:           a.Name,
		Handle:         a.Handle,
		Role:           frame.RoleReceiver,
		SndSettleMode:  a.SndSettleMode,
		RcvSettleMode:  frame.RcvFirst,
		Source:         a.Source,
		Target:         a.Target,
		MaxMessageSize: c.cfg.MaxMessageSize,
	})
	s.inLinkFlowLocked(l)
	return nil
}

// inLinkFlowLocked sends the link's credit.
// REQUIRES: c.mu held.
func (s *session) inLinkFlowLocked(l *inLink) {
	f := &frame.Flow{
		Handle: l.handle, HasHandle: true,
		DeliveryCount: l.deliveryCount, HasDeliveryCount: true,
		LinkCredit: l.credit, HasLinkCredit: true,
	}
	s.sessionFlowLocked(f)
	s.c.send(s.channel, f)
}

// checkWrite checks the write permission on an exchange ("" is
// amq.default), as RabbitMQ does at attach and per "to".
func (c *conn) checkWrite(exchange string) *amqpError {
	res := exchange
	if res == "" {
		res = "amq.default"
	}
	if err := c.broker.CheckPermission(c.user, c.vhost, queues.PermWrite, res); err != nil {
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("write access to exchange '%s' in vhost '%s' refused for user '%s'", res, c.vhost, c.user)}
	}
	return nil
}

// transfer handles a transfer frame (the reader goroutine).
func (s *session) transfer(t *frame.Transfer, payload []byte) error {
	c := s.c
	c.mu.Lock()
	s.nextIncomingID++
	if s.incomingWindow > 0 {
		s.incomingWindow--
	}
	if !s.alarmed && c.broker.Alarms().Active() != 0 {
		// Stop the client sending, as RabbitMQ does: the incoming
		// window closes until the alarms clear.
		s.alarmed, s.incomingWindow = true, 0
		var f frame.Flow
		s.sessionFlowLocked(&f)
		c.send(s.channel, &f)
		go s.reopenAfterAlarm()
	} else if !s.alarmed && s.incomingWindow < DefaultMaxIncomingWindow/2 {
		s.incomingWindow = DefaultMaxIncomingWindow
		var f frame.Flow
		s.sessionFlowLocked(&f)
		c.send(s.channel, &f)
	}
	l := s.in[t.Handle]
	isOut := s.outs[t.Handle] != nil
	gone := s.gone[t.Handle]
	mgmt := s.mgmtIn[t.Handle]
	c.mu.Unlock()
	if l == nil {
		if mgmt != nil {
			return s.mgmtTransfer(mgmt, t, payload)
		}
		if isOut || gone {
			return nil
		}
		s.end(&amqpError{cond: frame.CondUnattachedHandle, desc: fmt.Sprintf("Unattached handle: %d", t.Handle)})
		return nil
	}
	if t.Aborted {
		l.asm, l.asmActive = l.asm[:0], false
		return nil
	}
	msg := payload
	id, settled := t.DeliveryID, t.Settled || l.settled
	if l.asmActive || t.More {
		if !l.asmActive {
			l.asmActive, l.asmID, l.asmSettled = true, t.DeliveryID, settled
			l.asm = l.asm[:0]
		}
		id, settled = l.asmID, l.asmSettled || t.Settled
		if uint64(len(l.asm))+uint64(len(payload)) > c.cfg.MaxMessageSize {
			l.asm, l.asmActive = nil, false
			return s.detachIn(l, &amqpError{cond: frame.CondMessageSizeExceeded, desc: fmt.Sprintf("message size (%d bytes) > maximum message size (%d bytes)", len(l.asm)+len(payload), c.cfg.MaxMessageSize)})
		}
		l.asm = append(l.asm, payload...)
		if t.More {
			return nil
		}
		msg, l.asmActive = l.asm, false
	} else if !t.HasDeliveryID {
		return s.detachIn(l, &amqpError{cond: frame.CondInvalidField, desc: "transfer without delivery-id"})
	}
	if c.credit.Spent() {
		// Publisher flow control, as package amqp's: the reader waits
		// until the log writers have caught up with this connection.
		held, ok := c.credit.Wait(c.kicked)
		if held {
			c.ctr.FlowHolds.Add(1)
		}
		if !ok {
			return errClosed
		}
	}
	if uint64(len(msg)) > c.cfg.MaxMessageSize {
		return s.detachIn(l, &amqpError{cond: frame.CondMessageSizeExceeded, desc: fmt.Sprintf("message size (%d bytes) > maximum message size (%d bytes)", len(msg), c.cfg.MaxMessageSize)})
	}
	err := s.publish(l, id, settled, msg)
	if cap(l.asm) > 1<<20 {
		l.asm = nil // do not keep a large message's buffer
	}
	c.mu.Lock()
	if s.in[l.handle] == l {
		l.deliveryCount++
		if l.credit > 0 {
			l.credit--
		}
		if l.credit <= DefaultMaxLinkCredit/2 {
			l.credit = DefaultMaxLinkCredit
			s.inLinkFlowLocked(l)
		}
	}
	c.mu.Unlock()
	return err
}

// queueDeleted detaches the client's senders whose target is the
// deleted queue, with amqp:resource-deleted, as RabbitMQ 4.x does
// (a broker deletion watcher: it must not block).
func (c *conn) queueDeleted(vhost, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if vhost != c.vhost || c.mu.closed {
		return
	}
	for _, s := range c.mu.sessions {
		if s.ended {
			continue
		}
		for h, l := range s.in {
			if !l.anonymous && l.tgt.queue == name {
				s.detachLinkLocked(h, &amqpError{cond: frame.CondResourceDeleted, desc: fmt.Sprintf("queue '%s' in vhost '%s' deleted", name, vhost)})
			}
		}
	}
}

// detachIn detaches a receiving link with an error.
func (s *session) detachIn(l *inLink, e *amqpError) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.in[l.handle] == l {
		s.detachLinkLocked(l.handle, e)
	}
	return nil
}

// settleIn sends the disposition of a delivery the client sent.
func (s *session) settleIn(id uint32, state frame.DeliveryState) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended || c.mu.closed {
		return
	}
	c.send(s.channel, &frame.Disposition{Role: frame.RoleReceiver, First: id, Last: id, Settled: true, State: state})
}

// publish routes and stores one message.
func (s *session) publish(l *inLink, id uint32, settled bool, msg []byte) error {
	c := s.c
	ctr := &c.ctr
	ctr.Received.Add(1)
	if !settled {
		ctr.ReceivedConfirm.Add(1)
	}
	ctr.ObserveSize(len(msg))
	var m amqp10.Message
	if err := m.UnmarshalBinary(msg); err != nil || m.Body.Kind == amqp10.BodyNone {
		if err == nil {
			err = fmt.Errorf("message without a body")
		}
		return s.detachIn(l, &amqpError{cond: frame.CondDecodeError, desc: fmt.Sprintf("failed to parse message: %v", err)})
	}
	if p := m.Properties; p != nil && p.Set&amqp10.PropUserID != 0 && string(p.UserID) != c.user {
		return s.detachIn(l, &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("user_id property set to '%s' but authenticated user was '%s'", p.UserID, c.user)})
	}
	keys := []string{""}
	if v, ok := m.MessageAnnotations.Symbol("x-cc"); ok {
		// More routing keys, as RabbitMQ's lookup_routing_key reads
		// them: a list of strings.
		cc, good := v.([]any)
		for _, k := range cc {
			key, isStr := k.(string)
			if !isStr {
				good = false
				break
			}
			keys = append(keys, key)
		}
		if !good {
			e := &amqpError{cond: frame.CondInvalidField, desc: fmt.Sprintf("bad value for 'x-cc' message-annotation: %v", v)}
			if l.anonymous && !settled {
				s.settleIn(id, frame.Rejected{Error: e.frameError()})
				return nil
			}
			return s.detachIn(l, e)
		}
	}
	tgt := l.tgt
	if l.anonymous {
		var e *amqpError
		if tgt, e = c.anonymousTarget(&m); e != nil {
			if e.cond == frame.CondUnauthorizedAccess {
				return s.detachIn(l, e)
			}
			if settled {
				return s.detachIn(l, e)
			}
			s.settleIn(id, frame.Rejected{Error: e.frameError()})
			return nil
		}
	}
	d := msgconv.MessageTo091(&m, nil) // m has a body: checked above
	pv, err := wire.ScanProperties(d.Props)
	if err != nil {
		return s.detachIn(l, &amqpError{cond: frame.CondDecodeError, desc: fmt.Sprintf("failed to convert message: %v", err)})
	}
	if tgt.exchange == "" && queues.IsReplyName(tgt.key) {
		s.publishReply(tgt.key, settled, id, d.Props, d.Body)
		return nil
	}
	if err := c.broker.CheckTopicPermission(c.user, c.vhost, tgt.exchange, queues.PermWrite, tgt.key); err != nil {
		return s.detachIn(l, &amqpError{cond: frame.CondUnauthorizedAccess, desc: errText(err)})
	}
	keys[0] = tgt.key
	rm := queues.RoutingMessage{Keys: keys, Props: queues.RoutingProps{
		MessageID: pv.MessageID, CorrelationID: pv.CorrelationID,
		Timestamp: pv.Timestamp, HasTimestamp: pv.Flags&wire.FlagTimestamp != 0,
	}}
	if pv.Headers != nil {
		if t, _, err := amqptab.ReadTable(pv.Headers); err == nil {
			rm.Headers = t
		}
	}
	qs, err := c.broker.RouteMessage(c.vhost, tgt.exchange, &rm, nil)
	if err != nil {
		// The exchange went since attach (or a "to" names none).
		e := &amqpError{cond: frame.CondNotFound, desc: errText(err)}
		if l.anonymous && !settled {
			s.settleIn(id, frame.Rejected{Error: e.frameError()})
			return nil
		}
		if !settled {
			s.settleIn(id, frame.Released{})
		}
		return s.detachIn(l, e)
	}
	var dsts []queues.Destination
	for _, name := range qs {
		if dst, ok := c.broker.Destination(c.vhost, name); ok {
			dsts = append(dsts, dst)
		}
	}
	if len(dsts) == 0 {
		ctr.UnroutableDropped.Add(1)
		if !settled {
			s.settleIn(id, frame.Released{})
		}
		return nil
	}
	ctr.Routed.Add(1)
	persistent := pv.Flags&wire.FlagDeliveryMode != 0 && pv.DeliveryMode == 2
	// The properties section goes in the record as published, for 1.0
	// consumers (0-9-1 ones read Props): RabbitMQ 4.x keeps the 1.0
	// message whole.
	var props10 []byte
	if m.Properties != nil && m.Properties.Set != 0 {
		props10, _ = m.Properties.AppendTo(nil)
	}
	rec := queues.EncodeRecord(nil, &queues.Message{Exchange: tgt.exchange, RoutingKey: tgt.key, Props: d.Props, AMQP10Props: props10, Body: d.Body, Persistent: persistent})
	pd := &pubDone{s: s, link: l, id: id, settled: settled, credit: int64(len(msg)) + flow.MessageOverhead}
	if !settled {
		l.unconfirmed.Add(1)
	}
	pd.remaining.Store(int32(len(dsts)))
	c.credit.Take(pd.credit)
	sm := &streamMessage{m: &m, exchange: tgt.exchange, key: tgt.key}
	queues.Publish(dsts, &queues.Publishing{Record: rec, Persistent: persistent, Stream: sm, SizeHint: len(msg)}, pd.complete)
	return nil
}

// anonymousTarget resolves a message's "to" for a link with a null
// target, as RabbitMQ's lookup_target does.
func (c *conn) anonymousTarget(m *amqp10.Message) (target, *amqpError) {
	if m.Properties == nil || m.Properties.Set&amqp10.PropTo == 0 {
		return target{}, &amqpError{cond: frame.CondPreconditionFailed, desc: "anonymous terminus requires 'to' address to be set"}
	}
	to := m.Properties.To
	t, err := parseTarget(to)
	if err != nil {
		return target{}, &amqpError{cond: frame.CondPreconditionFailed, desc: "bad 'to' address string: " + to}
	}
	if e := c.checkWrite(t.exchange); e != nil {
		return target{}, e
	}
	if t.queue == "" {
		if _, err := c.broker.Exchange(c.vhost, t.exchange); err != nil {
			return target{}, &amqpError{cond: frame.CondNotFound, desc: errText(err)}
		}
	}
	return t, nil
}

// pubDone collects the stores of one message and settles it.
type pubDone struct {
	s         *session
	link      *inLink
	id        uint32
	settled   bool
	credit    int64 // taken from the connection's publish credit
	remaining atomic.Int32
	failed    atomic.Bool
}

// complete is one destination's outcome (any goroutine).
func (p *pubDone) complete(err error) {
	if err != nil {
		p.failed.Store(true)
	}
	if p.remaining.Add(-1) != 0 {
		return
	}
	p.s.c.credit.Give(p.credit)
	if p.settled {
		return
	}
	p.link.unconfirmed.Add(-1)
	if p.failed.Load() {
		p.s.settleIn(p.id, frame.Rejected{Error: &frame.Error{Condition: frame.CondInternalError, Description: "failed to store the message"}})
		return
	}
	p.s.c.ctr.Confirmed.Add(1)
	p.s.settleIn(p.id, frame.Accepted{})
}

// streamMessage is a message published to a stream: the AMQP 1.0
// message itself, with the x-exchange and x-routing-key annotations
// RabbitMQ adds.
type streamMessage struct {
	m             *amqp10.Message
	exchange, key string
}

// AppendStreamMessage implements queues.StreamEncoder.
func (sm *streamMessage) AppendStreamMessage(dst []byte) ([]byte, []byte, error) {
	m := *sm.m
	anns := amqp10.Map{
		{Key: amqp10.Symbol("x-exchange"), Value: sm.exchange},
		{Key: amqp10.Symbol("x-routing-key"), Value: sm.key},
	}
	var filter []byte
	for _, e := range m.MessageAnnotations {
		if k, ok := e.Key.(amqp10.Symbol); ok && (k == "x-exchange" || k == "x-routing-key") {
			continue
		}
		if k, ok := e.Key.(amqp10.Symbol); ok && k == "x-stream-filter-value" {
			if s, ok := e.Value.(string); ok {
				filter = []byte(s)
			}
		}
		anns = append(anns, e)
	}
	m.MessageAnnotations = anns
	out, err := m.AppendTo(dst)
	return out, filter, err
}
