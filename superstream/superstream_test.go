package superstream

import (
	"errors"
	"slices"
	"testing"

	"github.com/warren-mq/warren/queues"
)

func openManager(t *testing.T, dir string) (*queues.Broker, *Manager) {
	t.Helper()
	b, err := queues.Open(dir, queues.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b, NewManager(b)
}

const guest = queues.DefaultUser

// Ensure Create makes the exchange, the partitions and ordered bindings
// RabbitMQ makes, Route and Partitions answer from them, validation and a
// taken name refuse the whole super stream, and Delete removes it all.
func TestCreateRouteDelete(t *testing.T) {
	b, m := openManager(t, t.TempDir())
	defer b.Close()
	parts := []string{"ss-a", "ss-b", "ss-c"}
	if err := m.Create(guest, "/", "ss", parts, []string{"a", "b", "a"}, map[string]string{"max-age": "1h"}); err != nil {
		t.Fatal(err)
	}
	x, err := b.Exchange("/", "ss")
	if err != nil {
		t.Fatal(err)
	}
	if x.Type != queues.ExchangeDirect || !x.Durable || x.AutoDelete || x.Internal || x.Args[ArgSuperStream] != true {
		t.Fatalf("exchange %+v", x)
	}
	bs := b.BindingsFrom("/", "ss")
	if len(bs) != 3 {
		t.Fatalf("bindings %+v", bs)
	}
	for i, p := range parts {
		j := slices.IndexFunc(bs, func(bd queues.BindingDef) bool { return bd.Dest == p })
		if j < 0 || bs[j].Args[ArgPartitionOrder] != int64(i) || bs[j].Key != []string{"a", "b", "a"}[i] {
			t.Fatalf("binding of %s: %+v", p, bs)
		}
		if s, err := b.Stream("/", p); err != nil || s.Config().MaxAge.Hours() != 1 {
			t.Fatalf("partition %s: %v", p, err)
		}
		if got := m.PartitionIndex("/", "ss", p); got != i {
			t.Fatalf("PartitionIndex(%s) = %d", p, got)
		}
	}
	if got, err := m.Partitions(guest, "/", "ss"); err != nil || !slices.Equal(got, parts) {
		t.Fatalf("partitions %v, %v", got, err)
	}
	if got, err := m.Route(guest, "/", "ss", "a"); err != nil || !slices.Equal(got, []string{"ss-a", "ss-c"}) {
		t.Fatalf("route a = %v, %v", got, err)
	}
	if got, err := m.Route(guest, "/", "ss", "z"); err != nil || len(got) != 0 {
		t.Fatalf("route z = %v, %v", got, err)
	}
	if got := m.PartitionIndex("/", "other", "x-7"); got != 7 {
		t.Fatalf("index from the name = %d", got)
	}
	if got := m.PartitionIndex("/", "other", "plain"); got != -1 {
		t.Fatalf("plain index = %d", got)
	}
	if err := m.Create(guest, "/", "ss", []string{"n-0"}, []string{"0"}, nil); !errors.Is(err, queues.ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	for _, bad := range [][2][]string{
		{{"x-0", "x-0"}, {"0", "1"}},
		{{"x-0"}, {"0", "1"}},
		{{}, {}},
		{{"amq.x"}, {"0"}},
	} {
		if err := m.Create(guest, "/", "x", bad[0], bad[1], nil); !errors.Is(err, queues.ErrInvalidArgument) {
			t.Errorf("partitions %v keys %v: %v", bad[0], bad[1], err)
		}
	}
	if err := m.Create(guest, "/", "x", []string{"x-0"}, []string{"0"}, map[string]string{"max-age": "forever"}); !errors.Is(err, queues.ErrInvalidArgument) {
		t.Errorf("bad argument: %v", err)
	}
	// A taken partition name, or an exchange of the name, refuses the
	// whole super stream, leaving nothing.
	if err := b.CreateStream("/", "y-1", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(guest, "/", "y", []string{"y-0", "y-1"}, []string{"0", "1"}, nil); !errors.Is(err, queues.ErrExists) {
		t.Fatalf("taken partition: %v", err)
	}
	if err := b.DeclareExchange(queues.ExchangeDef{VHost: "/", Name: "z", Type: queues.ExchangeFanout}); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(guest, "/", "z", []string{"z-0"}, []string{"0"}, nil); !errors.Is(err, queues.ErrExists) {
		t.Fatalf("taken exchange name: %v", err)
	}
	for _, s := range []string{"y-0", "z-0"} {
		if _, err := b.Stream("/", s); !errors.Is(err, queues.ErrNotFound) {
			t.Fatalf("%s left behind: %v", s, err)
		}
	}
	if _, err := b.Exchange("/", "y"); err == nil {
		t.Fatal("exchange y left behind")
	}
	if err := m.Delete(guest, "/", "ss"); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if _, err := b.Stream("/", p); !errors.Is(err, queues.ErrNotFound) {
			t.Fatalf("partition %s after delete: %v", p, err)
		}
	}
	if _, err := b.Exchange("/", "ss"); err == nil {
		t.Fatal("exchange after delete")
	}
	if err := m.Delete(guest, "/", "ss"); !errors.Is(err, queues.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := m.Partitions(guest, "/", "ss"); !errors.Is(err, queues.ErrNotFound) {
		t.Fatalf("partitions after delete: %v", err)
	}
	if _, err := m.Route(guest, "/", "ss", "a"); !errors.Is(err, queues.ErrNotFound) {
		t.Fatalf("route after delete: %v", err)
	}
}

// Ensure a super stream declared as AMQP topology (exchange, streams and
// bindings made one by one, bound out of order, one binding without an
// order, a classic queue bound too) is seen by Partitions, Route and
// PartitionIndex as RabbitMQ sees it, and that deleting only the exchange
// leaves the streams.
func TestTopologyDeclaredSuperStream(t *testing.T) {
	b, m := openManager(t, t.TempDir())
	defer b.Close()
	if err := b.DeclareExchange(queues.ExchangeDef{VHost: "/", Name: "inv", Type: queues.ExchangeDirect, Durable: true,
		Args: map[string]any{ArgSuperStream: true}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"inv-0", "inv-1", "inv-2", "extra"} {
		if err := b.CreateStream("/", s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: "classic", Durable: true}}); err != nil {
		t.Fatal(err)
	}
	bind := func(dest, key string, order any) {
		t.Helper()
		args := map[string]any{}
		if order != nil {
			args[ArgPartitionOrder] = order
		}
		if err := b.Bind(queues.BindingDef{VHost: "/", Source: "inv", DestKind: queues.DestQueue, Dest: dest, Key: key, Args: args}); err != nil {
			t.Fatal(err)
		}
	}
	bind("extra", "k1", nil) // no order: after the ordered ones
	bind("inv-2", "k2", int32(2))
	bind("classic", "k1", int32(9)) // not a stream: not a partition
	bind("inv-0", "k0", int8(0))
	bind("inv-1", "k1", "1") // RabbitMQ coerces a numeric string
	want := []string{"inv-0", "inv-1", "inv-2", "extra"}
	if got, err := m.Partitions(guest, "/", "inv"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("partitions %v, %v; want %v", got, err, want)
	}
	if got, err := m.Route(guest, "/", "inv", "k1"); err != nil || !slices.Equal(got, []string{"inv-1", "extra"}) {
		t.Fatalf("route k1 = %v, %v", got, err)
	}
	for i, s := range want[:3] {
		if got := m.PartitionIndex("/", "inv", s); got != i {
			t.Fatalf("PartitionIndex(%s) = %d", s, got)
		}
	}
	if got := m.PartitionIndex("/", "inv", "extra"); got != -1 {
		t.Fatalf("PartitionIndex(extra) = %d", got)
	}
	if err := b.DeleteExchange("/", "inv", false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Partitions(guest, "/", "inv"); !errors.Is(err, queues.ErrNotFound) {
		t.Fatalf("partitions without the exchange: %v", err)
	}
	for _, s := range want {
		if _, err := b.Stream("/", s); err != nil {
			t.Fatalf("stream %s after the exchange went: %v", s, err)
		}
	}
}

// Ensure every operation checks the permissions RabbitMQ's stream plugin
// checks, and a refused one changes nothing.
func TestPermissions(t *testing.T) {
	b, m := openManager(t, t.TempDir())
	defer b.Close()
	if err := b.AddUser("limited", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPermissions("limited", "/", queues.Permissions{Configure: "^mine", Write: "^mine", Read: "^mine"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(guest, "/", "theirs", []string{"theirs-0"}, []string{"0"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Create("limited", "/", "mine", []string{"mine-0", "mine-1"}, []string{"0", "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Route("limited", "/", "mine", "1"); err != nil || !slices.Equal(got, []string{"mine-1"}) {
		t.Fatalf("own route %v, %v", got, err)
	}
	refused := map[string]error{}
	refused["create"] = m.Create("limited", "/", "mine2", []string{"other-0"}, []string{"0"}, nil)
	_, refused["partitions"] = m.Partitions("limited", "/", "theirs")
	_, refused["route"] = m.Route("limited", "/", "theirs", "0")
	refused["delete"] = m.Delete("limited", "/", "theirs")
	for op, err := range refused {
		if !errors.Is(err, queues.ErrAccessRefused) {
			t.Errorf("%s: %v", op, err)
		}
	}
	if got, err := m.Partitions(guest, "/", "theirs"); err != nil || !slices.Equal(got, []string{"theirs-0"}) {
		t.Fatalf("refused delete changed the super stream: %v, %v", got, err)
	}
	if _, err := b.Stream("/", "other-0"); !errors.Is(err, queues.ErrNotFound) {
		t.Fatalf("refused create left a stream: %v", err)
	}
}

// Ensure a super stream survives a restart as exchange and bindings.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	b, m := openManager(t, dir)
	if err := m.Create(guest, "/", "kept", []string{"kept-0", "kept-1"}, []string{"0", "1"}, nil); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, m = openManager(t, dir)
	defer b.Close()
	if got, err := m.Partitions(guest, "/", "kept"); err != nil || !slices.Equal(got, []string{"kept-0", "kept-1"}) {
		t.Fatalf("after restart %v, %v", got, err)
	}
	if got, err := m.Route(guest, "/", "kept", "1"); err != nil || !slices.Equal(got, []string{"kept-1"}) {
		t.Fatalf("route after restart %v, %v", got, err)
	}
}
