package queues

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/queues/route"
)

// Exchanges, bindings and routing (AMQP 0-9-1 topology), as RabbitMQ 4.3
// has them (rabbit_exchange, rabbit_binding, rabbit_channel and the
// exchange type modules): the broker's API over package route's index,
// with RabbitMQ's reply codes and texts. The state and its persistence
// live in topology_state.go, the exchange types' checks in
// topology_validate.go, routing in package route.

func errDefaultExchange() *Error {
	return Errorf(CodeAccessRefused, "operation not permitted on the default exchange")
}

func errNoExchange(vhost, name string) *Error {
	return Errorf(CodeNotFound, "no %s", rs("exchange", name, vhost))
}

// DeclareExchange creates an exchange, or checks an existing one for
// equivalence (406 with RabbitMQ's "inequivalent arg" text). Names starting
// "amq." may not be created (403); an unknown type is 406 ("unknown
// exchange type 'foo'"); declaring the default exchange "" is 403.
// Durable exchanges are persisted before it returns.
func (b *Broker) DeclareExchange(def ExchangeDef) error {
	// The order of the checks is rabbit_channel's exchange.declare.
	if !route.KnownType(def.Type) {
		return Errorf(CodePreconditionFailed, "unknown exchange type '%s'", def.Type)
	}
	if def.Name == "" {
		return errDefaultExchange()
	}
	if b.repl != nil {
		// A redeclare (what clients do on every start) is answered here
		// without a trip through the cluster's log.
		if vt, err := b.topoVHost(def.VHost); err == nil {
			vt.mu.RLock()
			x := vt.idx.Exchange(def.Name)
			vt.mu.RUnlock()
			if x != nil {
				return assertExchangeEquivalent(x.Def(), def)
			}
		}
	}
	return b.execErr(&cmdDeclareExchange{exchangeCmdDef(def)})
}

func (c *cmdDeclareExchange) apply(b *Broker) (any, error) {
	def := c.def()
	vt, err := b.topoVHost(def.VHost)
	if err != nil {
		return nil, err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	if x := vt.idx.Exchange(def.Name); x != nil {
		return nil, assertExchangeEquivalent(x.Def(), def)
	}
	if err := validateNewExchange(def); err != nil {
		return nil, err
	}
	def.Args = normalizeArgs(def.Args)
	return nil, b.commitTopo(vt, &route.Change{AddX: route.NewExchange(def)})
}

// validateNewExchange checks the declaration of a new exchange: its name,
// then its arguments (alternate-exchange, then the type's).
func validateNewExchange(def ExchangeDef) error {
	if strings.HasPrefix(def.Name, "amq.") {
		return Errorf(CodeAccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	if v, ok := def.Args[argAlternateExchange]; ok {
		if _, isStr := v.(string); !isStr {
			return Errorf(CodePreconditionFailed, "invalid type '%s' for arg '%s' in %s",
				fieldType(v), argAlternateExchange, rs("exchange", def.Name, def.VHost))
		}
	}
	return validateExchangeArgs(def)
}

// assertExchangeEquivalent checks a redeclare of cur as
// rabbit_exchange:assert_equivalence does: type, durable, auto_delete,
// internal, then the alternate-exchange argument.
func assertExchangeEquivalent(cur, def ExchangeDef) error {
	name := rs("exchange", cur.Name, cur.VHost)
	field := func(key, received, current string) error {
		return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received '%s' but current is '%s'",
			key, name, received, current)
	}
	switch {
	case def.Type != cur.Type:
		return field("type", termAtom(def.Type), termAtom(cur.Type))
	case def.Durable != cur.Durable:
		return field("durable", fmt.Sprint(def.Durable), fmt.Sprint(cur.Durable))
	case def.AutoDelete != cur.AutoDelete:
		return field("auto_delete", fmt.Sprint(def.AutoDelete), fmt.Sprint(cur.AutoDelete))
	case def.Internal != cur.Internal:
		return field("internal", fmt.Sprint(def.Internal), fmt.Sprint(cur.Internal))
	}
	return assertArgsEquivalent(cur.Args, def.Args, name, argAlternateExchange)
}

// sameTerm reports whether two values are one term once their AMQP types
// are dropped, as Erlang's pattern match sees them.
func sameTerm(a, b any) bool {
	as, aok := amqptab.DecodedString(a)
	bs, bok := amqptab.DecodedString(b)
	return aok && bok && as == bs
}

// assertArgsEquivalent compares the named arguments as
// rabbit_misc:assert_args_equivalence does: same type class and value, or
// absent on both sides.
func assertArgsEquivalent(current, received map[string]any, name string, keys ...string) error {
	for _, k := range keys {
		cv, cok := current[k]
		rv, rok := received[k]
		if cok == rok && (!cok || fieldClass(fieldType(cv)) == fieldClass(fieldType(rv)) && fieldArgEqual(cv, rv)) {
			continue
		}
		if cok && rok && sameTerm(cv, rv) {
			// Different type classes but one Erlang term (a longstr and a
			// binary with the same bytes): RabbitMQ accepts it.
			continue
		}
		if cok && rok {
			// Both present: RabbitMQ compares the bare values and prints
			// them so (rabbit_misc:assert_field_equivalence).
			return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received '%s' but current is '%s'",
				k, name, fieldBare(rv), fieldBare(cv))
		}
		return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received %s but current is %s",
			k, name, fieldArgText(rv, rok), fieldArgText(cv, cok))
	}
	return nil
}

