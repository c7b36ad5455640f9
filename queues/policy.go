package queues

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warren-mq/warren/queues/route"
)

// Policies, as RabbitMQ 4.3 has them (rabbit_policy, rabbit_policies and
// the queue types' capabilities): named, pattern-matched definitions that
// apply to existing and future queues and exchanges without redeclaring
// them. At most one policy applies to an entity: among the policies of
// its vhost whose pattern matches its name and whose apply-to fits it,
// the one with the highest priority. Operator policies are not modelled.
//
// Validation is in policy_validate.go, the precedence of a policy value
// over a declare argument in policy_args.go.
//
// Catalog key (see doc.go):
//
//	pol/<vhost> 0x00 <name>   policyRecord (JSON)
//
// Lock order: policyState.mu → topology locks (vhostTopo.wmu → mu), taken
// only by topoPoliciesChanged after mu is released; policyState.watch is a
// leaf. The watchers and the topology hook run with no policy lock held.
//
// How the queue code uses it: a queue keeps the version it resolved at
// and re-resolves when PolicyVersion has moved (reading the version first,
// so that a change racing the resolution costs one more resolution, never
// a stale one), and registers a WatchPolicies callback to apply a change
// to an idle queue at once:
//
//	if v := b.PolicyVersion(q.vhost); v != q.polVersion {
//		q.pol, _ = b.EffectivePolicy(q.vhost, q.name, q.typ)
//		q.polVersion = v
//		ttl, ok := EffectiveArg("message-ttl", q.args, q.pol)
//		...
//	}

// Policy apply-to values (rabbit_policy:apply_to_validation and the
// queue types' policy_apply_to_name/0).
const (
	PolicyApplyAll           = "all"
	PolicyApplyExchanges     = "exchanges"
	PolicyApplyQueues        = "queues"
	PolicyApplyClassicQueues = "classic_queues"
	PolicyApplyQuorumQueues  = "quorum_queues"
	PolicyApplyStreams       = "streams"
)

// PolicyKindExchange is the kind EffectivePolicy takes for exchanges;
// queues pass their queue type (QueueClassic, QueueQuorum, QueueStream).
const PolicyKindExchange = "exchange"

// Policy is a RabbitMQ policy (rabbitmqctl set_policy).
type Policy struct {
	VHost   string
	Name    string
	Pattern string // regular expression, unanchored, matched against names
	// ApplyTo is one of the PolicyApply* values; "" means "all".
	ApplyTo  string
	Priority int // the highest matching priority wins
	// Definition maps policy keys ("message-ttl", not "x-message-ttl") to
	// values: int64 for integers and string for strings once SetPolicy has
	// validated it (it accepts any Go integer type, json.Number and
	// integral float64, as encoding/json decodes JSON).
	Definition map[string]any
}

// policyState is a broker's policies: an immutable snapshot per vhost,
// replaced as a whole on every change, so that resolution takes no lock.
type policyState struct {
	dir atomic.Pointer[map[string]*vhostPolicies] // immutable; replaced under mu

	mu struct {
		sync.Mutex        // serialises changes; held across catalog I/O
		version    uint64 // the last version handed out
	}

	watch struct {
		sync.Mutex
		fns  map[int]func(vhost string)
		next int
	}
}

// vhostPolicies is one vhost's policies. Immutable once published.
type vhostPolicies struct {
	version uint64            // changes with every change of the vhost's policies
	list    []*compiledPolicy // resolution order: priority descending, then name
}

// compiledPolicy is a validated policy with its pattern compiled. Its
// Definition is never modified once published.
type compiledPolicy struct {
	Policy
	re *regexp.Regexp
}

func policyKey(vhost, name string) []byte { return []byte("pol/" + vhost + "\x00" + name) }

// policyRecord is a policy in the catalog.
type policyRecord struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}

// snapshot returns vhost's policies, or nil when it has none.
func (ps *policyState) snapshot(vhost string) *vhostPolicies {
	if m := ps.dir.Load(); m != nil {
		return (*m)[vhost]
	}
	return nil
}

// publishLocked replaces vhost's policies by list, with a new version.
// REQUIRES: ps.mu held.
func (ps *policyState) publishLocked(vhost string, list []*compiledPolicy) {
	slices.SortFunc(list, func(a, b *compiledPolicy) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), strings.Compare(a.Name, b.Name))
	})
	ps.mu.version++
	ps.storeLocked(vhost, &vhostPolicies{version: ps.mu.version, list: list})
}

