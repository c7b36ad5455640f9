package amqp1

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/msgconv"
	"github.com/warren-mq/warren/queues"
)

// Consuming: a client's receiving link is Warren's sending link, from a
// source "/queues/:queue" of any type, consumed through
// Broker.Consume as a credited consumer: the queue delivers as many
// messages as the client's link credit (a drain uses up what the queue
// cannot fill). snd-settle-mode settled sends pre-settled transfers
// (acknowledged as sent); otherwise the client's dispositions settle:
// accepted acks, released and modified requeue (modified with
// undeliverable-here dead-letters), rejected dead-letters or drops.
// Classic and quorum messages are converted to AMQP 1.0
// (msgconv.AppendAMQP10); stream records go as stored with the
// x-stream-offset annotation added. A stream source takes RabbitMQ's
// filters (filter.go): rabbitmq:stream-offset-spec (first, last, next, an
// offset, a timestamp), the Bloom filter's rabbitmq:stream-filter and
// rabbitmq:stream-match-unfiltered, and the property filter expressions
// amqp:properties-filter and amqp:application-properties-filter, which
// select messages one by one before they take credit.

// streamOffsetFilter is the filter key (and descriptor) of a stream
// source's start.
const streamOffsetFilter = "rabbitmq:stream-offset-spec"

// outLink is a sending link (the client receives). Guarded by conn.mu.
type outLink struct {
	s             *session
	handle        uint32
	queue         string
	qtype         queues.QType
	noAck         bool // snd-settle-mode settled
	stream        bool
	sub           queues.CreditedSubscription // set after attach; never changed
	deliveryCount uint32                      // transfers sent
	credit        uint32                      // the client's remaining credit
	pending       int                         // deliveries waiting for the session window
	detached      bool
	name, addr    string     // the link's name and source address, for the API
	maxMsg        uint64     // the client's max-message-size, for the API
	filter        amqp10.Map // the source filters in force (echoed at attach)
}

// outDelivery is a message on its way to the client, or sent and not
// yet settled.
type outDelivery struct {
	link    *outLink
	settler queues.Settler
	id      uint64 // the queue's
	payload []byte
	mgmt    *mgmtLink // instead of link: a management response, sent settled (management.go)
}