// Exchange returns the exchange (the passive declare), or a 404 *Error
// "NOT_FOUND - no exchange 'x' in vhost '/'". The default exchange is
// 403, as a passive exchange.declare of "" is in RabbitMQ.
func (b *Broker) Exchange(vhost, name string) (ExchangeDef, error) {
	if name == "" {
		return ExchangeDef{}, errDefaultExchange()
	}
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return ExchangeDef{}, err
	}
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	x := vt.idx.Exchange(name)
	if x == nil {
		return ExchangeDef{}, errNoExchange(vhost, name)
	}
	return exchangeDefCopy(x), nil
}

// exchangeDefCopy returns x's definition with arguments the caller may
// keep.
func exchangeDefCopy(x *route.Exchange) ExchangeDef {
	def := x.Def()
	def.Args = maps.Clone(def.Args)
	return def
}

// DeleteExchange deletes an exchange and every binding from or to it. A
// missing exchange is not an error (RabbitMQ replies delete-ok). ifUnused
// refuses (406 "... in use") an exchange that is the source of a binding.
// amq.* and "" are 403.
func (b *Broker) DeleteExchange(vhost, name string, ifUnused bool) error {
	if name == "" {
		return errDefaultExchange()
	}
	if strings.HasPrefix(name, "amq.") {
		return Errorf(CodeAccessRefused, "deletion of system %s not allowed", rs("exchange", name, vhost))
	}
	return b.execErr(&cmdDeleteExchange{VHost: vhost, Name: name, IfUnused: ifUnused})
}

func (cmd *cmdDeleteExchange) apply(b *Broker) (any, error) {
	vhost, name := cmd.VHost, cmd.Name
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return nil, err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	x := vt.idx.Exchange(name)
	if x == nil {
		return nil, nil
	}
	if cmd.IfUnused && x.NumBindings() > 0 {
		return nil, Errorf(CodePreconditionFailed, "%s in use", rs("exchange", name, vhost))
	}
	var c route.Change
	c.DeleteExchange(x)
	c.AutoDelete()
	return nil, b.commitTopo(vt, &c)
}

// Bind adds a binding (idempotent). The source exchange must exist (404,
// checked first), then the destination (404 for a missing queue or
// exchange). Binding to or from the default exchange is 403.
func (b *Broker) Bind(def BindingDef) error {
	if def.Source == "" || def.DestKind == DestExchange && def.Dest == "" {
		return errDefaultExchange()
	}
	if def.DestKind == DestQueue && b.localDest(def.VHost, def.Dest) {
		// Classic queues are still the declaring node's alone (not in
		// the cluster's catalog yet), so are the bindings to them; those
		// to replicated streams and queues are the cluster's.
		_, err := (&cmdBind{bindingCmdDef(def)}).apply(b)
		return err
	}
	return b.execErr(&cmdBind{bindingCmdDef(def)})
}