// storeLocked publishes a new directory with vhost's entry replaced by vp
// (nil: removed).
// REQUIRES: ps.mu held.
func (ps *policyState) storeLocked(vhost string, vp *vhostPolicies) {
	m := map[string]*vhostPolicies{}
	if old := ps.dir.Load(); old != nil {
		m = maps.Clone(*old)
	}
	if vp == nil {
		delete(m, vhost)
	} else {
		m[vhost] = vp
	}
	ps.dir.Store(&m)
}

// SetPolicy creates or replaces a policy. An invalid policy is refused
// with a *PolicyError (errors.Is ErrInvalidArgument) carrying RabbitMQ's
// validation texts, since RabbitMQ refuses policies through its CLI and
// HTTP API ("Validation failed ..."), not with an AMQP reply code; a
// missing vhost is ErrNotFound. The policy is in the catalog when it
// returns, and applies to the matching exchanges (alternate-exchange)
// at once; the watchers are told. Setting a policy to what it is already
// changes nothing and tells no one, as in RabbitMQ.
func (b *Broker) SetPolicy(p Policy) error {
	cp, err := compilePolicy(p)
	if err != nil {
		return err
	}
	ps := &b.pol
	ps.mu.Lock()
	if !b.VHostExists(p.VHost) {
		ps.mu.Unlock()
		return fmt.Errorf("policy %q: vhost %q: %w", p.Name, p.VHost, ErrNotFound)
	}
	var list []*compiledPolicy
	if cur := ps.snapshot(p.VHost); cur != nil {
		for _, old := range cur.list {
			if old.Name != p.Name {
				list = append(list, old)
			} else if reflect.DeepEqual(old.Policy, cp.Policy) {
				ps.mu.Unlock()
				return nil
			}
		}
	}
	if err := b.cat.put(policyKey(cp.VHost, cp.Name), cp.record()); err != nil {
		ps.mu.Unlock()
		return err
	}
	ps.publishLocked(cp.VHost, append(list, cp))
	ps.mu.Unlock()
	b.policiesChanged(cp.VHost)
	return nil
}

// ClearPolicy deletes a policy (ErrNotFound if there is none). Entities
// it applied to fall back to the next matching policy, if any.
func (b *Broker) ClearPolicy(vhost, name string) error {
	ps := &b.pol
	ps.mu.Lock()
	cur := ps.snapshot(vhost)
	var list []*compiledPolicy
	found := false
	if cur != nil {
		for _, p := range cur.list {
			if p.Name == name {
				found = true
			} else {
				list = append(list, p)
			}
		}
	}
	if !found {
		ps.mu.Unlock()
		return fmt.Errorf("policy %q in vhost %q: %w", name, vhost, ErrNotFound)
	}
	if err := b.cat.delete(policyKey(vhost, name)); err != nil {
		ps.mu.Unlock()
		return err
	}
	ps.publishLocked(vhost, list)
	ps.mu.Unlock()
	b.policiesChanged(vhost)
	return nil
}

