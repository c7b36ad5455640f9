package queues

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues/policy"
)

// replicatedDump is catalogDump without the node's own entries: the
// bindings to queues.
func replicatedDump(t *testing.T, b *Broker) map[string]string {
	t.Helper()
	out := catalogDump(t, b)
	for k, v := range out {
		var rec struct {
			DestKind *DestKind `json:"dest_kind"`
		}
		if len(k) > 2 && k[:2] == "b/" && json.Unmarshal([]byte(v), &rec) == nil && rec.DestKind != nil && *rec.DestKind == DestQueue {
			delete(out, k)
		}
	}
	return out
}

func exchangeList(b *Broker, vhost string) string {
	var s string
	for _, x := range b.Exchanges(vhost) {
		s += fmt.Sprintf("%s:%s:%v:%v:%v:%#v\n", x.Name, x.Type, x.Durable, x.AutoDelete, x.Internal, x.Args)
	}
	for _, bd := range b.Bindings(vhost) {
		if bd.DestKind == DestExchange {
			s += fmt.Sprintf("%s->%s:%s:%#v\n", bd.Source, bd.Dest, bd.Key, bd.Args)
		}
	}
	return s
}

// A node restored from a snapshot has the catalog of the node that took
// it: what it had of its own that the snapshot lacks is gone (a vhost
// with its queue), what differs is replaced, and the model in memory
// (exchanges, bindings, policies, topic permissions) follows.
func TestCatalogSnapshotRestore(t *testing.T) {
	bs, _ := openCluster(t, 2)
	n1, n2 := bs[0], bs[1]
	_, err := n1.PutVHost(VHost{Name: "v1", Description: "one", Limits: map[string]int64{"max-connections": 5}})
	must(t, err)
	must(t, n2.AddUser("alice", "pw", "management"))
	must(t, n1.SetPermissions("alice", "v1", Permissions{Configure: "", Write: "^w", Read: ".*"}))
	must(t, n2.SetTopicPermission(TopicPermission{User: "alice", VHost: "v1", Exchange: "amq.topic", Write: "^ok\\.", Read: ".*"}))
	must(t, n1.SetGlobalParameter("cluster_name", json.RawMessage(`"c1"`)))
	must(t, n2.SetPolicy(policy.Policy{VHost: "/", Name: "p1", Pattern: ".*", ApplyTo: "exchanges", Definition: map[string]any{"alternate-exchange": "ae"}}))
	must(t, n1.DeclareExchange(ExchangeDef{VHost: "/", Name: "src", Type: "topic", Durable: true}))
	must(t, n1.DeclareExchange(ExchangeDef{VHost: "/", Name: "dst", Type: "fanout", Durable: true, Args: map[string]any{"x-w": int16(2)}}))
	must(t, n1.DeclareExchange(ExchangeDef{VHost: "v1", Name: "tmp", Type: "direct", AutoDelete: true}))
	must(t, n2.Bind(BindingDef{VHost: "/", Source: "src", DestKind: DestExchange, Dest: "dst", Key: "a.#"}))
	must(t, n2.Bind(BindingDef{VHost: "v1", Source: "amq.direct", DestKind: DestExchange, Dest: "tmp", Key: "k", Args: map[string]any{"n": int32(1)}}))
	declareQ(t, n1, "mine", true) // n1's own, with a binding: not in the snapshot
	must(t, n1.Bind(BindingDef{VHost: "/", Source: "src", DestKind: DestQueue, Dest: "mine", Key: "#"}))

	snap, err := n1.CatalogSnapshot()
	must(t, err)

	f, err := Open(t.TempDir(), Options{Clustered: true})
	must(t, err)
	defer f.Close()
	// f's own past, which the snapshot overrides.
	must(t, f.AddVHost("/"))
	must(t, f.AddVHost("junk"))
	declareQ(t, f, "doomed", true)
	must(t, f.AddUser("mallory", "x"))
	must(t, f.AddUser("alice", "other-password"))
	must(t, f.SetPermissions("mallory", "/", Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
	must(t, f.SetPolicy(policy.Policy{VHost: "/", Name: "old", Pattern: "^x", ApplyTo: "queues", Definition: map[string]any{"max-length": 1}}))
	must(t, f.DeclareExchange(ExchangeDef{VHost: "/", Name: "src", Type: "direct", Durable: true})) // another type
	must(t, f.DeclareExchange(ExchangeDef{VHost: "/", Name: "gone", Type: "fanout", Durable: true}))
	must(t, f.Bind(BindingDef{VHost: "/", Source: "gone", DestKind: DestExchange, Dest: "src"}))
	must(t, f.SetGlobalParameter("stale", json.RawMessage(`1`)))

	must(t, f.RestoreCatalog(snap))

	want, got := replicatedDump(t, n1), replicatedDump(t, f)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("restored %q = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("restored catalog keeps %q", k)
		}
	}
	for _, vhost := range []string{"/", "v1"} {
		if a, b := exchangeList(n1, vhost), exchangeList(f, vhost); a != b {
			t.Errorf("vhost %s: topology\n%s\nrestored\n%s", vhost, a, b)
		}
	}
	if f.VHostExists("junk") {
		t.Error("vhost junk survived")
	}
	if _, err := f.Queue("junk", "doomed"); err == nil {
		t.Error("queue doomed survived its vhost")
	}
	if p, ok := f.EffectivePolicy("/", "src", policy.KindExchange); !ok || p.Name != "p1" {
		t.Errorf("effective policy of src: %+v %v, want p1", p, ok)
	}
	if _, ok := f.EffectivePolicy("/", "xq", QueueClassic); ok {
		t.Error("policy old survived")
	}
	if err := f.CheckTopicPermission("alice", "v1", "amq.topic", PermWrite, "bad.key"); err == nil {
		t.Error("topic permission not restored")
	}
	if _, err := f.GetUser("mallory"); !errors.Is(err, ErrNotFound) {
		t.Errorf("mallory: %v", err)
	}
	if _, err := f.Authenticate("alice", "pw", nil); err != nil {
		t.Errorf("alice with the snapshot's password: %v", err)
	}
	// Restoring twice changes nothing.
	must(t, f.RestoreCatalog(snap))
	again := replicatedDump(t, f)
	for k, v := range got {
		if again[k] != v {
			t.Errorf("second restore changed %q", k)
		}
	}
}

// A snapshot carries the replicated streams and quorum queues and the
// bindings to them: a node restored from it has every placement (with
// a copy of its own, opened in its role), the leaders as moved, none of
// what the snapshot lacks (data included), and a stream declared again
// under an old name is the new one.
func TestCatalogSnapshotPlacements(t *testing.T) {
	bs, _ := openCluster(t, 3)
	n1, n2 := bs[0], bs[1]
	quorum := map[string]any{"x-queue-type": "quorum"}
	must(t, n1.CreateStream("/", "s1", map[string]string{"max-age": "1h"}))
	must(t, n1.CreateStream("/", "moved", nil))
	must(t, n1.CreateStream("/", "again", map[string]string{"max-age": "2h"}))
	_, _, _, err := n1.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "qq", Durable: true, Args: quorum}})
	must(t, err)
	must(t, n2.Bind(BindingDef{VHost: "/", Source: "amq.direct", DestKind: DestQueue, Dest: "s1", Key: "k1"}))
	must(t, n2.Bind(BindingDef{VHost: "/", Source: "amq.topic", DestKind: DestQueue, Dest: "qq", Key: "a.#"}))
	must(t, n1.MoveStreamLeader("/", "moved", "n2", 2))
	must(t, n1.MoveQueueLeader("/", "qq", "n2", 3))
	snap, err := n1.CatalogSnapshot()
	must(t, err)

	f, err := Open(t.TempDir(), Options{Clustered: true, NodeName: "n3"})
	must(t, err)
	defer f.Close()
	f.SetClusterNodes([]string{"n1", "n2", "n3"})
	members := []string{"n1", "n2", "n3"}
	apply := func(c command) {
		t.Helper()
		if _, err := c.apply(f); err != nil {
			t.Fatalf("%s: %v", c.op(), err)
		}
	}
	// f's own past: a stream and a queue since deleted, the stream the
	// leader moved from, an older stream under the name "again", and a
	// binding the cluster no longer has.
	must(t, f.AddVHost("/"))
	apply(&cmdCreateStream{StreamDef{VHost: "/", Name: "gone", Members: members, Leader: "n1", Epoch: 1}})
	apply(&cmdCreateStream{StreamDef{VHost: "/", Name: "moved", Members: members, Leader: "n1", Epoch: 1}})
	apply(&cmdCreateStream{StreamDef{VHost: "/", Name: "again", Members: members, Leader: "n1", Epoch: 4}})
	qargs, err := encodeArgs(quorum)
	must(t, err)
	apply(&cmdDeclareQuorum{queueRecord{VHost: "/", Name: "gone-q", Type: QueueQuorum, Args: qargs, Members: members, Leader: "n1", Epoch: 1}})
	apply(&cmdBind{bindingCmdDef(BindingDef{VHost: "/", Source: "amq.direct", DestKind: DestQueue, Dest: "moved", Key: "old"})})
	goneS, _ := f.StreamPlacement("/", "gone")
	goneQ, _ := f.queueReg().placement("/", "gone-q")
	oldAgain, _ := f.StreamPlacement("/", "again")
	dirs := []string{f.streamDir(goneS.ID), f.queueDir(true, goneQ.ID), f.streamDir(oldAgain.ID)}

	must(t, f.RestoreCatalog(snap))
	check := func() {
		t.Helper()
		placements := func(b *Broker) string {
			var out []string
			for _, p := range b.Placements() {
				out = append(out, fmt.Sprintf("%s/%s queue=%v members=%v leader=%s epoch=%d", p.VHost, p.Name, p.Queue, p.Members, p.Leader, p.Epoch))
			}
			slices.Sort(out)
			return strings.Join(out, "\n")
		}
		if want, got := placements(n1), placements(f); got != want {
			t.Fatalf("restored placements\n%s\nwant\n%s", got, want)
		}
		for _, name := range []string{"s1", "moved", "again", "qq"} {
			if _, err := f.ReplicatedLog("/", name); err != nil {
				t.Errorf("no copy of %s: %v", name, err)
			}
		}
		if def, _ := f.StreamPlacement("/", "again"); def.Args["max-age"] != "2h" {
			t.Errorf("stream again: %+v, want the new one", def)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s survives: %v", d, err)
			}
		}
		for _, c := range []struct{ x, key, want string }{{"amq.direct", "k1", "s1"}, {"amq.topic", "a.b", "qq"}, {"amq.direct", "old", ""}} {
			names, err := f.Route("/", c.x, []string{c.key}, nil, nil)
			if err != nil || strings.Join(names, ",") != c.want {
				t.Errorf("%s %s routes to %v, %v; want %q", c.x, c.key, names, err, c.want)
			}
		}
	}
	check()
	must(t, f.RestoreCatalog(snap)) // twice: no change
	check()

	// A snapshot of the first version has no placements, which does not
	// mean that none exist: restoring it keeps them.
	var v1 map[string]json.RawMessage
	must(t, json.Unmarshal(snap, &v1))
	for _, k := range []string{"version", "streams", "queues", "queue_bindings"} {
		delete(v1, k)
	}
	old, err := json.Marshal(v1)
	must(t, err)
	must(t, f.RestoreCatalog(old))
	check()
}
