package amqp1

import (
	"fmt"
	"net/url"
	"slices"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/msgconv"
	"github.com/warren-mq/warren/queues"
)

// Direct reply-to, as RabbitMQ 4.2 supports it for AMQP 1.0 (its
// rabbit_volatile_queue, shared with AMQP 0-9-1; queues.ReplyRegistry
// here):
//
//   - A requester attaches a receiver with a dynamic source, no address,
//     the rabbitmq:volatile-queue capability, expiry-policy link-detach,
//     durable none, timeout 0 and snd-settle-mode settled. The attach
//     Warren answers carries the source address
//     /queues/amq.rabbitmq.reply-to.<token>.<key>; the requester puts it
//     in its requests' reply-to (the server may not change the bare
//     message, so, unlike AMQP 0-9-1, nothing is rewritten).
//   - A responder, of either protocol, replies to that name: AMQP 1.0
//     with the null target and "to" set to the reply-to, or a sender
//     attached to the address (refused with amqp:not-found once the
//     requester's link is gone); AMQP 0-9-1 publishes to the default
//     exchange with the reply-to (converted: the /queues/ prefix goes)
//     as routing key. A 1.0 responder gets a 0-9-1 requester's reply
//     name as /queues/amq.rabbitmq.reply-to.<token>.<key>.
//   - The reply is accepted at once, whether or not the requester is
//     still there, and delivered pre-settled if the requester's link has
//     credit; without credit it is dropped (no buffer, at most once).

// capVolatileQueue is the source capability of a direct reply-to
// receiver.
const capVolatileQueue amqp10.Symbol = "rabbitmq:volatile-queue"

// volatileSub is a direct reply-to receiver's subscription: replies come
// through the broker's registry, not a queue.
type volatileSub struct {
	l    *outLink
	reg  *queues.ReplyRegistry
	name string
}

var (
	_ queues.CreditedSubscription = (*volatileSub)(nil)
	_ queues.ReplySink            = (*volatileSub)(nil)
)

// attachVolatile attaches a requester's receiver with a dynamic source,
// as RabbitMQ's ensure_source does; other dynamic sources are refused.
func (s *session) attachVolatile(a *frame.Attach) *amqpError {
	c := s.c
	src := a.Source
	if !slices.Contains(src.Capabilities, capVolatileQueue) || src.Address != "" ||
		src.Durable != frame.DurableNone || src.ExpiryPolicy != frame.ExpiryLinkDetach ||
		src.Timeout != 0 || a.SndSettleMode != frame.SndSettled {
		return &amqpError{cond: frame.CondNotImplemented, desc: "Dynamic source not supported"}
	}
	l := &outLink{s: s, handle: a.Handle, noAck: true, qtype: queues.QTVolatile}
	vs := &volatileSub{l: l, reg: c.broker.Replies()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended {
		return nil
	}
	vs.name = vs.reg.Register(c.vhost, vs)
	if err := c.broker.CheckPermission(c.user, c.vhost, queues.PermRead, vs.name); err != nil {
		vs.reg.Unregister(vs.name)
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("read access to queue '%s' in vhost '%s' refused for user '%s'", vs.name, c.vhost, c.user)}
	}
	l.queue, l.sub = vs.name, vs
	s.outs[a.Handle] = l
	c.send(s.channel, &frame.Attach{
		Name:          a.Name,
		Handle:        a.Handle,
		Role:          frame.RoleSender,
		SndSettleMode: frame.SndSettled,
		RcvSettleMode: a.RcvSettleMode,
		Source: &frame.Source{
			Address:      "/queues/" + url.PathEscape(vs.name),
			ExpiryPolicy: frame.ExpiryLinkDetach,
			Dynamic:      true,
			DynamicNodeProperties: amqp10.Map{
				{Key: amqp10.Symbol("lifetime-policy"), Value: amqp10.Described{Descriptor: amqp10.Symbol("amqp:delete-on-close:list"), Value: []any{}}},
				{Key: amqp10.Symbol("supported-dist-modes"), Value: amqp10.Array{amqp10.Symbol("move")}},
			},
			DistributionMode: "move",
			Capabilities:     []amqp10.Symbol{capVolatileQueue},
		},
		Target:                  a.Target,
		InitialDeliveryCount:    0,
		HasInitialDeliveryCount: true,
		MaxMessageSize:          a.MaxMessageSize,
	})
	return nil
}

// DeliverReply implements queues.ReplySink: the reply goes to the
// requester if its link has credit, else it is dropped.
func (vs *volatileSub) DeliverReply(exchange, key string, props, body []byte) {
	l := vs.l
	s, c := l.s, l.s.c
	payload, _, err := msgconv.AppendAMQP10(nil, exchange, key, props, body)
	if err != nil {
		c.log.Debug("reply not converted", "err", err)
		return
	}
	c.mu.Lock()
	if l.detached || s.ended || c.mu.closed || int(l.credit)-l.pending <= 0 {
		c.mu.Unlock()
		return
	}
	c.ctr.Deliver(queues.QTVolatile, false, true, false)
	s.pending = append(s.pending, &outDelivery{link: l, settler: noSettler{}, payload: payload})
	l.pending++
	acks := s.sendPendingLocked()
	c.mu.Unlock()
	ackAll(acks)
}

// SetCredit implements queues.CreditedSubscription: the link's credit
// is all there is.
func (vs *volatileSub) SetCredit(int) {}

// DrainCredit implements queues.CreditedSubscription: nothing waits.
func (vs *volatileSub) DrainCredit() int { return 0 }

// Stop implements queues.Subscription: the reply name goes.
func (vs *volatileSub) Stop() { vs.reg.Unregister(vs.name) }

// noSettler settles replies, which are sent pre-settled and kept nowhere.
type noSettler struct{}

func (noSettler) Ack(...uint64)     {}
func (noSettler) Requeue(...uint64) {}
func (noSettler) Release(...uint64) {}
func (noSettler) Discard(...uint64) {}

// publishReply sends a reply to a direct reply-to name: accepted at once,
// delivered if the requester is there.
func (s *session) publishReply(key string, settled bool, id uint32, props, body []byte) {
	c := s.c
	if sink, ok := c.broker.Replies().Lookup(c.vhost, key); ok {
		sink.DeliverReply("", key, props, body)
	}
	c.ctr.Routed.Add(1)
	if !settled {
		c.ctr.Confirmed.Add(1)
		s.settleIn(id, frame.Accepted{})
	}
}
