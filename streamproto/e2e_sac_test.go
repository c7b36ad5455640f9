package streamproto

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/streamproto/wire"
)

// End-to-end tests of single active consumers: byte-level tests with the
// raw client (ConsumerUpdate layout, Credit errors, hand-over between
// connections, super stream partitions, stream deletion) and tests with
// the real Go client (fail-over with stored offsets).

// sacSubscribeBody is a Subscribe body (after corr) for a single active
// consumer from the first offset, with extra properties kv.
func sacSubscribeBody(id uint8, stream string, credit uint16, kv ...string) rawBuf {
	props := append([]string{"single-active-consumer", "true"}, kv...)
	return rawBuf(nil).u8(id).str(stream).u16(wire.OffsetTypeFirst).u16(credit).strMap(props...)
}

// expectConsumerUpdate reads a ConsumerUpdate, checks its exact layout,
// subscription id and flag, and returns its correlation id.
func (c *rawConn) expectConsumerUpdate(sub uint8, active bool) uint32 {
	c.t.Helper()
	f := c.expect(wire.KeyConsumerUpdate, 1)
	corr := f.fields().u32()
	flag := byte(0)
	if active {
		flag = 1
	}
	if want := rawFrame(wire.KeyConsumerUpdate, 1, rawBuf(nil).u32(corr).u8(sub).u8(flag)); !bytes.Equal(f.raw, want) {
		c.t.Fatalf("ConsumerUpdate\n got % x\nwant % x", f.raw, want)
	}
	return corr
}

// replyConsumerUpdate answers ConsumerUpdate corr with an offset spec of
// type typ (offset only for types 4 and 5).
func (c *rawConn) replyConsumerUpdate(corr uint32, typ uint16, offset uint64) {
	c.t.Helper()
	b := rawBuf(nil).u32(corr).u16(uint16(wire.CodeOK)).u16(typ)
	if typ == wire.OffsetTypeOffset || typ == wire.OffsetTypeTimestamp {
		b = b.u64(offset)
	}
	c.write(rawFrame(wire.KeyConsumerUpdate|wire.ResponseBit, 1, b))
}

// expectDeliveries reads Deliver v1 frames until every subscription in
// want got exactly its entries (in order), failing on any other frame.
func (c *rawConn) expectDeliveries(want map[uint8][]string) {
	c.t.Helper()
	got := map[uint8][]string{}
	done := func() bool {
		for sub, w := range want {
			if len(got[sub]) < len(w) {
				return false
			}
		}
		return true
	}
	for !done() {
		d := checkDeliver(c.t, c.next(), 1)
		if _, ok := want[d.sub]; !ok {
			c.t.Fatalf("Deliver for subscription %d, want only %v", d.sub, want)
		}
		got[d.sub] = append(got[d.sub], simpleEntries(c.t, d.data)...)
	}
	for sub, w := range want {
		if !slices.Equal(got[sub], w) {
			c.t.Fatalf("subscription %d got %q, want %q", sub, got[sub], w)
		}
	}
}

// roundTrip waits until the server has handled everything c sent: frames
// of a connection are handled in order.
func (c *rawConn) roundTrip() {
	c.t.Helper()
	c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("no-such-stream"), wire.CodeStreamDoesNotExist)
}

