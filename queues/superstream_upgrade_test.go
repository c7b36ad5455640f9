package queues

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Ensure a data directory from before super streams were exchanges keeps
// them: Open rewrites each x/ record (as the old code wrote it) as a
// durable direct exchange with x-super-stream and ordered partition
// bindings that route, removes the record, and leaves an exchange that
// already had the name alone.
func TestUpgradeSuperStreams(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	for _, s := range []string{"old-0", "old-1", "clash-0"} {
		if err := b.CreateStream("/", s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeclareExchange(ExchangeDef{VHost: "/", Name: "clash", Type: ExchangeFanout, Durable: true}); err != nil {
		t.Fatal(err)
	}
	old := map[string]string{
		"old":   `{"vhost":"/","name":"old","partitions":["old-0","old-1"],"binding_keys":["a","b"],"args":{"max-age":"1h"}}`,
		"clash": `{"vhost":"/","name":"clash","partitions":["clash-0"],"binding_keys":["0"]}`,
	}
	for name, rec := range old {
		if err := b.cat.db.Set([]byte("x//\x00"+name), []byte(rec), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()

	b = openBroker(t, dir)
	defer b.Close()
	x, err := b.Exchange("/", "old")
	if err != nil {
		t.Fatal(err)
	}
	if x.Type != ExchangeDirect || !x.Durable || x.Args[argSuperStream] != true {
		t.Fatalf("exchange %+v", x)
	}
	bs := b.BindingsFrom("/", "old")
	if len(bs) != 2 || bs[0].Dest != "old-0" || bs[0].Key != "a" || bs[0].Args[argPartitionOrder] != int64(0) ||
		bs[1].Dest != "old-1" || bs[1].Key != "b" || bs[1].Args[argPartitionOrder] != int64(1) {
		t.Fatalf("bindings %+v", bs)
	}
	if got, err := b.Route("/", "old", []string{"b"}, nil, nil); err != nil || !slices.Equal(got, []string{"old-1"}) {
		t.Fatalf("route b = %v, %v", got, err)
	}
	if x, err := b.Exchange("/", "clash"); err != nil || x.Type != ExchangeFanout || len(b.BindingsFrom("/", "clash")) != 0 {
		t.Fatalf("clashing exchange %+v, %v, bindings %v", x, err, b.BindingsFrom("/", "clash"))
	}
	if _, err := b.Stream("/", "clash-0"); err != nil {
		t.Fatalf("clash-0: %v", err)
	}
	n := 0
	if err := b.cat.scan([]byte("x/"), func(_, _ []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("%d x/ records left, %v", n, err)
	}
}