// Policies returns the policies of vhost in the order rabbitmqctl
// list_policies prints them (rabbit_policy:sort_by_priority): priority
// ascending, then (where RabbitMQ's order is unspecified) name.
func (b *Broker) Policies(vhost string) []Policy {
	cur := b.pol.snapshot(vhost)
	if cur == nil {
		return nil
	}
	out := make([]Policy, 0, len(cur.list))
	for i := len(cur.list) - 1; i >= 0; i-- {
		out = append(out, cur.list[i].copy())
	}
	slices.SortStableFunc(out, func(a, b Policy) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Policy returns one policy, or ErrNotFound.
func (b *Broker) Policy(vhost, name string) (Policy, error) {
	if cur := b.pol.snapshot(vhost); cur != nil {
		for _, p := range cur.list {
			if p.Name == name {
				return p.copy(), nil
			}
		}
	}
	return Policy{}, fmt.Errorf("policy %q in vhost %q: %w", name, vhost, ErrNotFound)
}

// PolicyVersion returns a number that changes whenever the policies of
// vhost change (0 while it has never had any). A queue caches its
// resolution with it; compare with !=, not <: it restarts at 0 when the
// vhost is deleted.
func (b *Broker) PolicyVersion(vhost string) uint64 {
	if cur := b.pol.snapshot(vhost); cur != nil {
		return cur.version
	}
	return 0
}

// EffectivePolicy returns the policy that applies to the entity name of
// vhost, as rabbit_policy:match/2 chooses it: among the policies whose
// pattern matches the name anywhere (an unanchored regexp search, as
// rabbit_re:run; "^amq\." anchors it) and whose apply-to fits kind, the
// one with the highest priority. kind is PolicyKindExchange or a queue
// type (QueueClassic, QueueQuorum, QueueStream; "queue" means classic).
// For queues, a policy with a key the queue type does not support (its
// capabilities' unsupported_policies, e.g. max-age for a classic queue)
// is skipped, so a lower priority one may apply. Between equal
// priorities RabbitMQ's choice depends on its table's order; here the
// smallest name wins.
func (b *Broker) EffectivePolicy(vhost, name, kind string) (Policy, bool) {
	cur := b.pol.snapshot(vhost)
	if cur == nil {
		return Policy{}, false
	}
	if p := cur.match(name, kind); p != nil {
		return p.copy(), true
	}
	return Policy{}, false
}

// match returns the policy that applies to name, or nil.
func (vp *vhostPolicies) match(name, kind string) *compiledPolicy {
	if kind == "queue" {
		kind = QueueClassic
	}
	for _, p := range vp.list {
		if policyFits(p.ApplyTo, kind) && policyApplicable(kind, p.Definition) && p.re.MatchString(name) {
			return p
		}
	}
	return nil
}

// policyFits is rabbit_policy:matches_type/2 and matches_queue_type/3.
func policyFits(applyTo, kind string) bool {
	switch applyTo {
	case PolicyApplyAll:
		return true
	case PolicyApplyExchanges:
		return kind == PolicyKindExchange
	case PolicyApplyQueues:
		return kind != PolicyKindExchange
	case PolicyApplyClassicQueues:
		return kind == QueueClassic
	case PolicyApplyQuorumQueues:
		return kind == QueueQuorum
	case PolicyApplyStreams:
		return kind == QueueStream
	}
	return false
}

// unsupportedPolicies are the policy keys each queue type refuses
// (capabilities/0 of rabbit_classic_queue, rabbit_quorum_queue and
// rabbit_stream_queue, RabbitMQ 4.3.5), limited to the keys SetPolicy
// accepts. A policy with one of them does not apply to such a queue
// (rabbit_queue_type:is_policy_applicable/2).
var unsupportedPolicies = map[string][]string{
	QueueClassic: {
		"max-age", "stream-max-segment-size-bytes", "initial-cluster-size",
		"delivery-limit", "dead-letter-strategy", "max-in-memory-length",
		"max-in-memory-bytes", "target-group-size",
	},
	QueueQuorum: {
		"queue-mode", "queue-master-locator", "max-age",
		"stream-max-segment-size-bytes", "initial-cluster-size",
	},
	QueueStream: {
		"expires", "message-ttl", "dead-letter-exchange", "dead-letter-routing-key",
		"max-length", "max-in-memory-length", "max-in-memory-bytes", "overflow",
		"queue-mode", "delivery-limit", "queue-master-locator",
		"dead-letter-strategy", "target-group-size",
	},
}

// policyApplicable is rabbit_queue_type:is_policy_applicable/2; every
// policy is applicable to exchanges.
func policyApplicable(kind string, def map[string]any) bool {
	for _, k := range unsupportedPolicies[kind] {
		if _, ok := def[k]; ok {
			return false
		}
	}
	return true
}

// copy returns the policy with its own Definition.
func (p *compiledPolicy) copy() Policy {
	out := p.Policy
	out.Definition = maps.Clone(p.Definition)
	return out
}

func (p *compiledPolicy) record() policyRecord {
	return policyRecord{
		VHost: p.VHost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
		Priority: p.Priority, Definition: p.Definition,
	}
}

// WatchPolicies calls fn(vhost) after each change of the policies of
// vhost (set, cleared, or the vhost deleted), once the change is visible
// to EffectivePolicy and applied to the exchanges, until cancel is
// called. fn runs on the changing goroutine with no broker lock held; it
// must not block.
func (b *Broker) WatchPolicies(fn func(vhost string)) (cancel func()) {
	w := &b.pol.watch
	w.Lock()
	if w.fns == nil {
		w.fns = map[int]func(string){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	w.Unlock()
	return func() {
		w.Lock()
		delete(w.fns, id)
		w.Unlock()
	}
}

// policiesChanged applies a change of vhost's policies to its exchanges
// and tells the watchers. Called with no policy lock held.
func (b *Broker) policiesChanged(vhost string) {
	b.topoPoliciesChanged(vhost)
	w := &b.pol.watch
	w.Lock()
	fns := make([]func(string), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.Unlock()
	for _, fn := range fns {
		fn(vhost)
	}
}

// openPolicies loads the policies from the catalog and applies them to
// the exchanges. Called by Open after openTopology, before the queues are
// opened. Records of deleted vhosts are removed; a record that no longer
// validates is left in the catalog, logged and not loaded.
func (b *Broker) openPolicies() error {
	ps := &b.pol
	ps.mu.Lock()
	byVHost := map[string][]*compiledPolicy{}
	var stale [][]byte
	if err := b.cat.scan([]byte("pol/"), func(k, v []byte) error {
		var rec policyRecord
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil {
			return fmt.Errorf("queues: catalog %q: %w", k, err)
		}
		if !b.VHostExists(rec.VHost) {
			stale = append(stale, slices.Clone(k))
			return nil
		}
		cp, err := compilePolicy(Policy{
			VHost: rec.VHost, Name: rec.Name, Pattern: rec.Pattern, ApplyTo: rec.ApplyTo,
			Priority: rec.Priority, Definition: rec.Definition,
		})
		if err != nil {
			b.log.Error("policy: not loaded", "vhost", rec.VHost, "policy", rec.Name, "err", err)
			return nil
		}
		byVHost[rec.VHost] = append(byVHost[rec.VHost], cp)
		return nil
	}); err != nil {
		ps.mu.Unlock()
		return err
	}
	for vhost, list := range byVHost {
		ps.publishLocked(vhost, list)
	}
	ps.mu.Unlock()
	if len(stale) > 0 {
		b.log.Warn("policy: removing the policies of deleted vhosts", "count", len(stale))
		batch := b.cat.db.NewBatch()
		defer batch.Close()
		for _, k := range stale {
			if err := batch.Delete(k, nil); err != nil {
				return err
			}
		}
		if err := batch.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("queues: catalog: remove stale policies: %w", err)
		}
	}
	for vhost := range byVHost {
		b.topoPoliciesChanged(vhost)
	}
	return nil
}

// deleteVHostPolicies deletes the policies of a vhost being deleted and
// tells the watchers. Called by DeleteVHost.
func (b *Broker) deleteVHostPolicies(vhost string) error {
	ps := &b.pol
	ps.mu.Lock()
	if err := b.cat.deletePrefix(policyKey(vhost, "")); err != nil {
		ps.mu.Unlock()
		return err
	}
	had := ps.snapshot(vhost) != nil
	ps.storeLocked(vhost, nil)
	ps.mu.Unlock()
	if had {
		b.policiesChanged(vhost)
	}
	return nil
}

// topoPoliciesChanged re-resolves the alternate exchange of every
// exchange of vhost against its current policies. The vhost's topology is
// created if need be, so that a vhost with policies always has one whose
// exchanges carry them (exchanges added later resolve in commitTopo).
func (b *Broker) topoPoliciesChanged(vhost string) {
	vt, err := b.topoVHost(vhost)
	if err != nil {
		return // the vhost is gone
	}
	vt.wmu.Lock()
	defer vt.wmu.Unlock()
	pols := b.pol.snapshot(vhost)
	vt.mu.Lock()
	defer vt.mu.Unlock()
	for x := range vt.idx.Exchanges() {
		resolveAE(x, pols)
	}
}

// resolveAE sets x's alternate exchange as rabbit_exchange:process_alternate
// finds it (rabbit_policy:get_arg/3): the "alternate-exchange" argument if
// the exchange has one, else its policy's alternate-exchange.
// REQUIRES: vt.wmu held, and vt.mu held for writing once x is in vt.
func resolveAE(x *route.Exchange, pols *vhostPolicies) {
	def := x.Def()
	if ae, ok := def.Args[argAlternateExchange].(string); ok {
		x.SetAlternate(ae)
		return
	}
	x.ClearAlternate()
	if pols == nil {
		return
	}
	if p := pols.match(def.Name, PolicyKindExchange); p != nil {
		if ae, ok := p.Definition[argAlternateExchange].(string); ok {
			x.SetAlternate(ae)
		}
	}
}

// resolveExchangePolicy resolves a new exchange's alternate exchange
// against the current policies of vt's vhost. Called by commitTopo.
// REQUIRES: vt.wmu held; x not yet in vt.
func (b *Broker) resolveExchangePolicy(vt *vhostTopo, x *route.Exchange) {
	resolveAE(x, b.pol.snapshot(vt.name))
}