// attachOut attaches a client's receiver.
func (s *session) attachOut(a *frame.Attach) *amqpError {
	c := s.c
	if a.Source == nil {
		return &amqpError{cond: frame.CondInvalidField, desc: "Attach refused: source_required"}
	}
	if a.Source.Dynamic {
		return s.attachVolatile(a)
	}
	queue, err := parseQueue(a.Source.Address)
	if err != nil {
		return &amqpError{cond: frame.CondInvalidField, desc: fmt.Sprintf("Attach refused: {bad_address,<<\"%s\">>}", a.Source.Address)}
	}
	if err := c.broker.CheckPermission(c.user, c.vhost, queues.PermRead, queue); err != nil {
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("read access to queue '%s' in vhost '%s' refused for user '%s'", queue, c.vhost, c.user)}
	}
	q, stream := c.broker.LookupDestination(c.vhost, queue)
	var remoteType string // a queue another node runs, through the proxy
	if q == nil && stream == nil {
		def, _, placed := c.broker.PlacedQueue(c.vhost, queue)
		if !placed {
			return &amqpError{cond: frame.CondNotFound, desc: fmt.Sprintf("no queue '%s' in vhost '%s'", queue, c.vhost)}
		}
		remoteType = def.Type
	}
	// A stream-offset filter on a classic or quorum queue that keeps its
	// history makes a history reader (queues/history_consume.go), which
	// the link serves as a stream's; without history the filter is
	// dropped, as before.
	history := q != nil && q.HistoryEnabled() && hasOffsetFilter(a.Source.Filter)
	l := &outLink{s: s, handle: a.Handle, queue: queue, noAck: a.SndSettleMode == frame.SndSettled, stream: stream != nil || history,
		name: a.Name, addr: a.Source.Address, maxMsg: a.MaxMessageSize}
	switch {
	case stream != nil:
		l.qtype = queues.QTStream
	case q == nil:
		l.qtype = queues.QTypeOf(remoteType)
	case q.Quorum():
		l.qtype = queues.QTQuorum
	default:
		l.qtype = queues.QTClassic
	}
	// A stream source takes the filters (filter.go), echoed as in place;
	// other queues take none, and the reply's filter-set says so.
	var sf sourceFilters
	src := *a.Source
	src.Filter = nil
	if l.stream {
		var aerr *amqpError
		if sf, aerr = parseSourceFilters(a.Source.Filter); aerr != nil {
			return aerr
		}
		src.Filter = sf.echo
	}
	var match func([]byte) bool
	if sf.prop != nil {
		match = sf.prop.match
	}
	l.filter = src.Filter
	sub, err := c.broker.Consume(c.vhost, queue, queues.ConsumerOptions{
		Tag:      "ctag-" + strconv.FormatUint(uint64(a.Handle), 10),
		NoAck:    l.noAck && !l.stream,
		Owner:    c,
		Sink:     l,
		Credited: true,
		Match:    match,
	}, sf.args)
	if err != nil {
		cond := frame.CondInternalError
		if qe := queues.AsError(err); qe != nil {
			switch qe.Code {
			case queues.CodeNotFound:
				cond = frame.CondNotFound
			case queues.CodeResourceLocked:
				cond = frame.CondResourceLocked
			case queues.CodeAccessRefused:
				cond = frame.CondUnauthorizedAccess
			case queues.CodePreconditionFailed:
				cond = frame.CondPreconditionFailed
			case queues.CodeNotImplemented:
				cond = frame.CondNotImplemented
			}
		}
		return &amqpError{cond: cond, desc: errText(err)}
	}
	cs, ok := sub.(queues.CreditedSubscription)
	if !ok {
		sub.Stop()
		return &amqpError{cond: frame.CondInternalError, desc: "consumer without credit"}
	}
	sndMode := frame.SndUnsettled
	if l.noAck {
		sndMode = frame.SndSettled
	}
	var caps []amqp10.Symbol
	if l.stream {
		caps = []amqp10.Symbol{capPropertyFilters} // as rabbit_stream_queue's amqp_capabilities
	}
	c.mu.Lock()
	l.sub = cs
	if s.ended {
		c.mu.Unlock()
		cs.Stop()
		return nil
	}
	s.outs[a.Handle] = l
	c.send(s.channel, &frame.Attach{
		Name:                    a.Name,
		Handle:                  a.Handle,
		Role:                    frame.RoleSender,
		SndSettleMode:           sndMode,
		RcvSettleMode:           a.RcvSettleMode,
		Source:                  &src,
		Target:                  a.Target,
		InitialDeliveryCount:    0,
		HasInitialDeliveryCount: true,
		MaxMessageSize:          a.MaxMessageSize,
		OfferedCapabilities:     caps,
	})
	c.mu.Unlock()
	return nil
}

// offsetArg converts a rabbitmq:stream-offset-spec filter value to the
// x-stream-offset argument Broker.Consume reads.
func offsetArg(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case amqp10.Symbol:
		return string(v), true
	case int64:
		return v, true
	case uint64:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint32:
		return int64(v), true
	case amqp10.Timestamp:
		return time.UnixMilli(int64(v)), true
	}
	return nil, false
}

// creditLocked applies the client's flow to the link's credit (§2.6.7)
// and tells the queue; it reports whether the client asks to drain.
// REQUIRES: c.mu held.
func (l *outLink) creditLocked(f *frame.Flow) bool {
	if !f.HasLinkCredit {
		return false
	}
	dc := l.deliveryCount
	if f.HasDeliveryCount {
		dc = f.DeliveryCount
	}
	credit := int64(dc) + int64(f.LinkCredit) - int64(l.deliveryCount)
	l.credit = uint32(max(credit, 0))
	l.sub.SetCredit(max(int(l.credit)-l.pending, 0))
	if f.Echo && !f.Drain {
		l.flowLocked(false)
	}
	return f.Drain
}

// flowLocked sends the link's state.
// REQUIRES: c.mu held.
func (l *outLink) flowLocked(drain bool) {
	f := &frame.Flow{
		Handle: l.handle, HasHandle: true,
		DeliveryCount: l.deliveryCount, HasDeliveryCount: true,
		LinkCredit: l.credit, HasLinkCredit: true,
		Drain: drain,
	}
	l.s.sessionFlowLocked(f)
	l.s.c.send(l.s.channel, f)
}

// drain uses up the credit the queue cannot fill, then tells the client
// (core §2.6.7: the delivery-count advances by the unused credit). It
// runs on its own goroutine: the queue may wait for its dispatcher.
func (l *outLink) drain(sub queues.CreditedSubscription) {
	sub.DrainCredit()
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.detached || l.s.ended || c.mu.closed {
		return
	}
	if unused := int(l.credit) - l.pending; unused > 0 {
		l.deliveryCount += uint32(unused)
		l.credit -= uint32(unused)
	}
	l.flowLocked(true)
}

