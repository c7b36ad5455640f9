package queues

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warren-mq/warren/queues/policy"
)

func setPolicy(t testing.TB, b *Broker, name, pattern, applyTo string, priority int, def map[string]any) {
	t.Helper()
	must(t, b.SetPolicy(policy.Policy{VHost: "/", Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: def}))
}

// effective returns the name of the policy applying to name, "" if none.
func effective(b *Broker, name, kind string) string {
	p, ok := b.EffectivePolicy("/", name, kind)
	if !ok {
		return ""
	}
	return p.Name
}

// Ensure SetPolicy refuses an invalid policy with a *PolicyError carrying
// policy.Compile's reasons, stores nothing then, and refuses what is
// missing with ErrNotFound. The texts themselves are policy's tests'.
func TestPolicyValidation(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	err := b.SetPolicy(policy.Policy{VHost: "/", Name: "p", Pattern: "(", ApplyTo: "x", Definition: map[string]any{"foo": "bar"}})
	var pe *PolicyError
	if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetPolicy: got %v, want a *PolicyError", err)
	}
	want := []string{
		`[{<<"foo">>,<<"bar">>}] are not recognised policy settings`,
		"apply-to 'x' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'",
		"pattern should be regular expression but is invalid: error parsing regexp: missing closing ): `(`",
	}
	if pe.VHost != "/" || pe.Name != "p" || !slices.Equal(pe.Reasons, want) {
		t.Errorf("SetPolicy:\ngot  %+v\nwant %q", pe, want)
	}
	if got, want := err.Error(), `queues: policy "p" in vhost "/": `+strings.Join(want, "; "); got != want {
		t.Errorf("error text:\ngot  %s\nwant %s", got, want)
	}
	if ps := b.Policies("/"); len(ps) != 0 {
		t.Fatalf("refused policies stored: %+v", ps)
	}

	// What SetPolicy stores is normalized.
	setPolicy(t, b, "ints", "x", "", 0, map[string]any{"message-ttl": int8(5), "expires": json.Number("9")})
	got, err := b.Policy("/", "ints")
	must(t, err)
	if wantDef := map[string]any{"message-ttl": int64(5), "expires": int64(9)}; got.ApplyTo != policy.ApplyAll || !reflect.DeepEqual(got.Definition, wantDef) {
		t.Errorf("stored %+v", got)
	}

	// A missing vhost.
	if err := b.SetPolicy(policy.Policy{VHost: "nope", Name: "p", Pattern: ".*", Definition: map[string]any{"expires": 1}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetPolicy in a missing vhost: %v", err)
	}
	// Policy and ClearPolicy of a missing policy.
	if _, err := b.Policy("/", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Policy: %v", err)
	}
	if err := b.ClearPolicy("/", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ClearPolicy: %v", err)
	}
	if err := b.ClearPolicy("nope", "p"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ClearPolicy in a missing vhost: %v", err)
	}
}

// Ensure policies survive a restart with their normalized definitions,
// cleared ones stay cleared, and records of a vhost that is gone are
// removed.
func TestPolicyPersistence(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	var def map[string]any
	must(t, json.Unmarshal([]byte(`{"max-length-bytes": 60000, "queue-leader-locator": "balanced", "max-age": "1h"}`), &def))
	must(t, b.SetPolicy(policy.Policy{VHost: "/", Name: "a", Pattern: "^a", ApplyTo: policy.ApplyQueues, Priority: 3, Definition: def}))
	setPolicy(t, b, "b", "^b", policy.ApplyExchanges, -2, map[string]any{"alternate-exchange": "ae"})
	setPolicy(t, b, "c", "^c", "", 0, map[string]any{"expires": 5})
	must(t, b.ClearPolicy("/", "c"))
	must(t, b.AddVHost("v"))
	must(t, b.SetPolicy(policy.Policy{VHost: "v", Name: "x", Pattern: ".*", Definition: map[string]any{"expires": 5}}))
	want := b.Policies("/")
	v0 := b.PolicyVersion("/")
	if v0 == 0 {
		t.Fatal("PolicyVersion 0 with policies set")
	}
	// A stale record: its vhost deleted behind the broker's back.
	must(t, b.cat.delete(vhostKey("v")))
	must(t, b.Close())

	b = openBroker(t, dir)
	defer b.Close()
	got := b.Policies("/")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart:\ngot  %+v\nwant %+v", got, want)
	}
	if v := got[1].Definition["max-length-bytes"]; v != int64(60000) {
		t.Fatalf("max-length-bytes %T %v after restart", v, v)
	}
	if effective(b, "abc", QueueClassic) != "" || effective(b, "abc", QueueStream) != "a" {
		t.Fatal("policy a not applied as before the restart (max-age makes it stream-only)")
	}
	if n := catalogCount(t, b, "pol/"); n != 2 {
		t.Fatalf("%d policy records, want 2", n)
	}
	if ps := b.Policies("v"); ps != nil {
		t.Fatalf("policies of a deleted vhost loaded: %+v", ps)
	}
	if b.PolicyVersion("/") == 0 {
		t.Fatal("PolicyVersion 0 after restart")
	}
}

