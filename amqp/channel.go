package amqp

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"sync/atomic"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// chanState is where a channel is in its life.
type chanState uint8

const (
	chanOpen    chanState = iota
	chanClosing           // we sent channel.close; only close/close-ok count
)

// channel is one AMQP channel. The connection's reader goroutine owns
// the fields outside mu; queue dispatchers (delivering) and log writers
// (confirming) reach the channel only through mu and conf.
type channel struct {
	c  *conn
	id uint16

	// publishing is set once the channel has published (RabbitMQ's
	// publishing_mode, which its publishers gauge counts).
	publishing atomic.Bool

	// Owned by the reader goroutine.
	state     chanState
	assembly  assembly // the publish being received
	lastQueue string   // for empty queue names
	prefetch  int      // basic.qos global=false: for consumers created later
	limit     *queues.ChannelLimit
	release   func()           // uncounts the channel from its user's max-channels
	perms     map[permKey]bool // permission checks passed or refused
	tx        *txState         // non-nil once tx.select
	routeBuf  []string
	keyBuf    []string
	targets   []queues.Destination
	pub       queues.Publishing
	streamMsg streamMessage         // the message being published, for queues.Publish
	rm        queues.RoutingMessage // reused per publish
	acks      []pendingAck
	ids       []uint64
	scratch   struct {
		publish wire.BasicPublish
		ack     wire.BasicAck
	}

	conf    confirms
	barrier barrier
	timeout timeoutState // consumer timeout (consumer_timeout.go)

	mu struct {
		sync.Mutex
		closed    bool
		nextTag   uint64
		unacked   []pendingAck // ascending delivery tags
		consumers map[string]*consumer
		reply     *replyConsumer // amq.rabbitmq.reply-to consumer (reply_to.go)
		// While this channel's queue.delete runs, the basic.cancel of its
		// own consumers of that queue wait here, to go after
		// queue.delete-ok (notifyCancelledLocked).
		deferCancels bool
		cancelled    []string
		// Copies of reader-owned state for Info (info.go), set where
		// the reader changes it: basic.qos and tx.select.
		prefetch       int
		globalPrefetch int
		transactional  bool
	}
}

type permKey struct {
	kind     queues.Perm
	resKind  byte // first letter of the resource kind: 'e'xchange, 'q'ueue, ...
	resource string
}

func newChannel(c *conn, id uint16) *channel {
	ch := &channel{c: c, id: id, perms: map[permKey]bool{}, limit: &queues.ChannelLimit{}, release: func() {}}
	ch.mu.consumers = map[string]*consumer{}
	ch.conf.ch = ch
	ch.armTimeout()
	return ch
}

// handleFrame handles a frame for an open channel (or one closing).
func (ch *channel) handleFrame(f wire.Frame) error {
	if ch.state == chanOpen && ch.timeout.fired.Load() {
		ch.timedOut() // closed by the consumer timeout
	}
	if ch.state == chanClosing {
		// Only the close handshake matters now.
		if f.Type != wire.FrameMethod {
			return nil
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return nil
		}
		switch m.(type) {
		case *wire.ChannelCloseOk:
			ch.c.channelClosed(ch.id)
		case *wire.ChannelClose:
			// Crossing closes: the client closed the channel while our
			// close was on its way. Answer it, and go on waiting for
			// the close-ok that answers ours (RabbitMQ's closing state):
			// forgetting the channel now would make that close-ok a
			// frame on an unopened channel.
			ch.c.send(ch.id, &wire.ChannelCloseOk{})
		}
		return nil
	}
	var err error
	switch f.Type {
	case wire.FrameMethod:
		if ch.assembly.active {
			return ch.assembly.unexpected()
		}
		m, derr := ch.decode(f.Payload)
		if derr != nil {
			return decodeError(derr, f)
		}
		if err = ch.handleMethod(m); err != nil {
			// The close names the method that failed, whatever failed
			// in it (a model refusal too): clients match it to the
			// call they are waiting on.
			e, ok := err.(*amqpError)
			if !ok {
				e = fromModel(err)
			}
			err = e.withMethod(m)
		}
	case wire.FrameHeader:
		err = ch.handleHeader(f.Payload)
	case wire.FrameBody:
		err = ch.handleBody(f.Payload)
	default:
		return newError(wire.FrameError, "unknown frame type %d", f.Type)
	}
	if err == nil {
		return nil
	}
	e, ok := err.(*amqpError)
	if !ok {
		e = fromModel(err)
	}
	if e.Hard {
		return e
	}
	if f.Type != wire.FrameMethod {
		// A refused publish (its content completed it): the close names
		// basic.publish, as RabbitMQ's does.
		e = e.withMethod(&wire.BasicPublish{})
	}
	ch.fail(e)
	return e
}

