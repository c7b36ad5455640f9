package queues

import (
	"fmt"
	"strings"

	"github.com/warren-mq/warren/queues/route"
)

// Declarations checked without being made, for an import of definitions
// (package definitions) that validates every entity before it applies
// any: the checks DeclareQueue, DeclareExchange and Bind make, with their
// errors, in their order. What exists may change between a check and the
// declare; the declare checks again.

// CheckQueueDeclare reports what DeclareQueue would answer to the
// declare of def by no connection (not passive, not exclusive), without
// declaring anything: exists and a nil error for an equivalent queue or
// stream of that name, exists and the equivalence error (405 for another
// connection's exclusive queue) for one that is not, and otherwise the
// refusal of a new queue's name or arguments, if any. A stream is a
// queue with x-queue-type stream; a declare without one gets the vhost's
// default queue type as DeclareQueue gives it. The vhost need not exist (an import
// creates it first): then only the declaration itself is checked.
func (b *Broker) CheckQueueDeclare(def QueueDef) (exists bool, err error) {
	def.Exclusive = false
	def.Name = strings.NewReplacer("\r", "", "\n", "").Replace(def.Name)
	if def.Name == "" {
		return false, fmt.Errorf("a queue needs a name: %w", ErrInvalidArgument)
	}
	reg := b.queueReg()
	reg.opMu.Lock()
	defer reg.opMu.Unlock()
	def.Args = b.withDefaultQueueType(reg, def)
	if _, ok := b.LookupStream(def.VHost, def.Name); ok {
		return true, b.checkStreamEquivalence(DeclareOptions{Def: def}, def)
	}
	if q := reg.get(def.VHost, def.Name); q != nil {
		if q.Owner() != nil {
			return true, errQueueLocked(def.VHost, def.Name)
		}
		return true, checkQueueEquivalence(q.Def(), def.Durable, def.AutoDelete, def.Args)
	}
	if queueTypeOf(def.Args) == QueueStream {
		args, err := newStreamArgs(DeclareOptions{Def: def}, def)
		if err != nil {
			return false, err
		}
		if _, err := streamCreateConfig(def.Name, args); err != nil {
			return false, streamDeclareError(def, err)
		}
		return false, nil
	}
	_, err = newQueueDef(def, def, false)
	return false, err
}

// CheckExchangeDeclare reports what DeclareExchange would answer to def,
// without declaring anything: exists and a nil error for an equivalent
// exchange of that name, exists and the equivalence error for one that
// is not, and otherwise the refusal of a new exchange's type, name or
// arguments, if any. The vhost need not exist: then only the declaration
// itself is checked.
func (b *Broker) CheckExchangeDeclare(def ExchangeDef) (exists bool, err error) {
	if !route.KnownType(def.Type) {
		return false, Errorf(CodePreconditionFailed, "unknown exchange type '%s'", def.Type)
	}
	if def.Name == "" {
		return true, errDefaultExchange()
	}
	if b.VHostExists(def.VHost) {
		vt, err := b.topoVHost(def.VHost)
		if err != nil {
			return false, err
		}
		vt.mu.RLock()
		x := vt.idx.Exchange(def.Name)
		var cur ExchangeDef
		if x != nil {
			cur = x.Def()
		}
		vt.mu.RUnlock()
		if x != nil {
			return true, assertExchangeEquivalent(cur, def)
		}
	}
	return false, validateNewExchange(def)
}

// CheckBinding reports what Bind would answer to def once its source, an
// exchange of type sourceType, and its destination exist: the refusal of
// the default exchange as either end (403) or of the binding by the
// source's type (a headers binding's x-match, a topic key's wildcards,
// ...), if any.
func CheckBinding(sourceType string, def BindingDef) error {
	if def.Source == "" || def.DestKind == DestExchange && def.Dest == "" {
		return errDefaultExchange()
	}
	return validateBinding(sourceType, def)
}