func (c *cmdBind) apply(b *Broker) (any, error) {
	def := c.def()
	vt, err := b.topoVHost(def.VHost)
	if err != nil {
		return nil, err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	src, q, x, err := vt.endpoints(def)
	if err != nil {
		return nil, err
	}
	if err := validateBinding(src.Def().Type, def); err != nil {
		return nil, err
	}
	bd := vt.newBinding(def, src, q, x)
	if src.Binding(bd.Ident()) != nil {
		return nil, nil
	}
	return nil, b.commitTopo(vt, &route.Change{AddB: []*route.Binding{bd}})
}

// localDest reports whether bindings to the queue or stream name are
// this node's own: in a cluster, unless it is replicated.
func (b *Broker) localDest(vhost, name string) bool {
	if b.repl == nil {
		return false
	}
	_, placed := b.PlacementOf(vhost, name)
	return !placed
}

// endpoints resolves a binding's source and destination: 404 for the
// first one missing, the source first.
// REQUIRES: vt.wmu held.
func (vt *vhostTopo) endpoints(def BindingDef) (src *route.Exchange, q *route.Queue, x *route.Exchange, err error) {
	src = vt.idx.Exchange(def.Source)
	if src == nil {
		return nil, nil, nil, errNoExchange(vt.name, def.Source)
	}
	if def.DestKind == DestQueue {
		if q = vt.idx.Queue(def.Dest); q == nil {
			return nil, nil, nil, Errorf(CodeNotFound, "no %s", rs("queue", def.Dest, vt.name))
		}
		return src, q, nil, nil
	}
	if x = vt.idx.Exchange(def.Dest); x == nil {
		return nil, nil, nil, errNoExchange(vt.name, def.Dest)
	}
	return src, nil, x, nil
}

// Unbind removes a binding; a missing binding, source or destination is
// not an error. Unbinding from or to the default exchange is 403, as in
// RabbitMQ.
func (b *Broker) Unbind(def BindingDef) error {
	if def.Source == "" || def.DestKind == DestExchange && def.Dest == "" {
		return errDefaultExchange()
	}
	if def.DestKind == DestQueue && b.localDest(def.VHost, def.Dest) {
		_, err := (&cmdUnbind{bindingCmdDef(def)}).apply(b) // as in Bind
		return err
	}
	return b.execErr(&cmdUnbind{bindingCmdDef(def)})
}

func (cmd *cmdUnbind) apply(b *Broker) (any, error) {
	def := cmd.def()
	vt, err := b.topoVHost(def.VHost)
	if err != nil {
		return nil, err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	src, _, _, err := vt.endpoints(def)
	if err != nil {
		return nil, nil
	}
	def.Args = normalizeArgs(def.Args)
	bd := src.Binding(def.Ident())
	if bd == nil {
		return nil, nil
	}
	var c route.Change
	c.DeleteBinding(bd)
	c.AutoDelete()
	return nil, b.commitTopo(vt, &c)
}

// Exchanges returns the exchanges of vhost, the default exchange ""
// included, sorted by name.
func (b *Broker) Exchanges(vhost string) []ExchangeDef {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return nil
	}
	var out []ExchangeDef
	vt.mu.RLock()
	for x := range vt.idx.Exchanges() {
		out = append(out, exchangeDefCopy(x))
	}
	vt.mu.RUnlock()
	slices.SortFunc(out, func(a, b ExchangeDef) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Bindings returns the explicit bindings of vhost, sorted by source,
// destination kind, destination, key and arguments. The default
// exchange's implicit bindings (one per queue, keyed by its name) are not
// listed.
func (b *Broker) Bindings(vhost string) []BindingDef {
	return b.bindings(vhost, nil)
}

// BindingsFrom returns the bindings whose source is exchange, sorted as
// Bindings sorts them; none when the exchange does not exist.
func (b *Broker) BindingsFrom(vhost, exchange string) []BindingDef {
	return b.bindings(vhost, &exchange)
}

// bindings lists the bindings of vhost, of one source when source is
// not nil.
func (b *Broker) bindings(vhost string, source *string) []BindingDef {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return nil
	}
	type entry struct {
		def   BindingDef
		ident string
	}
	var all []entry
	vt.mu.RLock()
	for x := range vt.idx.Exchanges() {
		if source != nil && x.Def().Name != *source {
			continue
		}
		for bd := range x.Bindings() {
			def := bd.Def()
			def.Args = maps.Clone(def.Args)
			all = append(all, entry{def, bd.Ident()})
		}
	}
	vt.mu.RUnlock()
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(
			strings.Compare(a.def.Source, b.def.Source),
			cmp.Compare(a.def.DestKind, b.def.DestKind),
			strings.Compare(a.def.Dest, b.def.Dest),
			strings.Compare(a.def.Key, b.def.Key),
			strings.Compare(a.ident, b.ident),
		)
	})
	out := make([]BindingDef, len(all))
	for i, e := range all {
		out[i] = e.def
	}
	return out
}

// Route appends to dst the names of the queues a message published to
// exchange in vhost reaches, each once. keys are the routing key followed
// by the CC and BCC keys; headers are the message headers (nil when none),
// used by headers exchanges. Exchange-to-exchange bindings and alternate
// exchanges are followed, each exchange visited once. A missing exchange
// is 404, an internal one 403. It allocates nothing in the steady state
// when dst has room. It is RouteMessage without the message properties.
func (b *Broker) Route(vhost, exchange string, keys []string, headers map[string]any, dst []string) ([]string, error) {
	return b.RouteMessage(vhost, exchange, &RoutingMessage{Keys: keys, Headers: headers}, dst)
}

// RouteMessage is Route with the message properties: it appends to dst
// the names of the queues m reaches, each once. It does not keep m.
func (b *Broker) RouteMessage(vhost, exchange string, m *RoutingMessage, dst []string) ([]string, error) {
	return b.route(vhost, exchange, m.Keys, m.Headers, &m.Props, false, dst)
}

// route is RouteMessage, through an internal exchange too when
// internalOK (dead letters).
func (b *Broker) route(vhost, exchange string, keys []string, headers map[string]any, props *RoutingProps, internalOK bool, dst []string) ([]string, error) {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return dst, err
	}
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	x := vt.idx.Exchange(exchange)
	if x == nil {
		return dst, errNoExchange(vhost, exchange)
	}
	if x.Internal() && !internalOK {
		return dst, Errorf(CodeAccessRefused, "cannot publish to internal %s", rs("exchange", exchange, vhost))
	}
	return vt.idx.Route(x, keys, headers, props, dst), nil
}
