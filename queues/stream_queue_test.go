package queues

import (
	"errors"
	"slices"
	"testing"
)

// Ensure a stream declared as a queue is the stream CreateStream makes:
// routable by the default exchange and bindings, in one name space with
// queues, deleted by DeleteQueue, and routable again after a restart.
func TestStreamAsQueue(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	q, n, c, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "s", Durable: true,
		Args: map[string]any{"x-queue-type": "stream", "x-max-age": "1D", "x-max-length-bytes": int32(5000)}}})
	if err != nil || q != nil || n != 0 || c != 0 {
		t.Fatalf("declare: %v %d %d %v", q, n, c, err)
	}
	s, err := b.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	var def StreamDef
	if err := b.cat.get(streamKey("/", "s"), &def); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"max-age": "1D", "max-length-bytes": "5000"}; !mapsEqual(def.Args, want) {
		t.Fatalf("stream args %v, want %v", def.Args, want)
	}
	if cfg := s.Config(); cfg.MaxLengthBytes != 5000 {
		t.Fatalf("config %+v", cfg)
	}
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "s"}, Passive: true}); err != nil {
		t.Fatalf("passive: %v", err)
	}
	// One name space.
	if err := b.CreateStream("/", "s", map[string]string{"max-age": "1D", "max-length-bytes": "5000"}); !errors.Is(err, ErrExists) {
		t.Fatalf("CreateStream of a stream's name: %v", err)
	}
	declareQ(t, b, "classic", true)
	wantQErr(t, b.CreateStream("/", "classic", nil), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'classic' in vhost '/': received 'stream' but current is 'classic'")
	// Routing: the default exchange and a binding.
	must(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "x", Type: ExchangeDirect, Durable: true}))
	must(t, b.Bind(BindingDef{VHost: "/", Source: "x", DestKind: DestQueue, Dest: "s", Key: "k"}))
	for _, tc := range []struct{ exchange, key string }{{"", "s"}, {"x", "k"}} {
		got, err := b.Route("/", tc.exchange, []string{tc.key}, nil, nil)
		if err != nil || !slices.Equal(got, []string{"s"}) {
			t.Fatalf("route %q %q: %v %v", tc.exchange, tc.key, got, err)
		}
	}
	if q, st := b.LookupDestination("/", "s"); q != nil || st != s {
		t.Fatalf("LookupDestination: %v %v", q, st)
	}
	must(t, b.Close())

	b = openBroker(t, dir)
	if got, err := b.Route("/", "x", []string{"k"}, nil, nil); err != nil || !slices.Equal(got, []string{"s"}) {
		t.Fatalf("route after restart: %v %v", got, err)
	}
	if n, err := b.DeleteQueue("/", "s", nil, true, true); err != nil || n != 0 {
		t.Fatalf("delete: %d %v", n, err)
	}
	if _, err := b.Stream("/", "s"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("stream after delete: %v", err)
	}
	if got, _ := b.Route("/", "x", []string{"k"}, nil, nil); len(got) != 0 {
		t.Fatalf("route after delete: %v", got)
	}
	for _, bd := range b.Bindings("/") {
		if bd.Dest == "s" {
			t.Fatalf("binding left: %+v", bd)
		}
	}
}

// Ensure StreamQueueArgs types the stream protocol's arguments as
// rabbit_stream_manager does.
func TestStreamQueueArgs(t *testing.T) {
	got := StreamQueueArgs(map[string]string{"max-length-bytes": "10", "max-age": "1h",
		"queue-leader-locator": "least-leaders", "initial-cluster-size": "1", "other": "x"})
	want := map[string]any{"x-queue-type": "stream", "x-max-length-bytes": int64(10), "x-max-age": "1h",
		"x-queue-leader-locator": "least-leaders", "x-initial-cluster-size": int64(1)}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: got %#v, want %#v", k, got[k], v)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