// sacGroups returns the server's groups as "stream/name: id=state ..."
// strings (members' subscription ids and states in registration order),
// sorted.
func sacGroups(tb *testBroker) []string {
	var out []string
	for _, g := range tb.srv.sac.Groups() {
		s := fmt.Sprintf("%s/%s:", g.Key.Stream, g.Key.Name)
		for _, m := range g.Members {
			s += fmt.Sprintf(" %d=%s", m.ID, m.State)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// sacPending is the number of ConsumerUpdates awaiting a reply.
func sacPending(tb *testBroker) int { return tb.srv.sac.Pending() }

// sacDeliveryGoroutines counts the delivery goroutines of stream, by
// their pprof label.
func sacDeliveryGoroutines(t *testing.T, stream string) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec := range strings.SplitSeq(buf.String(), "\n\n") {
		if !strings.Contains(rec, `"stream-sub":"`+stream+`"`) {
			continue
		}
		count, _, _ := strings.Cut(rec, " @ ")
		k, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil {
			t.Fatalf("goroutine profile record %q", head([]byte(rec)))
		}
		n += k
	}
	return n
}

// Ensure a single active consumer's life over the wire: Subscribe without
// a name (or with one over 255 bytes) gets 0x11; OK comes before
// ConsumerUpdate(active=1) and nothing is delivered before the reply;
// reply type 0 starts at the Subscribe spec; a second member on another
// connection gets no ConsumerUpdate and no Deliver, and its Credit is
// answered with the Credit error 0x11; when the active member
// unsubscribes the second one is activated at once and starts at the
// offset of its reply.
func TestRawSACHandOver(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	a := rawOpen(t, tb, 0)
	a.create("sac-raw", wire.CodeOK)
	a.declarePublisher(1, "", "sac-raw", wire.CodeOK)
	a.publish(1, 1, "m0", "m1")
	a.expectConfirm(1, 1, 2)
	a.publish(1, 3, "m2")
	a.expectConfirm(1, 3)

	a.expectCode(wire.KeySubscribe, sacSubscribeBody(9, "sac-raw", 10), wire.CodePreconditionFailed)
	a.expectCode(wire.KeySubscribe, sacSubscribeBody(9, "sac-raw", 10, "name", ""), wire.CodePreconditionFailed)
	a.expectCode(wire.KeySubscribe, sacSubscribeBody(9, "sac-raw", 10, "name", strings.Repeat("n", 256)), wire.CodePreconditionFailed)
	a.expectCode(wire.KeySubscribe, sacSubscribeBody(9, "sac-raw", 10, "name", strings.Repeat("n", 255)), wire.CodeOK)
	if corr := a.expectConsumerUpdate(9, true); corr != 0 {
		t.Fatalf("first ConsumerUpdate corr %d, want 0", corr)
	}
	a.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(9), wire.CodeOK)

	a.expectCode(wire.KeySubscribe, sacSubscribeBody(1, "sac-raw", 10, "name", "app"), wire.CodeOK)
	corr := a.expectConsumerUpdate(1, true)
	if corr != 1 {
		t.Fatalf("ConsumerUpdate corr %d, want 1", corr)
	}
	a.quiet() // no Deliver before the reply
	a.replyConsumerUpdate(corr, wire.OffsetTypeNone, 0)
	a.expectDeliveries(map[uint8][]string{1: {"m0", "m1", "m2"}})

	b := rawOpen(t, tb, 0)
	b.expectCode(wire.KeySubscribe, sacSubscribeBody(4, "sac-raw", 10, "name", "app"), wire.CodeOK)
	b.write(rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(4).u16(3)))
	f := b.next()
	want := []byte{
		0x00, 0x00, 0x00, 0x07, // size 7
		0x80, 0x09, // key Credit | 0x8000
		0x00, 0x01, // version 1
		0x00, 0x11, // code precondition failed: not the active consumer
		4, // subscription id
	}
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("Credit error\n got % x\nwant % x", f.raw, want)
	}
	if got := sacGroups(tb); !slices.Equal(got, []string{"sac-raw/app: 1=active 4=inactive"}) {
		t.Fatalf("groups %q", got)
	}
	if n := sacDeliveryGoroutines(t, "sac-raw"); n != 1 {
		t.Fatalf("%d delivery goroutines, want 1", n)
	}

	// New data goes to the active member only.
	a.publish(1, 4, "m3")
	a.expectConfirmOrDeliver(1, 4, 3)
	a.publish(1, 5, "m4")
	a.expectConfirmOrDeliver(1, 5, 4)
	b.quiet()

	// The active member stores its offset and leaves; the other is
	// activated at once and resumes where it says.
	a.write(rawFrame(wire.KeyStoreOffset, 1, rawBuf(nil).str("app").str("sac-raw").u64(3)))
	a.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(1), wire.CodeOK)
	corr = b.expectConsumerUpdate(4, true)
	if corr != 2 {
		t.Fatalf("ConsumerUpdate corr %d, want 2", corr)
	}
	r := b.expectCode(wire.KeyQueryOffset, rawBuf(nil).str("app").str("sac-raw"), wire.CodeOK)
	if off := r.u64(); off != 3 {
		t.Fatalf("stored offset %d, want 3", off)
	}
	b.replyConsumerUpdate(corr, wire.OffsetTypeOffset, 4)
	d := checkDeliver(t, b.next(), 1)
	if d.sub != 4 || d.chunkID() != 4 || !slices.Equal(simpleEntries(t, d.data), []string{"m4"}) {
		t.Fatalf("Deliver sub %d chunk %d %q, want sub 4 chunk 4 [m4]", d.sub, d.chunkID(), simpleEntries(t, d.data))
	}
	// Credit is accepted without an error now; the credit kept while
	// inactive still counts.
	b.write(rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(4).u16(1)))
	a.publish(1, 6, "m5")
	a.expectConfirm(1, 6)
	b.expectDeliveries(map[uint8][]string{4: {"m5"}})
	b.quiet()
	a.quiet()

	b.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(4), wire.CodeOK)
	if got, n := sacGroups(tb), sacPending(tb); len(got) != 0 || n != 0 {
		t.Fatalf("after the last member left: groups %q, %d pending", got, n)
	}
	if n := sacDeliveryGoroutines(t, "sac-raw"); n != 0 {
		t.Fatalf("%d delivery goroutines left", n)
	}
}

