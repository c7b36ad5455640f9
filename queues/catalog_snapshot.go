package queues

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A snapshot of the replicated catalog, for a cluster's raft group 0:
// what a node that fell behind the log's compaction (or joins with an
// empty catalog) takes instead of the entries it missed. It holds what
// the commands of replicate.go change, in the commands' own forms; the
// node's own things (its classic queues, the bindings to them, its
// body logs' checkpoints) are not in it; its replicated streams and
// quorum queues are, as placements (catalog_snapshot_placed.go).

// catalogSnapshotVersion is the version of the snapshots this code
// writes: 2 added the placements (Streams, Queues, QueueBindings). A
// snapshot without a version (1) has none, which is not "none exist":
// restoring it leaves this node's placements alone.
const catalogSnapshotVersion = 2

// catalogSnapshot is a snapshot's JSON.
type catalogSnapshot struct {
	Version          int               `json:"version,omitempty"`
	VHosts           []VHost           `json:"vhosts"`
	Users            []User            `json:"users"`
	Permissions      []UserPermissions `json:"permissions"`
	TopicPermissions []TopicPermission `json:"topic_permissions"`
	GlobalParameters []GlobalParameter `json:"global_parameters"`
	Policies         []policyRecord    `json:"policies"`
	Exchanges        []exchangeCmd     `json:"exchanges"`
	Bindings         []bindingCmd      `json:"bindings"` // between exchanges
	// Replicated streams and quorum queues (ID 0: each node's own), and
	// the bindings to them.
	Streams       []StreamDef   `json:"streams"`
	Queues        []queueRecord `json:"queues"`
	QueueBindings []bindingCmd  `json:"queue_bindings"`
	// Where each node's stream listener is (cmdAdvertise), and the node
	// whose single-node catalog seeded the cluster (seed.go).
	NodeAddrs []NodeAddr `json:"node_addrs,omitempty"`
	Seeded    string     `json:"seeded,omitempty"`
	Forgotten []string   `json:"forgotten,omitempty"` // nodes forgotten for good (node.forget)
}

