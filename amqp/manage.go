package amqp

import (
	"strings"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// stripNewlines removes CR and LF from names, as RabbitMQ does.
func stripNewlines(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}

func (ch *channel) handleQueueDeclare(m *wire.QueueDeclare) error {
	name := stripNewlines(m.Queue)
	if m.Passive {
		// No empty-name shortcut here: RabbitMQ looks for the queue ''.
		if err := ch.checkAny("queue", name); err != nil {
			return err
		}
	} else if name != "" {
		if err := ch.check(queues.PermConfigure, "queue", name); err != nil {
			return err
		}
	}
	if !m.Passive && !m.Durable && !m.Exclusive && ch.c.srv.cfg.DenyTransientNonExclusive {
		return newError(wire.InternalError, "Feature `transient_nonexcl_queues` is deprecated. Declaring a queue that is neither durable nor exclusive is denied by this broker's configuration.")
	}
	q, messages, consumers, err := ch.c.broker.DeclareQueue(queues.DeclareOptions{
		Def: queues.QueueDef{
			VHost:      ch.c.vhost,
			Name:       name,
			Type:       queues.QueueClassic,
			Durable:    m.Durable,
			Exclusive:  m.Exclusive,
			AutoDelete: m.AutoDelete,
			Args:       normalizeTable(m.Arguments),
		},
		Passive: m.Passive,
		Owner:   ch.c,
	})
	if err != nil {
		return err
	}
	if q != nil { // nil for a stream, whose name is the declared one
		name = q.Def().Name
	} else if _, _, placed := ch.c.broker.PlacedQueue(ch.c.vhost, name); placed {
		// Another node's queue: its counts are there.
		if r, c, err := ch.c.broker.CountsRemote(ch.c.vhost, name); err == nil {
			messages, consumers = r, c
		}
	}
	ch.lastQueue = name
	if !m.NoWait {
		ch.c.send(ch.id, &wire.QueueDeclareOk{Queue: name, MessageCount: uint32(messages), ConsumerCount: uint32(consumers)})
	}
	return nil
}

// normalizeTable hands the model a plain map.
func normalizeTable(t wire.Table) map[string]any {
	if t == nil {
		return nil
	}
	return map[string]any(t)
}

func (ch *channel) handleQueueBind(queue, exchange, key string, args wire.Table, noWait, bind bool) error {
	name, err := ch.queueName(stripNewlines(queue))
	if err != nil {
		return err
	}
	if queue == "" && key == "" {
		key = name
	}
	if err := ch.check(queues.PermWrite, "queue", name); err != nil {
		return err
	}
	if err := ch.check(queues.PermRead, "exchange", exchange); err != nil {
		return err
	}
	if err := ch.c.broker.CheckTopicPermission(ch.c.user, ch.c.vhost, exchange, queues.PermRead, key); err != nil {
		return err
	}
	if err := ch.checkExclusive(name); err != nil {
		return err
	}
	def := queues.BindingDef{VHost: ch.c.vhost, Source: exchange, DestKind: queues.DestQueue, Dest: name, Key: key, Args: normalizeTable(args)}
	if bind {
		if err := ch.c.broker.Bind(def); err != nil {
			return err
		}
		if !noWait {
			ch.c.send(ch.id, &wire.QueueBindOk{})
		}
		return nil
	}
	if err := ch.c.broker.Unbind(def); err != nil {
		return err
	}
	ch.c.send(ch.id, &wire.QueueUnbindOk{})
	return nil
}

// checkExclusive refuses another connection's exclusive queue (405).
func (ch *channel) checkExclusive(name string) error {
	q, err := ch.c.broker.Queue(ch.c.vhost, name)
	if err != nil {
		if def, _, placed := ch.c.broker.PlacedQueue(ch.c.vhost, name); placed && def.Exclusive {
			// Another node's connection's exclusive queue.
			return queues.ErrQueueLocked(ch.c.vhost, name)
		}
		return nil // the operation itself reports a missing queue
	}
	return q.CheckOwner(ch.c)
}

func (ch *channel) handleQueuePurge(m *wire.QueuePurge) error {
	name, err := ch.queueName(stripNewlines(m.Queue))
	if err != nil {
		return err
	}
	if err := ch.check(queues.PermRead, "queue", name); err != nil {
		return err
	}
	var n int
	q, err := ch.c.broker.Queue(ch.c.vhost, name)
	switch {
	case err == nil:
		if err := q.CheckOwner(ch.c); err != nil {
			return err
		}
		if n, err = q.Purge(); err != nil {
			return err
		}
	default:
		if _, ok := ch.c.broker.LookupStream(ch.c.vhost, name); ok {
			return queues.ErrStreamPurge(ch.c.vhost, name)
		}
		if _, _, placed := ch.c.broker.PlacedQueue(ch.c.vhost, name); !placed {
			return err
		}
		if n, err = ch.c.broker.PurgeRemote(ch.c.vhost, name); err != nil { // another node's queue
			return err
		}
	}
	if !m.NoWait {
		ch.c.send(ch.id, &wire.QueuePurgeOk{MessageCount: uint32(n)})
	}
	return nil
}

func (ch *channel) handleQueueDelete(m *wire.QueueDelete) error {
	name, err := ch.queueName(stripNewlines(m.Queue))
	if err != nil {
		return err
	}
	if err := ch.check(queues.PermConfigure, "queue", name); err != nil {
		return err
	}
	ch.mu.Lock()
	ch.mu.deferCancels = true
	ch.mu.Unlock()
	n, err := ch.c.broker.DeleteQueue(ch.c.vhost, name, ch.c, m.IfUnused, m.IfEmpty)
	if err == nil && !m.NoWait {
		ch.c.send(ch.id, &wire.QueueDeleteOk{MessageCount: uint32(n)})
	}
	ch.mu.Lock()
	ch.mu.deferCancels = false
	for _, tag := range ch.mu.cancelled {
		ch.notifyCancelledLocked(tag)
	}
	ch.mu.cancelled = nil
	ch.mu.Unlock()
	return err
}

func (ch *channel) handleExchangeDeclare(m *wire.ExchangeDeclare) error {
	name := stripNewlines(m.Exchange)
	if m.Passive {
		// The default exchange is refused (403) before any permission.
		if name != "" {
			if err := ch.checkAny("exchange", name); err != nil {
				return err
			}
		}
		if _, err := ch.c.broker.Exchange(ch.c.vhost, name); err != nil {
			return err
		}
		if !m.NoWait {
			ch.c.send(ch.id, &wire.ExchangeDeclareOk{})
		}
		return nil
	}
	if err := ch.check(queues.PermConfigure, "exchange", name); err != nil {
		return err
	}
	err := ch.c.broker.DeclareExchange(queues.ExchangeDef{
		VHost:      ch.c.vhost,
		Name:       name,
		Type:       m.Type,
		Durable:    m.Durable,
		AutoDelete: m.AutoDelete,
		Internal:   m.Internal,
		Args:       normalizeTable(m.Arguments),
	})
	if err != nil {
		return err
	}
	if !m.NoWait {
		ch.c.send(ch.id, &wire.ExchangeDeclareOk{})
	}
	return nil
}

func (ch *channel) handleExchangeDelete(m *wire.ExchangeDelete) error {
	name := stripNewlines(m.Exchange)
	if err := ch.check(queues.PermConfigure, "exchange", name); err != nil {
		return err
	}
	if err := ch.c.broker.DeleteExchange(ch.c.vhost, name, m.IfUnused); err != nil {
		return err
	}
	if !m.NoWait {
		ch.c.send(ch.id, &wire.ExchangeDeleteOk{})
	}
	return nil
}

func (ch *channel) handleExchangeBind(dest, source, key string, args wire.Table, noWait, bind bool) error {
	if err := ch.check(queues.PermWrite, "exchange", dest); err != nil {
		return err
	}
	if err := ch.check(queues.PermRead, "exchange", source); err != nil {
		return err
	}
	if err := ch.c.broker.CheckTopicPermission(ch.c.user, ch.c.vhost, source, queues.PermRead, key); err != nil {
		return err
	}
	def := queues.BindingDef{VHost: ch.c.vhost, Source: source, DestKind: queues.DestExchange, Dest: dest, Key: key, Args: normalizeTable(args)}
	if bind {
		if err := ch.c.broker.Bind(def); err != nil {
			return err
		}
		if !noWait {
			ch.c.send(ch.id, &wire.ExchangeBindOk{})
		}
		return nil
	}
	if err := ch.c.broker.Unbind(def); err != nil {
		return err
	}
	if !noWait {
		ch.c.send(ch.id, &wire.ExchangeUnbindOk{})
	}
	return nil
}