// Ensure deleting a vhost deletes its policies, from memory and from the
// catalog, and tells the watchers; a vhost of the same name starts clean.
func TestPolicyVHostDeleted(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	must(t, b.AddVHost("v"))
	must(t, b.SetPolicy(policy.Policy{VHost: "v", Name: "p", Pattern: ".*", Definition: map[string]any{"expires": 5}}))
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 5})
	var told []string
	cancel := b.WatchPolicies(func(vhost string) { told = append(told, vhost) })
	defer cancel()
	must(t, b.DeleteVHost("v"))
	if !slices.Equal(told, []string{"v"}) {
		t.Fatalf("watchers told %v, want [v]", told)
	}
	if n := catalogCount(t, b, "pol/v\x00"); n != 0 {
		t.Fatalf("%d policy records left", n)
	}
	if n := catalogCount(t, b, "pol/"); n != 1 {
		t.Fatalf("%d policy records, want the one of /", n)
	}
	if b.PolicyVersion("v") != 0 || b.Policies("v") != nil {
		t.Fatal("policies of the deleted vhost left")
	}
	must(t, b.AddVHost("v"))
	if _, ok := b.EffectivePolicy("v", "q", QueueClassic); ok {
		t.Fatal("a new vhost has the old vhost's policy")
	}
	if effective(b, "q", QueueClassic) != "p" {
		t.Fatal("the policy of / is gone")
	}
}

// Ensure watchers are told of every change (and not of a set that changes
// nothing), after it is visible, and not after cancel; and that the
// version moves with the changes.
func TestWatchPolicies(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	if v := b.PolicyVersion("/"); v != 0 {
		t.Fatalf("PolicyVersion %d before any policy", v)
	}
	type event struct {
		vhost  string
		policy string
	}
	var events []event
	versions := map[uint64]bool{0: true}
	cancel := b.WatchPolicies(func(vhost string) {
		events = append(events, event{vhost, effective(b, "q", QueueClassic)})
		v := b.PolicyVersion(vhost)
		if versions[v] {
			t.Errorf("version %d seen before", v)
		}
		versions[v] = true
	})
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 5})
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 5}) // unchanged
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 6})
	setPolicy(t, b, "r", "^q$", "", 1, map[string]any{"expires": 6})
	must(t, b.ClearPolicy("/", "r"))
	want := []event{{"/", "p"}, {"/", "p"}, {"/", "r"}, {"/", "p"}}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("got %v, want %v", events, want)
	}
	cancel()
	setPolicy(t, b, "p", ".*", "", 0, map[string]any{"expires": 7})
	if len(events) != len(want) {
		t.Fatal("watcher told after cancel")
	}
	if p, _ := b.EffectivePolicy("/", "q", QueueClassic); p.Definition["expires"] != int64(7) {
		t.Fatalf("expires %v", p.Definition["expires"])
	}
	// The returned definition is a copy.
	p, _ := b.EffectivePolicy("/", "q", QueueClassic)
	p.Definition["expires"] = int64(1)
	if p, _ := b.EffectivePolicy("/", "q", QueueClassic); p.Definition["expires"] != int64(7) {
		t.Fatal("EffectivePolicy shares its definition")
	}
}