// Ensure partitions of a super stream (named <super>-<n>, so the
// partition index comes from the name) are spread over two members by
// index mod 2: the partition that moves is handed over with
// ConsumerUpdate(active=0) and only after that reply is the other member
// activated; when the second member's connection closes, its partition
// comes back to the first, which resumes where its reply says.
func TestRawSACSuperStreamPartitions(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	p := rawOpen(t, tb, 0)
	for i := range uint8(3) {
		name := fmt.Sprintf("sacinv-%d", i)
		p.create(name, wire.CodeOK)
		p.declarePublisher(i, "", name, wire.CodeOK)
		p.publish(i, 1, fmt.Sprintf("p%d", i))
		p.expectConfirm(i, 1)
	}
	sub := func(c *rawConn, i uint8, super string) {
		t.Helper()
		c.expectCode(wire.KeySubscribe, sacSubscribeBody(i, fmt.Sprintf("sacinv-%d", i), 10,
			"name", "g", "super-stream", super), wire.CodeOK)
	}

	// One member: it gets every partition.
	a := rawOpen(t, tb, 0)
	for i := range uint8(3) {
		sub(a, i, "sacinv")
		if corr := a.expectConsumerUpdate(i, true); corr != uint32(i) {
			t.Fatalf("partition %d: corr %d, want %d", i, corr, i)
		}
		a.replyConsumerUpdate(uint32(i), wire.OffsetTypeNone, 0)
		a.expectDeliveries(map[uint8][]string{i: {fmt.Sprintf("p%d", i)}})
	}

	// A second member: partition 1 (1 mod 2) moves to it, 0 and 2 stay.
	b := rawOpen(t, tb, 0)
	sub(b, 0, "sacinv")
	sub(b, 1, "sacinv")
	corr := a.expectConsumerUpdate(1, false)
	if corr != 3 {
		t.Fatalf("deactivation corr %d, want 3", corr)
	}
	b.quiet() // nothing for b until a answers
	a.replyConsumerUpdate(corr, wire.OffsetTypeOffset, 1)
	corr = b.expectConsumerUpdate(1, true)
	if corr != 4 {
		t.Fatalf("activation corr %d, want 4", corr)
	}
	b.replyConsumerUpdate(corr, wire.OffsetTypeFirst, 0)
	b.expectDeliveries(map[uint8][]string{1: {"p1"}})
	sub(b, 2, "sacinv")
	// A subscriber naming another super stream cannot join.
	b.expectCode(wire.KeySubscribe, sacSubscribeBody(7, "sacinv-0", 10, "name", "g", "super-stream", "other"), wire.CodePreconditionFailed)
	b.expectCode(wire.KeySubscribe, sacSubscribeBody(7, "sacinv-0", 10, "name", "g"), wire.CodePreconditionFailed)
	a.quiet()
	b.quiet()
	want := []string{
		"sacinv-0/g: 0=active 0=inactive",
		"sacinv-1/g: 1=inactive 1=active",
		"sacinv-2/g: 2=active 2=inactive",
	}
	if got := sacGroups(tb); !slices.Equal(got, want) {
		t.Fatalf("groups\n got %q\nwant %q", got, want)
	}

	for i := range uint8(3) {
		p.publish(i, 2, fmt.Sprintf("q%d", i))
		p.expectConfirm(i, 2)
	}
	a.expectDeliveries(map[uint8][]string{0: {"q0"}, 2: {"q2"}})
	b.expectDeliveries(map[uint8][]string{1: {"q1"}})
	a.quiet()
	b.quiet()

	// b's connection goes away: partition 1 returns to a.
	b.nc.Close()
	corr = a.expectConsumerUpdate(1, true)
	if corr != 5 {
		t.Fatalf("activation corr %d, want 5", corr)
	}
	a.replyConsumerUpdate(corr, wire.OffsetTypeOffset, 1)
	a.expectDeliveries(map[uint8][]string{1: {"q1"}})
	a.quiet()

	for i := range uint8(3) {
		a.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(i), wire.CodeOK)
	}
	if got, n := sacGroups(tb), sacPending(tb); len(got) != 0 || n != 0 {
		t.Fatalf("after the members left: groups %q, %d pending", got, n)
	}
	for i := range 3 {
		if n := sacDeliveryGoroutines(t, fmt.Sprintf("sacinv-%d", i)); n != 0 {
			t.Fatalf("sacinv-%d: %d delivery goroutines left", i, n)
		}
	}
}

