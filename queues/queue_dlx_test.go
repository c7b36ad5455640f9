package queues

import (
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/osiris"
)

// wantDeathEntry is an expected x-death table.
type wantDeathEntry struct {
	count      int64
	reason     string
	queue      string
	exchange   string
	keys       []string
	origExp    string // "" absent
	notBefore  time.Time
	notAfter   time.Time
	timeExactS int64 // when non-zero, the exact time in seconds
}

// checkXDeath checks the x-death header of delivered properties: its
// entries with their exact keys, types and values, and the key order of
// each table as RabbitMQ emits it.
func checkXDeath(t *testing.T, props []byte, want ...wantDeathEntry) {
	t.Helper()
	h := headersOf(t, props)
	xd, ok := h["x-death"].([]any)
	if !ok {
		t.Fatalf("x-death is %T %v", h["x-death"], h["x-death"])
	}
	if len(xd) != len(want) {
		t.Fatalf("x-death has %d entries, want %d: %v", len(xd), len(want), xd)
	}
	for i, w := range want {
		e, ok := xd[i].(amqptab.Table) // nested tables decode as Table
		if !ok {
			t.Fatalf("x-death[%d] is %T", i, xd[i])
		}
		wantKeys := []string{"count", "exchange", "queue", "reason", "routing-keys", "time"}
		if w.origExp != "" {
			wantKeys = append(wantKeys, "original-expiration")
			if e["original-expiration"] != w.origExp {
				t.Fatalf("x-death[%d] original-expiration %#v, want %q", i, e["original-expiration"], w.origExp)
			}
		}
		keys := make([]string, 0, len(e))
		for k := range e {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Sort(wantKeys)
		if !reflect.DeepEqual(keys, wantKeys) {
			t.Fatalf("x-death[%d] keys %v, want %v", i, keys, wantKeys)
		}
		if e["count"] != w.count || e["reason"] != w.reason || e["queue"] != w.queue || e["exchange"] != w.exchange {
			t.Fatalf("x-death[%d] = %#v, want count %d reason %q queue %q exchange %q", i, e, w.count, w.reason, w.queue, w.exchange)
		}
		var rks []any
		for _, k := range w.keys {
			rks = append(rks, k)
		}
		if !reflect.DeepEqual(e["routing-keys"], rks) {
			t.Fatalf("x-death[%d] routing-keys %#v, want %#v", i, e["routing-keys"], rks)
		}
		ts, ok := e["time"].(time.Time)
		if !ok {
			t.Fatalf("x-death[%d] time is %T", i, e["time"])
		}
		if w.timeExactS != 0 && ts.Unix() != w.timeExactS {
			t.Fatalf("x-death[%d] time %d, want %d", i, ts.Unix(), w.timeExactS)
		}
		if !w.notBefore.IsZero() && (ts.Unix() < w.notBefore.Unix() || ts.Unix() > w.notAfter.Unix()) {
			t.Fatalf("x-death[%d] time %v not in [%v, %v]", i, ts, w.notBefore, w.notAfter)
		}
	}
	// Key order within each table, as mc_amqpl:death_table/7 emits it.
	pv, _ := amqptab.ScanProps(props)
	i := 0
	_ = amqptab.ScanTable(pv.Value(props, amqptab.FlagHeaders), func(key []byte, tag byte, v []byte) error {
		if string(key) != "x-death" {
			return nil
		}
		if tag != 'A' {
			t.Fatalf("x-death tag %q", tag)
		}
		return amqptab.ScanArray(v, func(tag byte, v []byte) error {
			var order []string
			_ = amqptab.ScanTable(v, func(key []byte, tag byte, _ []byte) error {
				order = append(order, string(key)+":"+string(tag))
				return nil
			})
			want := []string{"count:l", "reason:S", "queue:S", "time:T", "exchange:S", "routing-keys:A"}
			if len(order) == 7 {
				want = append([]string{"original-expiration:S"}, want...)
			}
			if !reflect.DeepEqual(order, want) {
				t.Fatalf("x-death[%d] key order %v, want %v", i, order, want)
			}
			i++
			return nil
		})
	})
}

// checkDeathHeaders checks x-first-death-* and x-last-death-*.
func checkDeathHeaders(t *testing.T, props []byte, first, last [3]string) {
	t.Helper()
	h := headersOf(t, props)
	got := [6]any{h["x-first-death-queue"], h["x-first-death-reason"], h["x-first-death-exchange"],
		h["x-last-death-queue"], h["x-last-death-reason"], h["x-last-death-exchange"]}
	want := [6]any{first[0], first[1], first[2], last[0], last[1], last[2]}
	if got != want {
		t.Fatalf("death headers %v, want %v", got, want)
	}
}

// headerKeysSorted checks that the headers table's keys are ascending.
func headerKeysSorted(t *testing.T, props []byte) {
	t.Helper()
	pv, _ := amqptab.ScanProps(props)
	var keys []string
	_ = amqptab.ScanTable(pv.Value(props, amqptab.FlagHeaders), func(key []byte, _ byte, _ []byte) error {
		keys = append(keys, string(key))
		return nil
	})
	if !slices.IsSorted(keys) {
		t.Fatalf("headers not sorted: %v", keys)
	}
}

// Ensure a rejected message goes to the dead-letter exchange with the
// x-death history RabbitMQ writes (reason rejected, its routing keys with
// CC), keeps its other headers, and is settled in its queue.
func TestDeadLetterRejected(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	dead := declareWith(t, b, "dead", false, nil)
	fanoutTo(t, b, "dlx", "dead")
	src := declareWith(t, b, "src", false, map[string]any{"x-dead-letter-exchange": "dlx"})
	before := time.Now()
	hdrs := encTable("CC", []string{"cc1"}, "app", "v")
	if err := publishP(t, src, "m", true, msgProps{priority: -1, headers: hdrs}); err != nil {
		t.Fatal(err)
	}
	g, ok := getOne(t, src, false)
	if !ok {
		t.Fatal("empty")
	}
	src.Discard(g.id)
	waitReady(t, dead, 1)
	d, _ := getOne(t, dead, true)
	if d.body != "m" || d.exchange != "dlx" || d.routingKey != "rk" {
		t.Fatalf("dead-lettered %+v", d)
	}
	checkXDeath(t, d.props, wantDeathEntry{count: 1, reason: "rejected", queue: "src", exchange: "ex",
		keys: []string{"rk", "cc1"}, notBefore: before, notAfter: time.Now()})
	checkDeathHeaders(t, d.props, [3]string{"src", "rejected", "ex"}, [3]string{"src", "rejected", "ex"})
	headerKeysSorted(t, d.props)
	h := headersOf(t, d.props)
	if h["app"] != "v" || !reflect.DeepEqual(h["CC"], []any{"cc1"}) {
		t.Fatalf("headers %v", h)
	}
	eventually(t, "the source settled", func() bool {
		st := src.StateForTest()
		return st.Head == st.Tail && st.ClaimedRanges == 0
	})
	wantCounts(t, src, 0, 0)
}

// Ensure an expired message is dead-lettered with reason expired, its
// expiration property removed and kept as original-expiration, and a
// client's x-death header replaced.
func TestDeadLetterExpired(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	dead := declareWith(t, b, "dead", false, nil)
	src := declareWith(t, b, "src", false, map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	fake := encTable("x-death", []string{"forged"}, "x-first-death-queue", "forged")
	if err := publishP(t, src, "m", false, msgProps{expiration: "30", priority: -1, headers: fake}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, dead, 1)
	d, _ := getOne(t, dead, true)
	if d.exchange != "" || d.routingKey != "dead" {
		t.Fatalf("delivered with %q %q", d.exchange, d.routingKey)
	}
	pv, _ := amqptab.ScanProps(d.props)
	if pv.Flags&amqptab.FlagExpiration != 0 {
		t.Fatal("expiration property kept")
	}
	checkXDeath(t, d.props, wantDeathEntry{count: 1, reason: "expired", queue: "src", exchange: "ex", keys: []string{"rk"}, origExp: "30"})
	checkDeathHeaders(t, d.props, [3]string{"src", "expired", "ex"}, [3]string{"src", "expired", "ex"})
	wantCounts(t, src, 0, 0)
}

// Ensure repeated dead-lettering merges the history per (queue, reason):
// A (TTL) -> B -> rejected -> A -> expired again -> B shows A/expired with
// count 2 first, then B/rejected; the first-death headers stay.
func TestDeadLetterHistoryMerges(t *testing.T) {
	var skew atomic.Int64 // the broker clock runs ahead by this
	b, err := Open(t.TempDir(), Options{StreamOptions: osiris.Options{Now: func() time.Time {
		return time.Now().Add(time.Duration(skew.Load()))
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	qa := declareWith(t, b, "A", false, map[string]any{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "B"})
	qb := declareWith(t, b, "B", false, map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "A"})
	mustPublish(t, qa, true, "m")
	waitReady(t, qb, 1)
	g, _ := getOne(t, qb, false)
	checkXDeath(t, g.props, wantDeathEntry{count: 1, reason: "expired", queue: "A", exchange: "ex", keys: []string{"rk"}})
	first := headersOf(t, g.props)["x-death"].([]any)[0].(amqptab.Table)["time"].(time.Time)
	skew.Store(int64(10 * time.Second)) // the time of the first event stays
	qb.Discard(g.id)                    // B -> A (rejected), A -> B (expired)
	eventually(t, "back in B", func() bool { return readyCount(qb) == 1 })
	g, _ = getOne(t, qb, true)
	checkXDeath(t, g.props,
		wantDeathEntry{count: 2, reason: "expired", queue: "A", exchange: "ex", keys: []string{"rk"}, timeExactS: first.Unix()},
		wantDeathEntry{count: 1, reason: "rejected", queue: "B", exchange: "", keys: []string{"B"}},
	)
	checkDeathHeaders(t, g.props, [3]string{"A", "expired", "ex"}, [3]string{"A", "expired", ""})
	if g.exchange != "" || g.routingKey != "B" {
		t.Fatalf("delivered with %q %q", g.exchange, g.routingKey)
	}
	headerKeysSorted(t, g.props)
}

// Ensure a dead-letter cycle without a rejection drops the message: A
// expires into B, B expires back into A, which is in the history.
func TestDeadLetterCycleDrops(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	qa := declareWith(t, b, "A", false, map[string]any{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "B"})
	qb := declareWith(t, b, "B", false, map[string]any{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "A"})
	self := declareWith(t, b, "S", false, map[string]any{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "S"})
	tail0 := qb.StateForTest().Tail
	mustPublish(t, qa, false, "m")
	mustPublish(t, self, false, "s")
	for _, q := range []*Queue{qa, qb, self} {
		eventually(t, "all gone", func() bool {
			st := q.StateForTest()
			return st.Head == st.Tail && st.ClaimedRanges == 0 && !st.DeadLettering
		})
	}
	time.Sleep(60 * time.Millisecond)
	for _, q := range []*Queue{qa, qb, self} {
		wantCounts(t, q, 0, 0)
	}
	tail := qb.StateForTest().Tail
	if tail != tail0+1 {
		t.Fatalf("B's tail %d, was %d: want the one message dead-lettered from A, not back again", tail, tail0)
	}
}

// Ensure drop-head at x-max-length dead-letters the dropped heads with
// reason maxlen, and that a missing dead-letter exchange drops messages.
func TestDeadLetterMaxLenAndMissingExchange(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	dead := declareWith(t, b, "dead", false, nil)
	fanoutTo(t, b, "dlx", "dead")
	src := declareWith(t, b, "src", false, map[string]any{"x-max-length": int32(2), "x-dead-letter-exchange": "dlx"})
	mustPublish(t, src, false, "m1", "m2", "m3", "m4")
	wantCounts(t, src, 2, 0)
	waitReady(t, dead, 2)
	d1, _ := getOne(t, dead, true)
	d2, _ := getOne(t, dead, true)
	if d1.body != "m1" || d2.body != "m2" {
		t.Fatalf("dropped %q %q", d1.body, d2.body)
	}
	checkXDeath(t, d1.props, wantDeathEntry{count: 1, reason: "maxlen", queue: "src", exchange: "ex", keys: []string{"rk"}})
	if got := drain(t, src); !reflect.DeepEqual(got, []string{"m3", "m4"}) {
		t.Fatalf("kept %v", got)
	}

	gone := declareWith(t, b, "gone", false, map[string]any{"x-dead-letter-exchange": "no-such"})
	mustPublish(t, gone, false, "x")
	g, _ := getOne(t, gone, false)
	gone.Discard(g.id)
	eventually(t, "the message dropped", func() bool {
		st := gone.StateForTest()
		return st.Head == st.Tail && st.ClaimedRanges == 0
	})
}

// Ensure a message that is being dead-lettered when the broker stops is
// dead-lettered again after the restart (at least once), and that a
// durable dead-lettered copy keeps its history across the restart.
func TestDeadLetterRestart(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	dead := declareWith(t, b, "dead", true, nil)
	src := declareWith(t, b, "src", true, map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	mustPublish(t, src, true, "m1", "m2")
	g, _ := getOne(t, src, false)
	src.Discard(g.id)
	waitReady(t, dead, 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	dead, _ = b.Queue("/", "dead")
	src, _ = b.Queue("/", "src")
	wantCounts(t, src, 1, 0)
	d, ok := getOne(t, dead, true)
	if !ok || d.body != "m1" {
		t.Fatalf("dead-lettered copy after restart: %+v %v", d, ok)
	}
	checkXDeath(t, d.props, wantDeathEntry{count: 1, reason: "rejected", queue: "src", exchange: "ex", keys: []string{"rk"}})
}

// Ensure a policy's dead-letter-exchange applies to an existing queue
// without a redeclare, that the queue's argument wins over it, and that a
// policy's expires deletes an unused queue.
func TestDeadLetterPolicy(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	pdead := declareWith(t, b, "pdead", false, nil)
	adead := declareWith(t, b, "adead", false, nil)
	src := declareWith(t, b, "src", false, nil)
	own := declareWith(t, b, "own", false, map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "adead"})
	setPolicy(t, b, "dl", "^(src|own)$", "queues", 0, map[string]any{"dead-letter-exchange": "", "dead-letter-routing-key": "pdead"})
	mustPublish(t, src, false, "s")
	mustPublish(t, own, false, "o")
	g, _ := getOne(t, src, false)
	src.Discard(g.id)
	g, _ = getOne(t, own, false)
	own.Discard(g.id)
	waitReady(t, pdead, 1)
	waitReady(t, adead, 1)
	if d, _ := getOne(t, pdead, true); d.body != "s" {
		t.Fatalf("policy dead letter %q", d.body)
	}

	declareWith(t, b, "tmp", false, nil)
	setPolicy(t, b, "exp", "^tmp$", "queues", 0, map[string]any{"expires": 50})
	eventually(t, "the policy's expires deleting tmp", func() bool {
		_, err := b.Queue("/", "tmp")
		return err != nil
	})
}
