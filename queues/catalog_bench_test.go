package queues

import (
	"testing"
)

// BenchmarkCatalogChanges is a client's topology churn on one node:
// declare a transient exchange, bind it to amq.fanout, unbind, delete
// (the path every catalog command takes on a single node).
func BenchmarkCatalogChanges(b *testing.B) {
	br, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	x := ExchangeDef{VHost: "/", Name: "bench-x", Type: "direct"}
	bd := BindingDef{VHost: "/", Source: "amq.fanout", DestKind: DestExchange, Dest: "bench-x", Key: "k"}
	b.ReportAllocs()
	for b.Loop() {
		if err := br.DeclareExchange(x); err != nil {
			b.Fatal(err)
		}
		if err := br.Bind(bd); err != nil {
			b.Fatal(err)
		}
		if err := br.Unbind(bd); err != nil {
			b.Fatal(err)
		}
		if err := br.DeleteExchange("/", "bench-x", false); err != nil {
			b.Fatal(err)
		}
	}
}