// Ensure deleting a stream removes its single active consumer groups: the
// members get MetadataUpdate, the inactive one is not activated, nothing
// is left in the coordinator or running, and the recreated stream starts
// a new group.
func TestRawSACStreamDeleted(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	a := rawOpen(t, tb, 0)
	a.create("sacdel", wire.CodeOK)
	a.expectCode(wire.KeySubscribe, sacSubscribeBody(1, "sacdel", 10, "name", "app"), wire.CodeOK)
	a.replyConsumerUpdate(a.expectConsumerUpdate(1, true), wire.OffsetTypeNone, 0)
	b := rawOpen(t, tb, 0)
	b.expectCode(wire.KeySubscribe, sacSubscribeBody(2, "sacdel", 10, "name", "app"), wire.CodeOK)
	a.quiet() // a is reading (nothing to deliver)
	if n := sacDeliveryGoroutines(t, "sacdel"); n != 1 {
		t.Fatalf("%d delivery goroutines, want 1", n)
	}

	c := rawOpen(t, tb, 0)
	c.expectCode(wire.KeyDelete, rawBuf(nil).str("sacdel"), wire.CodeOK)
	for _, conn := range []*rawConn{a, b} {
		f := conn.expect(wire.KeyMetadataUpdate, 1)
		if want := rawFrame(wire.KeyMetadataUpdate, 1, rawBuf(nil).u16(uint16(wire.CodeStreamNotAvailable)).str("sacdel")); !bytes.Equal(f.raw, want) {
			t.Fatalf("MetadataUpdate\n got % x\nwant % x", f.raw, want)
		}
	}
	if got, n := sacGroups(tb), sacPending(tb); len(got) != 0 || n != 0 {
		t.Fatalf("after the deletion: groups %q, %d pending", got, n)
	}
	if n := sacDeliveryGoroutines(t, "sacdel"); n != 0 {
		t.Fatalf("%d delivery goroutines left", n)
	}
	b.quiet() // in particular no ConsumerUpdate

	c.create("sacdel", wire.CodeOK)
	b.expectCode(wire.KeySubscribe, sacSubscribeBody(2, "sacdel", 10, "name", "app"), wire.CodeOK)
	b.replyConsumerUpdate(b.expectConsumerUpdate(2, true), wire.OffsetTypeNone, 0)
	b.roundTrip()
	if got := sacGroups(tb); !slices.Equal(got, []string{"sacdel/app: 2=active"}) {
		t.Fatalf("groups %q", got)
	}
	a.quiet()
}

// sacRecorder records what a group of single active consumers named "app"
// handle. Each consumer stores its offset after every storeEvery-th
// message and, once it is being closed, ignores messages (and stores
// nothing), so what it handled and stored is exact. Messages are "m-<i>";
// offsets are not message indexes, since stored offsets take offsets too.
type sacRecorder struct {
	t          *testing.T
	control    *stream.Environment // for QueryOffset in ConsumerUpdate
	storeEvery int
	signal     chan struct{} // cap 1: something was recorded

	mu      sync.Mutex
	log     []sacGot    // every message handled, in order
	closing []bool      // by consumer
	stored  []int64     // last offset stored, by consumer; -1 for none
	updates []sacUpdate // ConsumerUpdate callbacks, in order
}

type sacGot struct {
	consumer int
	offset   int64
	index    int // i of the body m-<i>
}

type sacUpdate struct {
	consumer int
	active   bool
	from     int64 // the offset returned; -1 for First (nothing stored)
}

func newSACRecorder(t *testing.T, control *stream.Environment, n, storeEvery int) *sacRecorder {
	r := &sacRecorder{t: t, control: control, storeEvery: storeEvery, signal: make(chan struct{}, 1),
		closing: make([]bool, n), stored: make([]int64, n)}
	for i := range r.stored {
		r.stored[i] = -1
	}
	return r
}

