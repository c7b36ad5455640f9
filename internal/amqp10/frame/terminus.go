package frame

import (
	"github.com/warren-mq/warren/internal/amqp10"
)

// Source is a link's source terminus (core §3.5.3), carried by attach.
// Decode fills the spec defaults in (ExpiryPolicy session-end); AppendTo
// leaves out fields that hold their default, "" and nil.
type Source struct {
	Address               string        // "" when absent (a dynamic source)
	Durable               uint32        // DurableNone, DurableConfiguration, DurableUnsettled
	ExpiryPolicy          amqp10.Symbol // default ExpirySessionEnd
	Timeout               uint32        // seconds
	Dynamic               bool          // the peer asks the node to create the source
	DynamicNodeProperties amqp10.Map    // fields, e.g. "lifetime-policy"
	DistributionMode      amqp10.Symbol // "move" or "copy"
	Filter                amqp10.Map    // filter-set: symbol keys, described values
	DefaultOutcome        DeliveryState // an outcome
	Outcomes              []amqp10.Symbol
	Capabilities          []amqp10.Symbol
}

// Target is a link's target terminus (core §3.5.4), or with Coordinator
// a transaction coordinator (§4.5.1: its only field is Capabilities).
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          amqp10.Symbol // default ExpirySessionEnd
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties amqp10.Map
	Capabilities          []amqp10.Symbol
	Coordinator           bool // a coordinator (0x30), not a target
}

func (s *Source) decode(d *dec) {
	l := d.list()
	s.Address = d.address(&l, "address")
	s.Durable, _ = d.uint(&l, "durable", false, DurableNone)
	s.ExpiryPolicy = d.symbol(&l, "expiry-policy", false, ExpirySessionEnd)
	s.Timeout, _ = d.uint(&l, "timeout", false, 0)
	s.Dynamic = d.boolean(&l, "dynamic", false)
	s.DynamicNodeProperties = d.fields(&l, "dynamic-node-properties", true, false)
	s.DistributionMode = d.symbol(&l, "distribution-mode", false, "")
	s.Filter = d.fields(&l, "filter", true, true)
	s.DefaultOutcome = d.state(&l, "default-outcome")
	s.Outcomes = d.symbols(&l, "outcomes", false)
	s.Capabilities = d.symbols(&l, "capabilities", false)
	d.close(&l)
}

// AppendTo appends s.
func (s *Source) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeSource)
	dst, err := l.str(dst, s.Address, false)
	if err != nil {
		return dst, err
	}
	dst = l.uint(dst, s.Durable, s.Durable != DurableNone)
	dst = l.symbol(dst, defaultSymbol(s.ExpiryPolicy, ExpirySessionEnd))
	dst = l.uint(dst, s.Timeout, s.Timeout != 0)
	dst = l.boolean(dst, s.Dynamic)
	if dst, err = l.value(dst, s.DynamicNodeProperties); err != nil {
		return dst, err
	}
	dst = l.symbol(dst, s.DistributionMode)
	if dst, err = l.value(dst, s.Filter); err != nil {
		return dst, err
	}
	if dst, err = l.state(dst, s.DefaultOutcome); err != nil {
		return dst, err
	}
	dst = l.symbols(dst, s.Outcomes)
	dst = l.symbols(dst, s.Capabilities)
	return l.end(dst), nil
}

func (t *Target) decode(d *dec, coordinator bool) {
	l := d.list()
	if coordinator {
		*t = Target{Coordinator: true, ExpiryPolicy: ExpirySessionEnd}
		t.Capabilities = d.symbols(&l, "capabilities", false)
		d.close(&l)
		return
	}
	t.Address = d.address(&l, "address")
	t.Durable, _ = d.uint(&l, "durable", false, DurableNone)
	t.ExpiryPolicy = d.symbol(&l, "expiry-policy", false, ExpirySessionEnd)
	t.Timeout, _ = d.uint(&l, "timeout", false, 0)
	t.Dynamic = d.boolean(&l, "dynamic", false)
	t.DynamicNodeProperties = d.fields(&l, "dynamic-node-properties", true, false)
	t.Capabilities = d.symbols(&l, "capabilities", false)
	d.close(&l)
}

// AppendTo appends t.
func (t *Target) AppendTo(dst []byte) ([]byte, error) {
	if t.Coordinator {
		dst, l := beginList(dst, CodeCoordinator)
		dst = l.symbols(dst, t.Capabilities)
		return l.end(dst), nil
	}
	dst, l := beginList(dst, CodeTarget)
	dst, err := l.str(dst, t.Address, false)
	if err != nil {
		return dst, err
	}
	dst = l.uint(dst, t.Durable, t.Durable != DurableNone)
	dst = l.symbol(dst, defaultSymbol(t.ExpiryPolicy, ExpirySessionEnd))
	dst = l.uint(dst, t.Timeout, t.Timeout != 0)
	dst = l.boolean(dst, t.Dynamic)
	if dst, err = l.value(dst, t.DynamicNodeProperties); err != nil {
		return dst, err
	}
	dst = l.symbols(dst, t.Capabilities)
	return l.end(dst), nil
}

// defaultSymbol is "" (absent) when v is the default def.
func defaultSymbol(v, def amqp10.Symbol) amqp10.Symbol {
	if v == def {
		return ""
	}
	return v
}

// source reads attach.source; nil when absent.
func (d *dec) source(l *list) *Source {
	if !d.next(l, "source", false) {
		return nil
	}
	if code, sym := d.descriptor(); d.err == nil && code != CodeSource {
		d.failf("field source: descriptor 0x%x %q where a source is due", code, sym)
		return nil
	}
	s := &Source{}
	s.decode(d)
	if d.err != nil {
		return nil
	}
	return s
}

// target reads attach.target; nil when absent.
func (d *dec) target(l *list) *Target {
	if !d.next(l, "target", false) {
		return nil
	}
	code, sym := d.descriptor()
	if d.err == nil && code != CodeTarget && code != CodeCoordinator {
		d.failf("field target: descriptor 0x%x %q where a target is due", code, sym)
		return nil
	}
	t := &Target{}
	t.decode(d, code == CodeCoordinator)
	if d.err != nil {
		return nil
	}
	return t
}
