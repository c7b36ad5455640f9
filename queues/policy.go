package queues

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warren-mq/warren/queues/policy"
	"github.com/warren-mq/warren/queues/route"
)

// Policies: the broker keeps each vhost's policies (a policy.Set) in the
// catalog, versions them, applies them to the exchanges and tells the
// watchers. What a policy is, its validation, which one applies to an
// entity and how its values combine with declare arguments are package
// policy's.
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
//		ttl, ok := policy.EffectiveArg("message-ttl", q.args, q.pol)
//		...
//	}

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
	version uint64      // changes with every change of the vhost's policies
	set     *policy.Set // never nil
}

// policies returns vp's set; nil (no policies) for a nil vp.
func (vp *vhostPolicies) policies() *policy.Set {
	if vp == nil {
		return nil
	}
	return vp.set
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

// recordOf returns p's catalog record.
func recordOf(p *policy.Compiled) policyRecord {
	return policyRecord{
		VHost: p.VHost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
		Priority: p.Priority, Definition: p.Definition,
	}
}

// snapshot returns vhost's policies, or nil when it has none.
func (ps *policyState) snapshot(vhost string) *vhostPolicies {
	if m := ps.dir.Load(); m != nil {
		return (*m)[vhost]
	}
	return nil
}

// publishLocked replaces vhost's policies by set, with a new version.
// REQUIRES: ps.mu held.
func (ps *policyState) publishLocked(vhost string, set *policy.Set) {
	ps.mu.version++
	ps.storeLocked(vhost, &vhostPolicies{version: ps.mu.version, set: set})
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

// PolicyError is a policy SetPolicy refused. Reasons are RabbitMQ's
// validation texts (policy.Compile), which its HTTP API and CLI print
// after "Validation failed" (rabbit_runtime_parameters:format_error/1).
type PolicyError struct {
	VHost, Name string
	Reasons     []string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("queues: policy %q in vhost %q: %s", e.Name, e.VHost, strings.Join(e.Reasons, "; "))
}

// Unwrap makes errors.Is(err, ErrInvalidArgument) hold.
func (e *PolicyError) Unwrap() error { return ErrInvalidArgument }

// compilePolicy is policy.Compile with its reasons as a *PolicyError.
func compilePolicy(p policy.Policy) (*policy.Compiled, error) {
	cp, reasons := policy.Compile(p)
	if len(reasons) > 0 {
		return nil, &PolicyError{VHost: p.VHost, Name: p.Name, Reasons: reasons}
	}
	return cp, nil
}

// SetPolicy creates or replaces a policy. An invalid policy is refused
// with a *PolicyError (errors.Is ErrInvalidArgument) carrying RabbitMQ's
// validation texts, since RabbitMQ refuses policies through its CLI and
// HTTP API ("Validation failed ..."), not with an AMQP reply code; a
// missing vhost is ErrNotFound. The policy is in the catalog when it
// returns, and applies to the matching exchanges (alternate-exchange)
// at once; the watchers are told. Setting a policy to what it is already
// changes nothing and tells no one, as in RabbitMQ.
func (b *Broker) SetPolicy(p policy.Policy) error {
	cp, err := compilePolicy(p)
	if err != nil {
		return err
	}
	return b.execErr(&cmdSetPolicy{recordOf(cp)})
}

func (c *cmdSetPolicy) apply(b *Broker) (any, error) {
	cp, err := compilePolicy(c.policy())
	if err != nil {
		return nil, err
	}
	p := cp.Policy
	return nil, b.setPolicy(cp, p)
}

func (b *Broker) setPolicy(cp *policy.Compiled, p policy.Policy) error {
	ps := &b.pol
	ps.mu.Lock()
	if !b.VHostExists(p.VHost) {
		ps.mu.Unlock()
		return fmt.Errorf("policy %q: vhost %q: %w", p.Name, p.VHost, ErrNotFound)
	}
	set, changed := ps.snapshot(p.VHost).policies().With(cp)
	if !changed {
		ps.mu.Unlock()
		return nil
	}
	if err := b.cat.put(policyKey(cp.VHost, cp.Name), recordOf(cp)); err != nil {
		ps.mu.Unlock()
		return err
	}
	ps.publishLocked(cp.VHost, set)
	ps.mu.Unlock()
	b.policiesChanged(cp.VHost)
	return nil
}

// ClearPolicy deletes a policy (ErrNotFound if there is none). Entities
// it applied to fall back to the next matching policy, if any.
func (b *Broker) ClearPolicy(vhost, name string) error {
	return b.execErr(&cmdClearPolicy{VHost: vhost, Name: name})
}

func (c *cmdClearPolicy) apply(b *Broker) (any, error) { return nil, b.clearPolicy(c.VHost, c.Name) }

func (b *Broker) clearPolicy(vhost, name string) error {
	ps := &b.pol
	ps.mu.Lock()
	set, found := ps.snapshot(vhost).policies().Without(name)
	if !found {
		ps.mu.Unlock()
		return fmt.Errorf("policy %q in vhost %q: %w", name, vhost, ErrNotFound)
	}
	if err := b.cat.delete(policyKey(vhost, name)); err != nil {
		ps.mu.Unlock()
		return err
	}
	ps.publishLocked(vhost, set)
	ps.mu.Unlock()
	b.policiesChanged(vhost)
	return nil
}

// Policies returns the policies of vhost in the order rabbitmqctl
// list_policies prints them (rabbit_policy:sort_by_priority): priority
// ascending, then (where RabbitMQ's order is unspecified) name.
func (b *Broker) Policies(vhost string) []policy.Policy {
	return b.pol.snapshot(vhost).policies().Policies()
}

// Policy returns one policy, or ErrNotFound.
func (b *Broker) Policy(vhost, name string) (policy.Policy, error) {
	if p, ok := b.pol.snapshot(vhost).policies().Get(name); ok {
		return p, nil
	}
	return policy.Policy{}, fmt.Errorf("policy %q in vhost %q: %w", name, vhost, ErrNotFound)
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
// vhost (see policy.Set.Match). kind is policy.KindExchange or a queue
// type (QueueClassic, QueueQuorum, QueueStream; "queue" means classic).
func (b *Broker) EffectivePolicy(vhost, name, kind string) (policy.Policy, bool) {
	if p := b.pol.snapshot(vhost).policies().Match(name, kind); p != nil {
		return p.Copy(), true
	}
	return policy.Policy{}, false
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
	byVHost := map[string][]*policy.Compiled{}
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
		cp, err := compilePolicy(policy.Policy{
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
		ps.publishLocked(vhost, policy.NewSet(list))
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
	pols := b.pol.snapshot(vhost).policies()
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
func resolveAE(x *route.Exchange, pols *policy.Set) {
	def := x.Def()
	if ae, ok := def.Args[argAlternateExchange].(string); ok {
		x.SetAlternate(ae)
		return
	}
	x.ClearAlternate()
	if p := pols.Match(def.Name, policy.KindExchange); p != nil {
		if ae, ok := p.Definition[argAlternateExchange].(string); ok {
			x.SetAlternate(ae)
		}
	}
}

// resolveExchangePolicy resolves a new exchange's alternate exchange
// against the current policies of vt's vhost. Called by commitTopo.
// REQUIRES: vt.wmu held; x not yet in vt.
func (b *Broker) resolveExchangePolicy(vt *vhostTopo, x *route.Exchange) {
	resolveAE(x, b.pol.snapshot(vt.name).policies())
}