func (r *sacRecorder) kick() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// subscribe attaches consumer i to name through env.
func (r *sacRecorder) subscribe(env *stream.Environment, name string, i int) *stream.Consumer {
	r.t.Helper()
	update := func(s string, active bool) stream.OffsetSpecification {
		spec, from := stream.OffsetSpecification{}.First(), int64(-1)
		o, err := r.control.QueryOffset("app", s)
		switch {
		case err == nil:
			spec, from = stream.OffsetSpecification{}.Offset(o+1), o+1
		case !errors.Is(err, stream.OffsetNotFoundError):
			r.t.Errorf("consumer %d: QueryOffset: %v", i, err)
		}
		r.mu.Lock()
		r.updates = append(r.updates, sacUpdate{i, active, from})
		r.mu.Unlock()
		r.kick()
		return spec
	}
	handle := func(ctx stream.ConsumerContext, m *amqp.Message) {
		r.mu.Lock()
		if r.closing[i] {
			r.mu.Unlock()
			return
		}
		off := ctx.Consumer.GetOffset()
		idx, err := strconv.Atoi(strings.TrimPrefix(string(m.GetData()), "m-"))
		if err != nil {
			r.t.Errorf("consumer %d: body %q", i, m.GetData())
		}
		r.log = append(r.log, sacGot{i, off, idx})
		if (idx+1)%r.storeEvery == 0 {
			if err := ctx.Consumer.StoreOffset(); err != nil {
				r.t.Errorf("consumer %d: StoreOffset: %v", i, err)
			}
			r.stored[i] = off
		}
		r.mu.Unlock()
		r.kick()
	}
	c, err := env.NewConsumer(name, handle, stream.NewConsumerOptions().SetConsumerName("app").
		SetSingleActiveConsumer(stream.NewSingleActiveConsumer(update)))
	if err != nil {
		r.t.Fatalf("NewConsumer %d: %v", i, err)
	}
	return c
}

// waitFor waits until cond (called with r.mu held) holds.
func (r *sacRecorder) waitFor(what string, cond func() bool) {
	r.t.Helper()
	timeout := time.After(e2eWait)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.signal:
		case <-timeout:
			r.mu.Lock()
			defer r.mu.Unlock()
			r.t.Fatalf("waiting for %s: updates %v, %d messages handled, last %v", what, r.updates, len(r.log), r.log[max(len(r.log)-3, 0):])
		}
	}
}

// handled reports whether consumer i handled message index idx or a
// later one (REQUIRES r.mu).
func (r *sacRecorder) handled(i, idx int) bool {
	for j := len(r.log) - 1; j >= 0; j-- {
		if r.log[j].consumer == i {
			return r.log[j].index >= idx
		}
	}
	return false
}

// startClosing makes consumer i ignore messages from now on and returns
// the last offset it handled and the last it stored.
func (r *sacRecorder) startClosing(i int) (last, stored int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing[i] = true
	last = -1
	for _, g := range r.log {
		if g.consumer == i {
			last = g.offset
		}
	}
	return last, r.stored[i]
}

// Ensure single active consumers on a plain stream, with the Go client:
// with 1, 2 and 3 consumers named alike, only the first registered one
// gets messages (the others get nothing, not even a ConsumerUpdate);
// closing the active one (unsubscribe on a shared connection, unsubscribe
// and its connection closing, or only its connection closing) activates
// the next in registration order, which resumes just after the offset
// the previous one stored. Across the run every message is handled, in
// order, by one consumer at a time, and the only messages handled twice
// are those between the last stored offset and the fail-over.
func TestE2ESACFailover(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprintf("consumers=%d", n), func(t *testing.T) {
			t.Parallel()
			e2eSACFailover(t, n)
		})
	}
}

