package queues

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Exchanges, bindings and routing (AMQP 0-9-1 topology), as RabbitMQ 4.3
// has them (rabbit_exchange, rabbit_binding, rabbit_channel and the
// exchange type modules). The state lives in topology_state.go, routing
// in route.go, topic.go and headers.go.

// Exchange types.
const (
	ExchangeDirect  = "direct"
	ExchangeFanout  = "fanout"
	ExchangeTopic   = "topic"
	ExchangeHeaders = "headers"

	// Beyond AMQP 0-9-1 (route_hash*.go).
	ExchangeConsistentHash = "x-consistent-hash"
	ExchangeModulusHash    = "x-modulus-hash"
	ExchangeLocalRandom    = "x-local-random"
)

// DestKind says whether a binding's destination is a queue or an exchange.
type DestKind uint8

// Destination kinds.
const (
	DestQueue DestKind = iota
	DestExchange
)

// ExchangeDef is an exchange as declared.
type ExchangeDef struct {
	VHost      string
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
}

// BindingDef is one binding from an exchange to a queue or an exchange.
type BindingDef struct {
	VHost    string
	Source   string // exchange
	DestKind DestKind
	Dest     string
	Key      string
	Args     map[string]any
}

const argAlternateExchange = "alternate-exchange"

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
	if _, ok := newRouter(def.Type); !ok {
		return Errorf(CodePreconditionFailed, "unknown exchange type '%s'", def.Type)
	}
	if def.Name == "" {
		return errDefaultExchange()
	}
	vt, err := b.topoVHost(def.VHost)
	if err != nil {
		return err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	if x := vt.exchanges[def.Name]; x != nil {
		return x.assertEquivalent(def)
	}
	if strings.HasPrefix(def.Name, "amq.") {
		return Errorf(CodeAccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	if v, ok := def.Args[argAlternateExchange]; ok {
		if _, isStr := v.(string); !isStr {
			return Errorf(CodePreconditionFailed, "invalid type '%s' for arg '%s' in %s",
				fieldType(v), argAlternateExchange, rs("exchange", def.Name, def.VHost))
		}
	}
	if err := validateExchangeArgs(def); err != nil {
		return err
	}
	def.Args = normalizeArgs(def.Args)
	return b.commitTopo(vt, &topoChange{addX: newExchange(def)})
}

// assertEquivalent checks a redeclare as rabbit_exchange:assert_equivalence
// does: type, durable, auto_delete, internal, then the alternate-exchange
// argument.
func (x *exchange) assertEquivalent(def ExchangeDef) error {
	cur := x.def
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
	as, aok := termBytes(a)
	bs, bok := termBytes(b)
	return aok && bok && as == bs
}

func termBytes(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	}
	return "", false
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
	x := vt.exchanges[name]
	if x == nil {
		return ExchangeDef{}, errNoExchange(vhost, name)
	}
	return x.defCopy(), nil
}

func (x *exchange) defCopy() ExchangeDef {
	def := x.def
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
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	x := vt.exchanges[name]
	if x == nil {
		return nil
	}
	if ifUnused && len(x.src) > 0 {
		return Errorf(CodePreconditionFailed, "%s in use", rs("exchange", name, vhost))
	}
	var c topoChange
	c.deleteExchange(x)
	c.autoDelete()
	return b.commitTopo(vt, &c)
}

// Bind adds a binding (idempotent). The source exchange must exist (404,
// checked first), then the destination (404 for a missing queue or
// exchange). Binding to or from the default exchange is 403.
func (b *Broker) Bind(def BindingDef) error {
	if def.Source == "" || def.DestKind == DestExchange && def.Dest == "" {
		return errDefaultExchange()
	}
	vt, err := b.topoVHost(def.VHost)
	if err != nil {
		return err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	src, q, x, err := vt.endpoints(def)
	if err != nil {
		return err
	}
	if err := validateBinding(src.def.Type, def); err != nil {
		return err
	}
	bd := vt.newBinding(def, src, q, x)
	if src.src[bd.ident] != nil {
		return nil
	}
	return b.commitTopo(vt, &topoChange{addB: []*binding{bd}})
}

// endpoints resolves a binding's source and destination: 404 for the
// first one missing, the source first.
// REQUIRES: vt.wmu held.
func (vt *vhostTopo) endpoints(def BindingDef) (src *exchange, q *queueEntry, x *exchange, err error) {
	src = vt.exchanges[def.Source]
	if src == nil {
		return nil, nil, nil, errNoExchange(vt.name, def.Source)
	}
	if def.DestKind == DestQueue {
		if q = vt.queues[def.Dest]; q == nil {
			return nil, nil, nil, Errorf(CodeNotFound, "no %s", rs("queue", def.Dest, vt.name))
		}
		return src, q, nil, nil
	}
	if x = vt.exchanges[def.Dest]; x == nil {
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
	vt, err := b.topoVHost(def.VHost)
	if err != nil {
		return err
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	src, _, _, err := vt.endpoints(def)
	if err != nil {
		return nil
	}
	def.Args = normalizeArgs(def.Args)
	bd := src.src[bindingIdent(def)]
	if bd == nil {
		return nil
	}
	var c topoChange
	c.deleteBinding(bd)
	c.autoDelete()
	return b.commitTopo(vt, &c)
}

// Exchanges returns the exchanges of vhost, the default exchange ""
// included, sorted by name.
func (b *Broker) Exchanges(vhost string) []ExchangeDef {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return nil
	}
	vt.mu.RLock()
	out := make([]ExchangeDef, 0, len(vt.exchanges))
	for _, x := range vt.exchanges {
		out = append(out, x.defCopy())
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
	for _, x := range vt.exchanges {
		if source != nil && x.def.Name != *source {
			continue
		}
		for _, bd := range x.src {
			def := bd.def
			def.Args = maps.Clone(def.Args)
			all = append(all, entry{def, bd.ident})
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

// RoutingMessage is what routing reads of a published message.
type RoutingMessage struct {
	Keys    []string       // the routing key, then the CC and BCC keys
	Headers map[string]any // the message headers, nil when none
	Props   RoutingProps
}

// RoutingProps are the message properties an exchange may route on
// (x-consistent-hash's hash-property). The slices may alias the raw
// content header: routing does not keep them.
type RoutingProps struct {
	MessageID     []byte // message-id, nil when absent
	CorrelationID []byte // correlation-id, nil when absent
	Timestamp     uint64 // timestamp in seconds, when HasTimestamp
	HasTimestamp  bool
}

// RouteMessage is Route with the message properties: it appends to dst
// the names of the queues m reaches, each once. It does not keep m.
func (b *Broker) RouteMessage(vhost, exchange string, m *RoutingMessage, dst []string) ([]string, error) {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return dst, err
	}
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	x := vt.exchanges[exchange]
	if x == nil {
		return dst, errNoExchange(vhost, exchange)
	}
	if x.def.Internal {
		return dst, Errorf(CodeAccessRefused, "cannot publish to internal %s", rs("exchange", exchange, vhost))
	}
	if exchange == "" {
		return vt.routeDefaultLocked(m.Keys, dst), nil
	}
	return vt.routeLocked(x, m.Keys, m.Headers, &m.Props, dst), nil
}