// stop ends the link's consumer. It waits for a delivery in progress:
// never call it with conn.mu held.
func (l *outLink) stop() {
	c := l.s.c
	c.mu.Lock()
	l.detached = true
	sub := l.sub
	c.mu.Unlock()
	if sub != nil {
		sub.Stop()
	}
}

// Deliver implements queues.Sink: it converts the message and sends it,
// or queues it while the session's window is closed. It is called from
// the queue's dispatcher and does not wait for the client.
func (l *outLink) Deliver(d *queues.Delivery) {
	c := l.s.c
	payload := l.convert(d)
	settler := d.Settler()
	c.ctr.Deliver(l.qtype, false, l.noAck, d.Redelivered)
	c.mu.Lock()
	if l.detached || l.s.ended {
		c.mu.Unlock()
		if !l.noAck || l.stream {
			settler.Requeue(d.ID)
		}
		return
	}
	s := l.s
	s.pending = append(s.pending, &outDelivery{link: l, settler: settler, id: d.ID, payload: payload})
	l.pending++
	acks := s.sendPendingLocked()
	c.mu.Unlock()
	ackAll(acks)
}

// Cancelled implements queues.Sink: the queue went. The link is detached
// with RabbitMQ's resource-deleted.
func (l *outLink) Cancelled(_ *queues.Queue, _ string) {
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.detached || l.s.ended || c.mu.closed {
		return
	}
	l.detached = true
	delete(l.s.outs, l.handle)
	c.send(l.s.channel, &frame.Detach{Handle: l.handle, Closed: true, Error: &frame.Error{Condition: frame.CondResourceDeleted}})
}

// hasOffsetFilter reports whether a source's filter has a stream-offset
// filter.
func hasOffsetFilter(f amqp10.Map) bool {
	for _, e := range f {
		k, _ := e.Key.(amqp10.Symbol)
		if d, ok := e.Value.(amqp10.Described); ok && (k == streamOffsetFilter || d.Descriptor == amqp10.Symbol(streamOffsetFilter)) {
			return true
		}
	}
	return false
}

// convert encodes a delivery as the AMQP 1.0 message sent.
func (l *outLink) convert(d *queues.Delivery) []byte {
	if d.Stream != nil && !d.History { // a queue's history reads queue records: below
		var m amqp10.Message
		if err := m.UnmarshalBinary(d.Body); err != nil || m.Body.Kind == amqp10.BodyNone {
			m = amqp10.Message{Body: amqp10.Body{Kind: amqp10.BodyData, Data: [][]byte{d.Body}}}
		}
		anns := amqp10.Map{{Key: amqp10.Symbol("x-stream-offset"), Value: int64(d.ID)}}
		for _, e := range m.MessageAnnotations {
			if k, ok := e.Key.(amqp10.Symbol); !ok || k != "x-stream-offset" {
				anns = append(anns, e)
			}
		}
		m.MessageAnnotations = anns
		out, err := m.AppendTo(nil)
		if err == nil {
			return out
		}
		return amqp10.AppendBinary(amqp10.AppendDescriptor(nil, amqp10.DescData), d.Body)
	}
	// The delivery count goes in the header, not as 0-9-1's
	// x-delivery-count header (RabbitMQ 4.x).
	out, _, err := msgconv.AppendAMQP10Delivery(nil, d.Exchange, d.RoutingKey, queues.AnnotatedProps(nil, d), d.AMQP10Props, d.Body, d.Redelivered, d.DeliveryCount)
	if err != nil {
		return amqp10.AppendBinary(amqp10.AppendDescriptor(nil, amqp10.DescData), d.Body)
	}
	if d.History {
		return historyOffset(out, d.ID)
	}
	return out
}

// historyOffset moves a queue history delivery's offset from its
// x-stream-offset header (an application property once converted) to
// the x-stream-offset message annotation, where a stream's deliveries
// carry it.
func historyOffset(msg []byte, offset uint64) []byte {
	var m amqp10.Message
	if err := m.UnmarshalBinary(msg); err != nil {
		return msg
	}
	props := m.ApplicationProperties[:0:0]
	for _, e := range m.ApplicationProperties {
		if k, ok := e.Key.(string); !ok || k != "x-stream-offset" {
			props = append(props, e)
		}
	}
	m.ApplicationProperties = props
	anns := amqp10.Map{{Key: amqp10.Symbol("x-stream-offset"), Value: int64(offset)}}
	for _, e := range m.MessageAnnotations {
		if k, ok := e.Key.(amqp10.Symbol); !ok || k != "x-stream-offset" {
			anns = append(anns, e)
		}
	}
	m.MessageAnnotations = anns
	out, err := m.AppendTo(nil)
	if err != nil {
		return msg
	}
	return out
}