// decode decodes a method, into reused structs for the per-message
// methods (publish, ack) so that the hot path allocates nothing.
func (ch *channel) decode(payload []byte) (wire.Method, error) {
	classID, methodID, args, err := wire.SplitMethod(payload)
	if err != nil || classID != wire.ClassBasic {
		return wire.DecodeMethod(payload)
	}
	var m wire.Method
	switch methodID {
	case wire.MethodBasicPublish:
		m = &ch.scratch.publish
	case wire.MethodBasicAck:
		m = &ch.scratch.ack
	default:
		return wire.DecodeMethod(payload)
	}
	if err := m.ReadArgs(args); err != nil {
		return nil, err
	}
	return m, nil
}

// fail is a channel error: RabbitMQ's channel process ends at once, so
// consumers go and unacked messages are requeued, then channel.close is
// sent and everything but the close handshake is ignored.
func (ch *channel) fail(e *amqpError) {
	ch.c.log.Debug("channel error", "channel", ch.id, "code", e.Code, "text", e.Text)
	ch.shutdown()
	ch.state = chanClosing
	ch.assembly.reset()
	ch.c.send(ch.id, &wire.ChannelClose{ReplyCode: e.Code, ReplyText: e.Text, FailingClassID: e.ClassID, FailingMethodID: e.MethodID})
}

// shutdown ends the channel's consumers and requeues its unacked
// messages in delivery order. It is idempotent.
func (ch *channel) shutdown() {
	ch.mu.Lock()
	if ch.mu.closed {
		ch.mu.Unlock()
		if ch.timeout.fired.Load() {
			ch.timedOut()
		}
		return
	}
	ch.mu.closed = true
	ch.stopTimeoutLocked()
	consumers := ch.mu.consumers
	ch.mu.consumers = map[string]*consumer{}
	unacked := ch.mu.unacked
	ch.mu.unacked = nil
	ch.mu.Unlock()
	if ch.tx != nil {
		// Acks of an uncommitted transaction settled nothing.
		for _, a := range ch.tx.acks {
			unacked = append(unacked, a.acks...)
		}
		ch.tx.reset()
	}
	for _, cs := range consumers {
		cs.stop()
	}
	ch.settle(unacked, settleRequeue)
	ch.conf.close()
}

