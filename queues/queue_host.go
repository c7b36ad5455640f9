package queues

import (
	"errors"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/queues/classic"
	"github.com/warren-mq/warren/queues/policy"
)

// The broker's side of what its queues need of it (classic.Broker).

// queueHost is the broker as its queues see it.
type queueHost struct{ b *Broker }

var _ classic.Broker = queueHost{}

// Args resolves a queue's settings from its declare arguments and the
// policy that applies to it now (policy.go, package policy).
func (h queueHost) Args(kind string, def *QueueDef) func(key string) (any, bool) {
	pol, _ := h.b.EffectivePolicy(def.VHost, def.Name, kind)
	return func(key string) (any, bool) { return policy.EffectiveQueueArg(kind, key, def.Args, pol) }
}

// RouteDeadLetter routes a dead-lettered message through exchange, as
// RouteMessage does but also through an internal exchange (RabbitMQ
// routes dead letters with rabbit_exchange:route/3, which does not check
// internal). A missing exchange is 404.
func (h queueHost) RouteDeadLetter(vhost, exchange string, dl *classic.DeadLetter, dst []string) ([]string, error) {
	props := routingPropsOf(dl.Props, &dl.PropsView)
	return h.b.route(vhost, exchange, dl.Keys, dl.Headers, &props, true, dst)
}

// routingPropsOf returns the properties routing reads.
func routingPropsOf(raw []byte, pv *amqptab.Props) RoutingProps {
	var rp RoutingProps
	rp.MessageID = pv.Value(raw, amqptab.FlagMessageID)
	rp.CorrelationID = pv.Value(raw, amqptab.FlagCorrelationID)
	if ts := pv.Value(raw, amqptab.FlagTimestamp); ts != nil {
		v, _ := amqptab.Int('l', ts)
		rp.Timestamp, rp.HasTimestamp = uint64(v), true
	}
	return rp
}

// Queue returns an open queue, or a 404 *Error.
func (h queueHost) Queue(vhost, name string) (*Queue, error) { return h.b.Queue(vhost, name) }

// Unused deletes an auto-delete queue whose last consumer went, unless
// it got a new one meanwhile.
func (h queueHost) Unused(q *Queue) {
	h.b.deleteQueueIf(q, "queues: auto-delete", func() bool {
		_, err := q.BeginShutdown(true /* ifUnused */, false)
		return err == nil
	})
}

// Expired deletes a queue whose x-expires period passed unused, unless
// it was used meanwhile. Its messages are not dead-lettered.
func (h queueHost) Expired(q *Queue) { h.b.deleteQueueIf(q, "queues: x-expires", q.BeginExpiry) }

// deleteQueueIf deletes q, if it is still registered and begin (the
// first half of its shutdown, under the registry's opMu) succeeds. A
// failure is logged as what.
func (b *Broker) deleteQueueIf(q *Queue, what string, begin func() bool) {
	def := q.Def()
	reg := b.queueReg()
	reg.opMu.Lock()
	if _, placed := reg.placement(def.VHost, def.Name); placed {
		// A queue of the cluster's: its leader or home (this node)
		// decides, and every node deletes it when the deletion is
		// applied.
		reg.opMu.Unlock()
		if _, err := b.deleteQuorumCluster(q, def.VHost, def.Name, what == "queues: auto-delete", false); err != nil {
			b.log.Error(what, "vhost", def.VHost, "queue", def.Name, "err", err)
		}
		return
	}
	if reg.get(def.VHost, def.Name) != q || !begin() {
		reg.opMu.Unlock()
		return
	}
	err := b.unregisterQueueLocked(reg, q)
	reg.opMu.Unlock()
	if err = errors.Join(err, q.FinishShutdown(true)); err != nil {
		b.log.Error(what, "vhost", def.VHost, "queue", def.Name, "err", err)
	}
	b.queueDeleted(def.VHost, def.Name)
}

// watchQueuePolicies makes policy changes apply to the vhost's classic
// queues. Called once per broker, before the first queue opens.
func (b *Broker) watchQueuePolicies() {
	reg := b.queueReg()
	reg.watchOnce.Do(func() {
		b.WatchPolicies(func(vhost string) {
			for _, q := range b.Queues(vhost) {
				q.ApplyConfig()
			}
		})
	})
}