// Ensure a policy's alternate-exchange routes what an exchange cannot, for
// existing exchanges and ones declared later, that the exchange's own
// argument wins, and that a change or a restart re-resolves it.
func TestPolicyAlternateExchange(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	for _, q := range []string{"main", "unrouted", "other-unrouted"} {
		declareQ(t, b, q, true)
	}
	declare(t, b, "biz.orders", ExchangeDirect, true, nil)
	declare(t, b, "biz.arg", ExchangeDirect, true, map[string]any{"alternate-exchange": "other-ae"})
	declare(t, b, "biz.unrouted", ExchangeFanout, true, nil)
	declare(t, b, "other-ae", ExchangeFanout, true, nil)
	bindQ(t, b, "biz.orders", "main", "k", nil)
	bindQ(t, b, "biz.unrouted", "unrouted", "", nil)
	bindQ(t, b, "other-ae", "other-unrouted", "", nil)

	wantRoute(t, b, "biz.orders", nil, []string{"nope"})
	setPolicy(t, b, "biz-ae", `^biz\.`, policy.ApplyExchanges, 10, map[string]any{"alternate-exchange": "biz.unrouted"})
	wantRoute(t, b, "biz.orders", nil, []string{"k"}, "main")
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")
	// The argument wins over the policy.
	wantRoute(t, b, "biz.arg", nil, []string{"nope"}, "other-unrouted")
	// The alternate exchange itself matches the pattern: visited once.
	wantRoute(t, b, "biz.unrouted", nil, []string{"x"}, "unrouted")
	// An exchange declared after the policy.
	declare(t, b, "biz.late", ExchangeTopic, false, nil)
	wantRoute(t, b, "biz.late", nil, []string{"a.b"}, "unrouted")
	// Exchanges the pattern does not match.
	wantRoute(t, b, "amq.direct", nil, []string{"nope"})

	// A policy for queues only does not apply to exchanges, even at a
	// higher priority.
	setPolicy(t, b, "queues-only", ".*", policy.ApplyQueues, 20, map[string]any{"alternate-exchange": "other-ae"})
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")
	// A higher priority policy without alternate-exchange takes over, so
	// no alternate exchange: one policy applies, keys are not merged.
	setPolicy(t, b, "no-ae", "^biz.orders$", policy.ApplyAll, 30, map[string]any{"max-length": 5})
	wantRoute(t, b, "biz.orders", nil, []string{"nope"})
	wantRoute(t, b, "biz.late", nil, []string{"nope"}, "unrouted")
	must(t, b.ClearPolicy("/", "no-ae"))
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")

	// Changing the policy redirects existing exchanges.
	setPolicy(t, b, "biz-ae", `^biz\.`, policy.ApplyExchanges, 10, map[string]any{"alternate-exchange": "other-ae"})
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "other-unrouted")
	setPolicy(t, b, "biz-ae", `^biz\.`, policy.ApplyExchanges, 10, map[string]any{"alternate-exchange": "biz.unrouted"})

	// A restart: durable exchanges get the policy again.
	must(t, b.Close())
	b = openBroker(t, dir)
	defer b.Close()
	wantRoute(t, b, "biz.orders", nil, []string{"k"}, "main")
	wantRoute(t, b, "biz.orders", nil, []string{"nope"}, "unrouted")
	wantRoute(t, b, "biz.arg", nil, []string{"nope"}, "other-unrouted")

	// Clearing it leaves unroutable messages unrouted.
	must(t, b.ClearPolicy("/", "biz-ae"))
	wantRoute(t, b, "biz.orders", nil, []string{"nope"})
	wantRoute(t, b, "biz.arg", nil, []string{"nope"}, "other-unrouted")

	// A vhost whose topology is created by the policy: its standard
	// exchanges carry it.
	must(t, b.AddVHost("v"))
	must(t, b.SetPolicy(policy.Policy{VHost: "v", Name: "ae", Pattern: "^amq\\.direct$", ApplyTo: policy.ApplyExchanges,
		Definition: map[string]any{"alternate-exchange": "amq.fanout"}}))
	q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "v", Name: "q", Durable: true}})
	if err != nil || q == nil {
		t.Fatal(err)
	}
	must(t, b.Bind(BindingDef{VHost: "v", Source: "amq.fanout", DestKind: DestQueue, Dest: "q"}))
	got, err := b.Route("v", "amq.direct", []string{"nope"}, nil, nil)
	must(t, err)
	if !slices.Equal(got, []string{"q"}) {
		t.Fatalf("route in v: got %v, want [q]", got)
	}
}

// Ensure policy changes, declares and routing may run concurrently (run
// with -race): publishers always see the old or the new alternate
// exchange.
func TestPolicyConcurrentRoute(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	declareQ(t, b, "ae-q", false)
	declare(t, b, "ae", ExchangeFanout, false, nil)
	bindQ(t, b, "ae", "ae-q", "", nil)
	declare(t, b, "x", ExchangeDirect, false, nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var dst []string
		for {
			select {
			case <-done:
				return
			default:
			}
			var err error
			dst, err = b.Route("/", "x", []string{"nope"}, nil, dst[:0])
			if err != nil || len(dst) > 1 || len(dst) == 1 && dst[0] != "ae-q" {
				t.Errorf("Route: %v %v", dst, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 50 {
			if err := b.DeclareExchange(ExchangeDef{VHost: "/", Name: fmt.Sprintf("y%d", i), Type: ExchangeTopic}); err != nil {
				t.Errorf("DeclareExchange: %v", err)
				return
			}
		}
	}()
	for i := range 50 {
		setPolicy(t, b, "ae", ".*", policy.ApplyExchanges, 0, map[string]any{"alternate-exchange": "ae"})
		if i%2 == 0 {
			must(t, b.ClearPolicy("/", "ae"))
		}
	}
	close(done)
	wg.Wait()
	// The policy is set: every exchange, those declared meanwhile too,
	// routes to the alternate exchange.
	for i := range 50 {
		wantRoute(t, b, fmt.Sprintf("y%d", i), nil, []string{"nope"}, "ae-q")
	}
}

// Ensure the queue types are the kinds package policy resolves with, as
// EffectivePolicy's callers pass them.
func TestPolicyKinds(t *testing.T) {
	for _, k := range [][2]string{{QueueClassic, policy.KindClassic}, {QueueQuorum, policy.KindQuorum}, {QueueStream, policy.KindStream}} {
		if k[0] != k[1] {
			t.Errorf("queue type %q, policy kind %q", k[0], k[1])
		}
	}
}