func (ch *channel) handleMethod(m wire.Method) error {
	switch m := m.(type) {
	case *wire.BasicPublish:
		return ch.startPublish(m)
	case *wire.BasicAck:
		return ch.handleAck(m.DeliveryTag, m.Multiple, settleAck)
	case *wire.BasicNack:
		mode := settleDiscard
		if m.Requeue {
			mode = settleRequeue
		}
		return ch.handleAck(m.DeliveryTag, m.Multiple, mode)
	case *wire.BasicReject:
		mode := settleDiscard
		if m.Requeue {
			mode = settleRequeue
		}
		return ch.handleAck(m.DeliveryTag, false, mode)
	case *wire.BasicConsume:
		return ch.handleConsume(m)
	case *wire.BasicCancel:
		return ch.handleCancel(m)
	case *wire.BasicGet:
		ch.barrier.wait()
		return ch.handleGet(m)
	case *wire.BasicQos:
		return ch.handleQos(m)
	case *wire.BasicRecover:
		if !m.Requeue {
			return newError(wire.NotImplemented, "requeue=false")
		}
		ch.recover()
		ch.c.send(ch.id, &wire.BasicRecoverOk{})
	case *wire.BasicRecoverAsync:
		if !m.Requeue {
			return newError(wire.NotImplemented, "requeue=false")
		}
		ch.recover()
	case *wire.QueueDeclare:
		if handled, err := ch.declareReplyTo(m); handled {
			return err
		}
		ch.barrier.wait()
		return ch.handleQueueDeclare(m)
	case *wire.QueueBind:
		return ch.handleQueueBind(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, m.NoWait, true)
	case *wire.QueueUnbind:
		return ch.handleQueueBind(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, false, false)
	case *wire.QueuePurge:
		ch.barrier.wait()
		return ch.handleQueuePurge(m)
	case *wire.QueueDelete:
		ch.barrier.wait()
		return ch.handleQueueDelete(m)
	case *wire.ExchangeDeclare:
		return ch.handleExchangeDeclare(m)
	case *wire.ExchangeDelete:
		return ch.handleExchangeDelete(m)
	case *wire.ExchangeBind:
		return ch.handleExchangeBind(m.Destination, m.Source, m.RoutingKey, m.Arguments, m.NoWait, true)
	case *wire.ExchangeUnbind:
		return ch.handleExchangeBind(m.Destination, m.Source, m.RoutingKey, m.Arguments, m.NoWait, false)
	case *wire.ConfirmSelect:
		if ch.tx != nil {
			return newError(wire.PreconditionFailed, "cannot switch from tx to confirm mode")
		}
		ch.conf.enable()
		if !m.NoWait {
			ch.c.send(ch.id, &wire.ConfirmSelectOk{})
		}
	case *wire.TxSelect:
		if ch.conf.enabled() {
			return newError(wire.PreconditionFailed, "cannot switch from confirm to tx mode")
		}
		if ch.tx == nil {
			ch.tx = &txState{}
			ch.mu.Lock()
			ch.mu.transactional = true
			ch.mu.Unlock()
		}
		ch.c.send(ch.id, &wire.TxSelectOk{})
	case *wire.TxCommit:
		if ch.tx == nil {
			return newError(wire.PreconditionFailed, "channel is not transactional")
		}
		return ch.commit()
	case *wire.TxRollback:
		if ch.tx == nil {
			return newError(wire.PreconditionFailed, "channel is not transactional")
		}
		ch.rollback()
		ch.c.send(ch.id, &wire.TxRollbackOk{})
	case *wire.ChannelFlow:
		if !m.Active {
			return newError(wire.NotImplemented, "active=false")
		}
		ch.c.send(ch.id, &wire.ChannelFlowOk{Active: true})
	case *wire.ChannelClose:
		ch.shutdown()
		ch.c.send(ch.id, &wire.ChannelCloseOk{})
		ch.c.channelClosed(ch.id)
	case *wire.ChannelOpen:
		return newError(wire.ChannelError, "second 'channel.open' seen")
	case *wire.AccessRequest:
		ch.c.send(ch.id, &wire.AccessRequestOk{Ticket: 1})
	default:
		// A server's method (basic.deliver, channel.open-ok, ...), or a
		// close-ok with no close to confirm: rabbit_channel's fallback.
		return newError(wire.CommandInvalid, "unimplemented method")
	}
	return nil
}

// check checks a permission, caching a grant for the channel's life as
// RabbitMQ does.
func (ch *channel) check(kind queues.Perm, resourceKind, name string) error {
	res := name
	if resourceKind == "exchange" && name == "" {
		res = "amq.default"
	}
	k := permKey{kind, resourceKind[0], res}
	ok := ch.perms[k]
	if !ok {
		// Only grants are cached, as RabbitMQ does: a refusal is checked
		// again next time, so a permission granted meanwhile takes effect.
		ok = ch.c.broker.CheckPermission(ch.c.user, ch.c.vhost, kind, res) == nil
		if ok {
			if len(ch.perms) > 1024 {
				clear(ch.perms)
			}
			ch.perms[k] = true
		}
	}
	if !ok {
		return newError(wire.AccessRefused, "%s access to %s '%s' in vhost '%s' refused for user '%s'", kind, resourceKind, res, ch.c.vhost, ch.c.user)
	}
	return nil
}

// checkAny checks that the user has any permission on a resource, as
// passive declares require (RabbitMQ's check_any_resource_access_permitted,
// rabbitmq-server#16085); configure is tried last, so that a refusal
// reads as a declare's would.
func (ch *channel) checkAny(resourceKind, name string) error {
	for _, kind := range [...]queues.Perm{queues.PermRead, queues.PermWrite} {
		if ch.check(kind, resourceKind, name) == nil {
			return nil
		}
	}
	return ch.check(queues.PermConfigure, resourceKind, name)
}

// queueName resolves an empty queue name to the channel's last declared
// queue.
func (ch *channel) queueName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", newError(wire.NotFound, "no previously declared queue")
	}
	return ch.lastQueue, nil
}

// randomName returns prefix followed by 22 characters of URL-safe base64,
// like RabbitMQ's generated names.
func randomName(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