func e2eSACFailover(t *testing.T, n int) {
	tb := startBroker(t, brokerOpts{})
	control := newEnv(t, tb)
	name := fmt.Sprintf("sac-failover-%d", n)
	e2eDeclare(t, control, name, nil)
	p := e2eNewProducer(t, control, name, nil)
	rec := newSACRecorder(t, control, n, 7)

	// Consumers and how each is closed. With two, both share one
	// connection; with three, each has its own.
	consumers := make([]*stream.Consumer, n)
	closers := make([]func(), n)
	if n == 2 {
		env := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetMaxConsumersPerClient(2) })
		for i := range n {
			consumers[i] = rec.subscribe(env, name, i)
		}
	} else {
		envs := make([]*stream.Environment, n)
		for i := range n {
			envs[i] = newEnv(t, tb)
			consumers[i] = rec.subscribe(envs[i], name, i)
		}
		if n == 3 {
			closers[1] = func() { envs[1].Close() } // no Unsubscribe: the connection just closes
		}
	}
	for i := range n {
		if closers[i] == nil {
			closers[i] = func() {
				if err := consumers[i].Close(); err != nil {
					t.Errorf("consumer %d Close: %v", i, err)
				}
			}
		}
	}

	published := 0
	publish := func() {
		for range 10 { // 10 chunks of 10
			p.send(t, seq("m", published, published+10), nil)
			published += 10
		}
	}

	// phase k is consumer k's turn: the offsets it handled and its last
	// stored offset.
	type phase struct{ last, stored int64 }
	var phases []phase
	for k := range n {
		rec.waitFor(fmt.Sprintf("consumer %d activated", k), func() bool { return len(rec.updates) == k+1 })
		publish()
		until := published - 1
		if k < n-1 {
			until = published - 50 // fail over half way through the batch, or later
		}
		rec.waitFor(fmt.Sprintf("consumer %d at message %d", k, until), func() bool { return rec.handled(k, until) })
		if g := sacDeliveryGoroutines(t, name); g != 1 {
			t.Fatalf("%d delivery goroutines while consumer %d is active, want 1", g, k)
		}
		last, stored := rec.startClosing(k)
		phases = append(phases, phase{last, stored})
		closers[k]()
	}
	if got, pending := sacGroups(tb), sacPending(tb); len(got) != 0 || pending != 0 {
		t.Fatalf("after all consumers closed: groups %q, %d pending", got, pending)
	}
	if g := sacDeliveryGoroutines(t, name); g != 0 {
		t.Fatalf("%d delivery goroutines left", g)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	// Each consumer was activated once, in registration order, from just
	// after the previous one's stored offset.
	var wantUpdates []sacUpdate
	for k := range n {
		from := int64(-1)
		if k > 0 {
			from = phases[k-1].stored + 1
		}
		wantUpdates = append(wantUpdates, sacUpdate{k, true, from})
	}
	if !slices.Equal(rec.updates, wantUpdates) {
		t.Fatalf("ConsumerUpdates %v, want %v", rec.updates, wantUpdates)
	}
	// Every message has one offset, offsets grow with the index, and
	// every message was handled.
	offsetOf := make([]int64, published)
	for i := range offsetOf {
		offsetOf[i] = -1
	}
	for _, g := range rec.log {
		if g.index < 0 || g.index >= published || (offsetOf[g.index] != -1 && offsetOf[g.index] != g.offset) {
			t.Fatalf("message %d at offset %d (before: %d)", g.index, g.offset, offsetOf[max(0, min(g.index, published-1))])
		}
		offsetOf[g.index] = g.offset
	}
	for i, o := range offsetOf {
		if o == -1 || (i > 0 && o <= offsetOf[i-1]) {
			t.Fatalf("message %d at offset %d, previous at %d", i, o, offsetOf[max(i-1, 0)])
		}
	}
	// The log is one run per consumer, in order: consumer k handles every
	// message from the first after the previous consumer's stored offset
	// up to its last, one by one.
	j := 0
	for k, ph := range phases {
		idx := 0
		if k > 0 {
			stored := phases[k-1].stored
			for offsetOf[idx] <= stored {
				idx++
			}
		}
		for ; idx < published && offsetOf[idx] <= ph.last; idx++ {
			want := sacGot{k, offsetOf[idx], idx}
			if j >= len(rec.log) || rec.log[j] != want {
				t.Fatalf("log[%d] = %+v, want %+v (phases %+v)", j, rec.log[min(j, len(rec.log)-1)], want, phases)
			}
			j++
		}
	}
	if j != len(rec.log) {
		t.Fatalf("log has %d more entries: %+v", len(rec.log)-j, rec.log[j:])
	}
	// Handled twice: exactly the messages after a stored offset up to the
	// fail-over.
	seen := make([]int, published)
	for _, g := range rec.log {
		seen[g.index]++
	}
	for i, o := range offsetOf {
		want := 1
		for _, ph := range phases[:n-1] {
			if o > ph.stored && o <= ph.last {
				want++
			}
		}
		if seen[i] != want {
			t.Fatalf("message %d (offset %d) handled %d times, want %d (phases %+v)", i, o, seen[i], want, phases)
		}
	}
	if last := phases[n-1].last; last != offsetOf[published-1] {
		t.Fatalf("last consumer ended at offset %d, want %d", last, offsetOf[published-1])
	}
}

