package queues

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warren-mq/warren/queues/policy"
)

// orderedLog is a Replicator for tests: one log, applied on every node
// in order as it is appended (what a raft group gives, without faults).
type orderedLog struct {
	mu    sync.Mutex
	nodes []*Broker
	log   [][]byte
	fail  error // Replicate refuses with it, applying nothing
}

func (l *orderedLog) Replicate(_ context.Context, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.log = append(l.log, bytes.Clone(data))
	for _, b := range l.nodes {
		if err := b.ApplyCommand(data); err != nil {
			return err
		}
	}
	return nil
}

func openCluster(t *testing.T, n int) ([]*Broker, *orderedLog) {
	t.Helper()
	l := &orderedLog{}
	var bs []*Broker
	for i := range n {
		b, err := Open(t.TempDir(), Options{Clustered: true, NodeName: fmt.Sprintf("n%d", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		b.SetClusterNodes([]string{"n1", "n2", "n3"}[:n])
		if b.VHostExists(DefaultVHost) {
			t.Fatal("a clustered node bootstrapped its catalog alone")
		}
		b.SetReplicator(l, fmt.Sprintf("n%d", i+1), 0)
		bs = append(bs, b)
	}
	l.nodes = bs
	// Every node proposes the default identity; the first one applied
	// makes it, the others change nothing.
	for _, b := range bs {
		must(t, b.BootstrapCluster())
	}
	return bs, l
}

// catalogDump returns the replicated part of b's catalog, key => value.
func catalogDump(t *testing.T, b *Broker) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, prefix := range []string{"v/", "u/", "p/", "tp/", "gp/", "pol/", "e/", "b/", "nd/", "sd/"} {
		if err := b.cat.scan([]byte(prefix), func(k, v []byte) error {
			out[string(k)] = canonicalRecord(t, v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// canonicalRecord renders a catalog value so that equal values read
// equal: argument tables are gob, whose maps come in any order.
func canonicalRecord(t *testing.T, v []byte) string {
	var rec map[string]any
	if json.Unmarshal(v, &rec) != nil {
		return string(v)
	}
	for k, f := range rec {
		if s, ok := f.(string); ok && (k == "args" || k == "Args") {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				continue
			}
			args, err := decodeArgs(raw)
			if err != nil {
				t.Fatalf("catalog args: %v", err)
			}
			rec[k] = fmt.Sprintf("%#v", args) // fmt sorts map keys
		}
	}
	out, _ := json.Marshal(rec) // sorted keys
	return string(out)
}

func sameCatalogs(t *testing.T, bs ...*Broker) map[string]string {
	t.Helper()
	want := catalogDump(t, bs[0])
	for i, b := range bs[1:] {
		got := catalogDump(t, b)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("node %d: %q = %q, node 1 has %q", i+2, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("node %d has %q, node 1 does not", i+2, k)
			}
		}
	}
	return want
}

// Changes made on any node reach every node, identically, and each
// caller gets its own command's result.
func TestReplicatedAccessCommands(t *testing.T) {
	bs, l := openCluster(t, 3)
	n1, n2, n3 := bs[0], bs[1], bs[2]

	must(t, n1.AddVHost("v1"))
	if err := n2.AddVHost("v1"); !errors.Is(err, ErrExists) {
		t.Fatalf("AddVHost on n2 of a vhost n1 made: %v, want ErrExists", err)
	}
	must(t, n2.AddUser("alice", "s3cret", "management"))
	must(t, n3.SetPermissions("alice", "v1", Permissions{Configure: "^a", Write: ".*", Read: ".*"}))
	if err := n3.SetPermissions("bob", "v1", Permissions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("permissions for a missing user: %v, want ErrNotFound", err)
	}
	must(t, n1.SetTopicPermission(TopicPermission{User: "alice", VHost: "v1", Exchange: "amq.topic", Write: "^a\\.", Read: ".*"}))
	created, err := n2.PutVHost(VHost{Name: "v2", Description: "second", Limits: map[string]int64{"max-queues": 3}})
	if err != nil || !created {
		t.Fatalf("PutVHost v2: created=%v err=%v", created, err)
	}
	created, err = n3.PutVHost(VHost{Name: "v2", Description: "renamed"}) // nil limits: kept
	if err != nil || created {
		t.Fatalf("PutVHost v2 again: created=%v err=%v", created, err)
	}
	must(t, n1.SetGlobalParameter("cluster_name", json.RawMessage(`"rabbit@three"`)))
	must(t, n2.SetPolicy(policy.Policy{VHost: "v1", Name: "ttl", Pattern: "^t\\.", ApplyTo: "queues", Priority: 2,
		Definition: map[string]any{"message-ttl": 60000, "max-length": 10}}))

	dump := sameCatalogs(t, bs...)
	if len(dump) == 0 {
		t.Fatal("empty catalog")
	}
	for i, b := range bs {
		if _, err := b.Authenticate("alice", "s3cret", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}); err != nil {
			t.Errorf("node %d: alice does not authenticate: %v", i+1, err)
		}
		v, err := b.GetVHost("v2")
		if err != nil || v.Description != "renamed" || v.Limits["max-queues"] != 3 {
			t.Errorf("node %d: v2 = %+v, %v; want description renamed, max-queues 3 kept", i+1, v, err)
		}
		p, ok := b.EffectivePolicy("v1", "t.1", QueueClassic)
		if !ok || p.Name != "ttl" || p.Definition["message-ttl"] != int64(60000) {
			t.Errorf("node %d: effective policy %+v %v", i+1, p, ok)
		}
		if v, err := b.GetGlobalParameter("cluster_name"); err != nil || string(v) != `"rabbit@three"` {
			t.Errorf("node %d: cluster_name %s %v", i+1, v, err)
		}
	}

	must(t, n3.ClearPolicy("v1", "ttl"))
	if err := n1.ClearPolicy("v1", "ttl"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second ClearPolicy: %v, want ErrNotFound", err)
	}
	must(t, n1.ClearTopicPermissions("alice", "v1", ""))
	must(t, n2.ClearPermissions("alice", "v1"))
	must(t, n3.ClearGlobalParameter("cluster_name"))
	must(t, n1.DeleteUser("alice"))
	must(t, n2.DeleteVHost("v2"))
	dump = sameCatalogs(t, bs...)
	for k := range dump {
		switch k {
		case "v//", "v/v1", "u/guest", "p//\x00guest":
		default:
			t.Errorf("left after the deletes: %q", k)
		}
	}
	for i, b := range bs {
		if _, err := b.GetUser("alice"); !errors.Is(err, ErrNotFound) {
			t.Errorf("node %d: alice: %v", i+1, err)
		}
	}

	// A log applied again from the start, each entry twice (a crash
	// between an apply and the record of its index), on a fresh node
	// gives the same catalog.
	fresh, err := Open(t.TempDir(), Options{Clustered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, e := range l.log {
		must(t, fresh.ApplyCommand(e))
		must(t, fresh.ApplyCommand(e))
	}
	sameCatalogs(t, n1, fresh)
}

func TestReplicateRefused(t *testing.T) {
	bs, l := openCluster(t, 2)
	l.fail = errors.New("no leader")
	err := bs[0].AddVHost("v1")
	if !errors.Is(err, ErrNotApplied) {
		t.Fatalf("AddVHost without a quorum: %v, want ErrNotApplied", err)
	}
	if bs[0].VHostExists("v1") || bs[1].VHostExists("v1") {
		t.Fatal("a refused command was applied")
	}
	// An entry the node cannot read is the replicator's error, not a
	// panic.
	for _, bad := range []string{`{`, `{"op":"nope","a":{}}`, `{"op":"vhost.add","a":[1]}`} {
		if err := bs[1].ApplyCommand([]byte(bad)); err == nil {
			t.Errorf("ApplyCommand(%s) = nil", bad)
		}
	}
}

// Exchanges and bindings between exchanges, with typed arguments, are
// the same on every node; a redeclare is answered without the log.
func TestReplicatedExchanges(t *testing.T) {
	bs, l := openCluster(t, 3)
	n1, n2, n3 := bs[0], bs[1], bs[2]
	args := map[string]any{"alternate-exchange": "ae", "x-weight": int16(3)}
	must(t, n1.DeclareExchange(ExchangeDef{VHost: "/", Name: "src", Type: "headers", Durable: true, Args: args}))
	must(t, n1.DeclareExchange(ExchangeDef{VHost: "/", Name: "dst", Type: "fanout", Durable: true}))
	logged := len(l.log)
	must(t, n2.DeclareExchange(ExchangeDef{VHost: "/", Name: "src", Type: "headers", Durable: true, Args: args}))
	if len(l.log) != logged {
		t.Errorf("an equivalent redeclare went through the log")
	}
	err := n3.DeclareExchange(ExchangeDef{VHost: "/", Name: "src", Type: "headers", Durable: true,
		Args: map[string]any{"alternate-exchange": "ae", "x-weight": int16(3), "x-more": "y"}})
	if err != nil {
		t.Fatalf("extra argument on redeclare: %v (RabbitMQ compares only alternate-exchange)", err)
	}
	err = n3.DeclareExchange(ExchangeDef{VHost: "/", Name: "src", Type: "direct", Durable: true})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodePreconditionFailed {
		t.Fatalf("inequivalent redeclare on n3: %v, want 406", err)
	}
	hargs := map[string]any{"x-match": "all", "k": int32(7)}
	must(t, n2.Bind(BindingDef{VHost: "/", Source: "src", DestKind: DestExchange, Dest: "dst", Args: hargs}))
	must(t, n3.Bind(BindingDef{VHost: "/", Source: "src", DestKind: DestExchange, Dest: "dst", Args: hargs})) // idempotent
	err = n1.DeleteExchange("/", "src", true)
	if !errors.As(err, &e) || e.Code != CodePreconditionFailed {
		t.Fatalf("delete if-unused of a bound exchange: %v, want 406", err)
	}
	sameCatalogs(t, bs...)
	for i, b := range bs {
		got := b.BindingsFrom("/", "src")
		if len(got) != 1 || got[0].Dest != "dst" || got[0].Args["k"] != int32(7) {
			t.Errorf("node %d: bindings from src %+v", i+1, got)
		}
		x, err := b.Exchange("/", "src")
		if err != nil || x.Args["x-weight"] != int16(3) {
			t.Errorf("node %d: src %+v %v, want x-weight int16 3", i+1, x, err)
		}
	}
	must(t, n3.Unbind(BindingDef{VHost: "/", Source: "src", DestKind: DestExchange, Dest: "dst", Args: hargs}))
	must(t, n1.DeleteExchange("/", "src", true))
	sameCatalogs(t, bs...)
	for i, b := range bs {
		if _, err := b.Exchange("/", "src"); err == nil {
			t.Errorf("node %d: src still there", i+1)
		}
		if len(b.BindingsFrom("/", "src")) != 0 {
			t.Errorf("node %d: bindings left", i+1)
		}
	}
}

func TestBootstrapCluster(t *testing.T) {
	bs, l := openCluster(t, 3)
	if len(l.log) != 3 {
		t.Fatalf("%d entries, want 3 bootstrap commands", len(l.log))
	}
	dump := sameCatalogs(t, bs...)
	want := []string{"p//\x00guest", "u/guest", "v//"}
	if len(dump) != len(want) {
		t.Fatalf("catalog after bootstrap: %q, want %q", dump, want)
	}
	for _, k := range want {
		if _, ok := dump[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	for i, b := range bs {
		if _, err := b.Authenticate("guest", "guest", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			t.Errorf("node %d: guest: %v", i+1, err)
		}
	}
}

// In a cluster a classic queue is the cluster's name and its home
// node's queue: every node knows it, bindings to it are the cluster's,
// an exclusive queue is locked to its connection everywhere and goes
// with it, and a deletion anywhere deletes it at home.
func TestClusterClassicQueues(t *testing.T) {
	bs, _ := openCluster(t, 2)
	b1, b2 := bs[0], bs[1]
	q := declareQ(t, b1, "cq", true)
	if q == nil {
		t.Fatal("the home node does not run its queue")
	}
	def, p, ok := b2.PlacedQueue("/", "cq")
	if !ok || def.Type != QueueClassic || !def.Durable || p.Leader != "n1" || len(p.Members) != 1 {
		t.Fatalf("n2's record of cq: %+v %+v %v", def, p, ok)
	}
	if q2, _, _, err := b2.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "cq", Durable: true}}); err != nil || q2 != nil {
		t.Fatalf("redeclare on n2: %v %v", q2, err)
	}
	if _, _, _, err := b2.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "cq", Durable: false}}); code(err) != CodePreconditionFailed {
		t.Fatalf("inequivalent redeclare on n2: %v", err)
	}
	must(t, b2.Bind(BindingDef{VHost: "/", Source: "amq.fanout", DestKind: DestQueue, Dest: "cq"}))
	for i, b := range bs {
		if routed, err := b.Route("/", "amq.fanout", []string{""}, nil, nil); err != nil || !slices.Equal(routed, []string{"cq"}) {
			t.Errorf("node %d routes amq.fanout to %q (%v), want [cq]", i+1, routed, err)
		}
	}
	if _, err := b2.Queue("/", "cq"); code(err) != CodeNotFound || !strings.Contains(err.Error(), "led by node 'n1'") {
		t.Fatalf("n2.Queue(cq): %v", err)
	}

	// Exclusive: locked to its connection on both nodes; gone with it.
	owner, other := new(int), new(int)
	ex, _, _, err := b1.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "ex", Exclusive: true}, Owner: owner})
	if err != nil || ex == nil || ex.Owner() != owner {
		t.Fatalf("exclusive declare: %v %v", ex, err)
	}
	for i, b := range bs {
		_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "ex", Exclusive: true}, Owner: other})
		if code(err) != CodeResourceLocked {
			t.Errorf("node %d: another connection's declare of ex: %v", i+1, err)
		}
	}
	if _, err := b2.DeleteQueue("/", "ex", other, false, false); code(err) != CodeResourceLocked {
		t.Errorf("n2: delete of ex: %v", err)
	}
	b1.OwnerClosed(owner)
	for i, b := range bs {
		if _, _, ok := b.PlacedQueue("/", "ex"); ok {
			t.Errorf("node %d still knows ex after its connection closed", i+1)
		}
	}

	// Deleted on n2: gone at home, files included.
	dir := b1.queueDir(true, q.Def().ID)
	if _, err := b2.DeleteQueue("/", "cq", nil, false, false); err != nil {
		t.Fatal(err)
	}
	for i, b := range bs {
		if _, _, ok := b.PlacedQueue("/", "cq"); ok {
			t.Errorf("node %d still knows cq", i+1)
		}
	}
	if _, err := b1.Queue("/", "cq"); code(err) != CodeNotFound {
		t.Errorf("n1 still runs cq: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cq's log is still there: %v", err)
	}
}