// CatalogSnapshot returns the replicated part of the catalog. Call it
// where no command is being applied (the replicator's goroutine).
func (b *Broker) CatalogSnapshot() ([]byte, error) {
	s := catalogSnapshot{Version: catalogSnapshotVersion}
	if err := b.cat.scan([]byte("nd/"), func(_, v []byte) error {
		var a NodeAddr
		if err := unmarshal(v, &a); err != nil {
			return err
		}
		s.NodeAddrs = append(s.NodeAddrs, a)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := b.cat.get(seedKey, &s.Seeded); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	var err error
	if s.VHosts, err = b.VHosts(); err != nil {
		return nil, err
	}
	if err := b.cat.scan([]byte("u/"), func(_, v []byte) error {
		var u User
		if err := unmarshal(v, &u); err != nil {
			return err
		}
		s.Users = append(s.Users, u) // as stored, not normal()ised
		return nil
	}); err != nil {
		return nil, err
	}
	if s.Permissions, err = b.AllPermissions(); err != nil {
		return nil, err
	}
	if s.TopicPermissions, err = b.TopicPermissions(); err != nil {
		return nil, err
	}
	if s.GlobalParameters, err = b.GlobalParameters(); err != nil {
		return nil, err
	}
	for _, v := range s.VHosts {
		for _, p := range b.Policies(v.Name) {
			s.Policies = append(s.Policies, policyRecord{
				VHost: p.VHost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
				Priority: p.Priority, Definition: p.Definition,
			})
		}
		for _, x := range b.Exchanges(v.Name) {
			if !builtinExchange(x.Name) {
				s.Exchanges = append(s.Exchanges, exchangeCmdDef(x))
			}
		}
		for _, bd := range b.Bindings(v.Name) {
			if bd.DestKind == DestExchange {
				s.Bindings = append(s.Bindings, bindingCmdDef(bd))
			}
		}
	}
	b.snapshotPlacements(&s)
	s.Forgotten = b.ForgottenNodes()
	return json.Marshal(s)
}

// builtinExchange reports whether every vhost has the exchange by itself.
func builtinExchange(name string) bool { return name == "" || strings.HasPrefix(name, "amq.") }

// RestoreCatalog makes the replicated part of the catalog what data (a
// CatalogSnapshot) says, through the commands' applies, so that the
// model in memory follows: what the snapshot lacks is deleted (a vhost
// with its queues and streams on this node; a replicated stream or queue
// with this node's copy), what differs is replaced (a moved leader
// reopens the copies in their roles, as the leader commands do).
// Call it where no command is being applied.
func (b *Broker) RestoreCatalog(data []byte) error {
	var s catalogSnapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("queues: catalog snapshot: %w", err)
	}
	var errs []error
	run := func(c command) {
		if _, err := c.apply(b); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("%s: %w", c.op(), err))
		}
	}

	// A forgotten node stays forgotten: the snapshot only adds.
	for _, node := range s.Forgotten {
		if !b.NodeForgotten(node) {
			run(&cmdForgetNode{Node: node})
		}
	}

	// VHosts and users first: permissions and everything else need them.
	curVHosts, err := b.VHosts()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, v := range s.VHosts {
		want[v.Name] = true
		run(&cmdPutVHost{VHost: v})
	}
	for _, v := range curVHosts {
		if !want[v.Name] {
			run(&cmdDeleteVHost{Name: v.Name})
		}
	}
	curUsers, err := b.Users()
	if err != nil {
		return err
	}
	want = map[string]bool{}
	for _, u := range s.Users {
		want[u.Name] = true
		run(&cmdPutUser{User: u})
	}
	for _, u := range curUsers {
		if !want[u.Name] {
			run(&cmdDeleteUser{Name: u.Name})
		}
	}

	// Permissions, topic permissions, global parameters: set what the
	// snapshot has, clear the rest.
	curPerms, err := b.AllPermissions()
	if err != nil {
		return err
	}
	want = map[string]bool{}
	for _, p := range s.Permissions {
		want[p.VHost+"\x00"+p.User] = true
		run(&cmdSetPermissions{User: p.User, VHost: p.VHost, Permissions: p.Permissions})
	}
	for _, p := range curPerms {
		if !want[p.VHost+"\x00"+p.User] {
			run(&cmdClearPermissions{User: p.User, VHost: p.VHost})
		}
	}
	curTopic, err := b.TopicPermissions()
	if err != nil {
		return err
	}
	want = map[string]bool{}
	for _, p := range s.TopicPermissions {
		want[p.VHost+"\x00"+p.User+"\x00"+p.Exchange] = true
		run(&cmdSetTopicPermission{p})
	}
	for _, p := range curTopic {
		if !want[p.VHost+"\x00"+p.User+"\x00"+p.Exchange] {
			run(&cmdClearTopicPermissions{User: p.User, VHost: p.VHost, Exchange: p.Exchange})
		}
	}
	curParams, err := b.GlobalParameters()
	if err != nil {
		return err
	}
	want = map[string]bool{}
	for _, p := range s.GlobalParameters {
		want[p.Name] = true
		run(&cmdSetGlobalParameter{p})
	}
	for _, p := range curParams {
		if !want[p.Name] {
			run(&cmdClearGlobalParameter{Name: p.Name})
		}
	}

	// Policies, then the topology, vhost by vhost. Exchanges and
	// bindings are added before the absent ones go, so that an
	// auto-delete exchange the snapshot keeps is never left unbound.
	wantPol := map[string]bool{}
	for _, p := range s.Policies {
		wantPol[p.VHost+"\x00"+p.Name] = true
		run(&cmdSetPolicy{p})
	}
	wantX := map[string]exchangeCmd{}
	for _, x := range s.Exchanges {
		wantX[x.VHost+"\x00"+x.Name] = x
	}
	wantB := map[string]bool{}
	for _, bd := range s.Bindings {
		wantB[bd.VHost+"\x00"+normalIdent(bd.def())] = true
	}
	vhosts := slices.Sorted(maps.Keys(vhostSet(s.VHosts)))
	for _, vhost := range vhosts {
		for _, p := range b.Policies(vhost) {
			if !wantPol[vhost+"\x00"+p.Name] {
				run(&cmdClearPolicy{VHost: vhost, Name: p.Name})
			}
		}
		for _, x := range b.Exchanges(vhost) {
			// An exchange whose definition changed goes first: it is
			// declared again below.
			if w, ok := wantX[vhost+"\x00"+x.Name]; ok && !builtinExchange(x.Name) &&
				assertExchangeEquivalent(x, w.def()) != nil {
				run(&cmdDeleteExchange{VHost: vhost, Name: x.Name})
			}
		}
	}
	placements := s.Version >= 2
	if placements {
		b.restoreReplaced(&s, run)
	}
	for _, a := range s.NodeAddrs {
		run(&cmdAdvertise{a})
	}
	if s.Seeded != "" {
		if err := b.cat.put(seedKey, s.Seeded); err != nil {
			errs = append(errs, err)
		}
	}
	for _, x := range s.Exchanges {
		run(&cmdDeclareExchange{x})
	}
	for _, bd := range s.Bindings {
		run(&cmdBind{bd})
	}
	if placements {
		b.restorePlacements(&s, run)
		b.restoreUnplaced(&s, vhosts, run)
	}
	for _, vhost := range vhosts {
		for _, bd := range b.Bindings(vhost) {
			if bd.DestKind == DestExchange && !wantB[vhost+"\x00"+normalIdent(bd)] {
				run(&cmdUnbind{bindingCmdDef(bd)})
			}
		}
		for _, x := range b.Exchanges(vhost) {
			if _, ok := wantX[vhost+"\x00"+x.Name]; !ok && !builtinExchange(x.Name) {
				run(&cmdDeleteExchange{VHost: vhost, Name: x.Name})
			}
		}
	}
	return errors.Join(errs...)
}

// normalIdent is a binding's identity as the index keys it.
func normalIdent(bd BindingDef) string {
	bd.Args = normalizeArgs(bd.Args)
	return bd.Ident()
}

func vhostSet(vs []VHost) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v.Name] = true
	}
	return m
}