// sacSuperRecorder records what super stream consumers (0, 1, ...) handle
// per partition, and their ConsumerUpdate callbacks. Every message is
// stored as soon as it is handled.
type sacSuperRecorder struct {
	t       *testing.T
	control *stream.Environment
	signal  chan struct{} // cap 1: something was recorded

	mu      sync.Mutex
	got     map[int]map[string][]string // consumer -> partition -> bodies
	updates []sacPartitionUpdate
}

type sacPartitionUpdate struct {
	consumer  int
	partition string
	active    bool
	from      int64 // -1 for First
}

func (r *sacSuperRecorder) kick() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// consume attaches super stream consumer i to super through env.
func (r *sacSuperRecorder) consume(env *stream.Environment, super string, i int) *stream.SuperStreamConsumer {
	r.t.Helper()
	update := func(partition string, active bool) stream.OffsetSpecification {
		spec, from := stream.OffsetSpecification{}.First(), int64(-1)
		o, err := r.control.QueryOffset("app", partition)
		switch {
		case err == nil:
			spec, from = stream.OffsetSpecification{}.Offset(o+1), o+1
		case !errors.Is(err, stream.OffsetNotFoundError):
			r.t.Errorf("consumer %d: QueryOffset(%s): %v", i, partition, err)
		}
		r.mu.Lock()
		r.updates = append(r.updates, sacPartitionUpdate{i, partition, active, from})
		r.mu.Unlock()
		r.kick()
		return spec
	}
	handle := func(ctx stream.ConsumerContext, m *amqp.Message) {
		r.mu.Lock()
		if r.got[i] == nil {
			r.got[i] = map[string][]string{}
		}
		p := ctx.Consumer.GetStreamName()
		r.got[i][p] = append(r.got[i][p], string(m.GetData()))
		if err := ctx.Consumer.StoreOffset(); err != nil {
			r.t.Errorf("consumer %d: StoreOffset: %v", i, err)
		}
		r.mu.Unlock()
		r.kick()
	}
	c, err := env.NewSuperStreamConsumer(super, handle, stream.NewSuperStreamConsumerOptions().
		SetConsumerName("app").SetOffset(stream.OffsetSpecification{}.First()).
		SetSingleActiveConsumer(stream.NewSingleActiveConsumer(update)))
	if err != nil {
		r.t.Fatalf("NewSuperStreamConsumer %d: %v", i, err)
	}
	return c
}

// waitFor waits until cond (called with r.mu held) holds.
func (r *sacSuperRecorder) waitFor(what string, cond func() bool) {
	r.t.Helper()
	timeout := time.After(e2eWait)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.signal:
		case <-timeout:
			r.mu.Lock()
			defer r.mu.Unlock()
			r.t.Fatalf("waiting for %s: updates %v, got %v", what, r.updates, r.got)
		}
	}
}

// hasUpdates reports whether every one of want was recorded (REQUIRES r.mu).
func (r *sacSuperRecorder) hasUpdates(want ...sacPartitionUpdate) bool {
	for _, w := range want {
		if !slices.Contains(r.updates, w) {
			return false
		}
	}
	return true
}