// sendPendingLocked sends the waiting deliveries the client's incoming
// window and each link's credit allow, in order; it returns the
// pre-settled ones, to ack once the lock is released.
// REQUIRES: c.mu held.
func (s *session) sendPendingLocked() []*outDelivery {
	c := s.c
	if c.mu.closed {
		return nil // no frames after close: what waits is requeued when the sessions end
	}
	var acks []*outDelivery
	i := 0
	for ; i < len(s.pending); i++ {
		od := s.pending[i]
		l := od.link
		window := int64(s.remoteIncomingID) + int64(s.remoteIncomingWind) - int64(s.nextOutgoingID)
		if window <= 0 {
			break
		}
		id := s.nextDeliveryID
		t := &frame.Transfer{
			DeliveryID: id, HasDeliveryID: true,
			DeliveryTag:   deliveryTag(id),
			MessageFormat: 0, HasMessageFormat: true,
		}
		if od.mgmt != nil {
			// A management response: its link's count and credit were
			// taken when it was queued.
			t.Handle, t.Settled = od.mgmt.handle, true
		} else {
			t.Handle, t.Settled = l.handle, l.noAck
		}
		var frames uint32
		var err error
		c.out.frames(func(b []byte) []byte {
			start := len(b)
			b, err = frame.AppendTransferFrames(b, s.channel, t, od.payload, c.peerMaxFrame)
			frames = countFrames(b[start:])
			return b
		})
		if err != nil {
			c.log.Error("transfer", "err", err)
		}
		s.nextDeliveryID++
		s.nextOutgoingID += frames
		if od.mgmt != nil {
			continue
		}
		l.pending--
		l.deliveryCount++
		if l.credit > 0 {
			l.credit--
		}
		od.payload = nil
		if l.noAck {
			acks = append(acks, od)
		} else {
			s.unsettled[id] = od
		}
	}
	s.pending = s.pending[i:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
	return acks
}

// settle applies the client's outcome to a delivery as RabbitMQ 4.x
// does: accepted acks; released requeues without counting the delivery
// (delivery limit, delivery-count); modified requeues, counting it only
// with delivery-failed, and dead-letters with undeliverable-here;
// rejected dead-letters (or drops). A settlement without an outcome
// counts as accepted.
func (od *outDelivery) settle(state frame.DeliveryState) {
	switch st := state.(type) {
	case frame.Released:
		od.settler.Release(od.id)
	case frame.Modified:
		if a, ok := od.settler.(annotator); ok && len(st.MessageAnnotations) > 0 && !st.UndeliverableHere {
			a.Annotate(od.id, annotationHeaders(st.MessageAnnotations))
		}
		switch {
		case st.UndeliverableHere:
			od.settler.Discard(od.id)
		case st.DeliveryFailed:
			od.settler.Requeue(od.id)
		default:
			od.settler.Release(od.id)
		}
	case frame.Rejected:
		od.settler.Discard(od.id)
	default:
		od.settler.Ack(od.id)
		od.link.s.c.ctr.Delivery[od.link.qtype].Acknowledged.Add(1)
	}
}

// annotator is a queue that keeps a modified outcome's message
// annotations on the message (a quorum queue; classic queues ignore
// them, as RabbitMQ's do).
type annotator interface {
	Annotate(id uint64, hs []queues.HeaderEntry)
}

// annotationHeaders converts a modified outcome's message annotations
// to the 0-9-1 headers the queue keeps: "x-" keys only (the spec
// reserves the others, and RabbitMQ takes only those), values as the
// message conversion converts annotations (an x- header goes back to a
// 1.0 consumer as a message annotation).
func annotationHeaders(m amqp10.Map) []queues.HeaderEntry {
	var hs []queues.HeaderEntry
	for _, e := range m {
		k, ok := e.Key.(amqp10.Symbol)
		if !ok || !strings.HasPrefix(string(k), "x-") {
			continue
		}
		v, ok := msgconv.ValueTo091(e.Value)
		if !ok {
			continue
		}
		raw, err := amqptab.AppendTable(nil, amqptab.Table{string(k): v})
		if err != nil {
			continue
		}
		_ = amqptab.ScanTable(raw, func(key []byte, tag byte, val []byte) error {
			hs = append(hs, queues.HeaderEntry{Key: string(key), Raw: amqptab.AppendRaw(nil, tag, val)})
			return nil
		})
	}
	return hs
}