// Ensure single active consumers of a super stream with the Go client's
// super stream consumer: the partitions (binding keys eu, us, asia, so the
// partition index comes from the super stream, not the name) all go to
// the only consumer; a second one takes partition 1 (1 mod 2) after the
// first one answered its deactivation, while 0 and 2 stay (n mod 2 = 0);
// each consumer receives exactly its partitions' messages; when the
// second one closes, the first takes partition 1 back from the offset the
// second stored, with nothing handled twice.
func TestE2ESACSuperStream(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	control := newEnv(t, tb)
	if err := control.DeclareSuperStream("sacreg", stream.NewBindingsOptions([]string{"eu", "us", "asia"})); err != nil {
		t.Fatalf("DeclareSuperStream: %v", err)
	}
	parts := []string{"sacreg-eu", "sacreg-us", "sacreg-asia"}
	producers := map[string]*e2eProducer{}
	for _, p := range parts {
		producers[p] = e2eNewProducer(t, control, p, nil)
	}
	sent := map[string]int{}
	publish := func(n int) {
		for _, p := range parts {
			for range n {
				producers[p].send(t, []string{fmt.Sprintf("%s-%d", p, sent[p])}, nil)
				sent[p]++
			}
		}
	}
	bodies := func(p string, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s-%d", p, i))
		}
		return out
	}
	rec := &sacSuperRecorder{t: t, control: control, signal: make(chan struct{}, 1), got: map[int]map[string][]string{}}

	envA, envB := newEnv(t, tb), newEnv(t, tb)
	a := rec.consume(envA, "sacreg", 0)
	defer a.Close()
	rec.waitFor("consumer 0 active on every partition", func() bool {
		return rec.hasUpdates(sacPartitionUpdate{0, parts[0], true, -1}, sacPartitionUpdate{0, parts[1], true, -1},
			sacPartitionUpdate{0, parts[2], true, -1})
	})
	b := rec.consume(envB, "sacreg", 1)
	rec.waitFor("partition 1 handed over", func() bool {
		return rec.hasUpdates(sacPartitionUpdate{0, parts[1], false, -1}, sacPartitionUpdate{1, parts[1], true, -1})
	})
	publish(5)
	rec.waitFor("the first 5 messages of each partition", func() bool {
		return len(rec.got[0][parts[0]]) == 5 && len(rec.got[0][parts[2]]) == 5 && len(rec.got[1][parts[1]]) == 5
	})
	// Each partition consumer has its own connection and subscription id
	// 0; members are listed in registration order.
	want := []string{
		"sacreg-asia/app: 0=active 0=inactive",
		"sacreg-eu/app: 0=active 0=inactive",
		"sacreg-us/app: 0=inactive 0=active",
	}
	if got := sacGroups(tb); !slices.Equal(got, want) {
		t.Fatalf("groups\n got %q\nwant %q", got, want)
	}
	for _, p := range parts {
		if g := sacDeliveryGoroutines(t, p); g != 1 {
			t.Fatalf("%s: %d delivery goroutines, want 1", p, g)
		}
	}

	// The second consumer leaves: partition 1 goes back to the first,
	// from just after the offset the second stored (it stored them all
	// before its Unsubscribe, on the same connection).
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	stored, err := control.QueryOffset("app", parts[1])
	if err != nil {
		t.Fatalf("QueryOffset: %v", err)
	}
	rec.waitFor("partition 1 back to consumer 0", func() bool {
		return rec.hasUpdates(sacPartitionUpdate{0, parts[1], true, stored + 1})
	})
	publish(5)
	rec.waitFor("the next 5 messages of each partition", func() bool {
		return len(rec.got[0][parts[0]]) == 10 && len(rec.got[0][parts[2]]) == 10 && len(rec.got[0][parts[1]]) == 5
	})
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, n := sacGroups(tb), sacPending(tb); len(got) != 0 || n != 0 {
		t.Fatalf("after the consumers closed: groups %q, %d pending", got, n)
	}
	for _, p := range parts {
		if g := sacDeliveryGoroutines(t, p); g != 0 {
			t.Fatalf("%s: %d delivery goroutines left", p, g)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	wg := map[int]map[string][]string{
		0: {parts[0]: bodies(parts[0], 0, 10), parts[1]: bodies(parts[1], 5, 10), parts[2]: bodies(parts[2], 0, 10)},
		1: {parts[1]: bodies(parts[1], 0, 5)},
	}
	for i := range 2 {
		for _, p := range parts {
			if !slices.Equal(rec.got[i][p], wg[i][p]) {
				t.Errorf("consumer %d, %s: got %q, want %q", i, p, rec.got[i][p], wg[i][p])
			}
		}
	}
	// The ConsumerUpdates: three activations of consumer 0 (in any
	// order), then the hand-over of partition 1 and its return.
	wantUpdates := []sacPartitionUpdate{
		{0, parts[1], false, -1}, {1, parts[1], true, -1}, {0, parts[1], true, stored + 1},
	}
	if len(rec.updates) != 6 || !rec.hasUpdates(sacPartitionUpdate{0, parts[0], true, -1}, sacPartitionUpdate{0, parts[1], true, -1},
		sacPartitionUpdate{0, parts[2], true, -1}) || !slices.Equal(rec.updates[3:], wantUpdates) {
		t.Fatalf("ConsumerUpdates %v, want 3 activations of consumer 0, then %v", rec.updates, wantUpdates)
	}
}
