package route

import "testing"

// Ensure routing goes to the alternate exchange of an exchange that
// matches nothing, as a policy sets it, through a cycle that visits each
// exchange once, and that the default exchange routes by queue name.
func TestRouteTraversal(t *testing.T) {
	ix := NewIndex("/")
	addQueue(ix, "q1")
	addQueue(ix, "q2")
	// d routes k to q1, the rest to its alternate exchange f, which
	// routes to q2 and back to d.
	declare(t, ix, "d", ExchangeDirect, map[string]any{ArgAlternateExchange: "f"})
	declare(t, ix, "f", ExchangeFanout, nil)
	bindQ(t, ix, "d", "q1", "k", nil)
	bindQ(t, ix, "f", "q2", "", nil)
	bindX(t, ix, "f", "d", "")
	wantRoute(t, ix, "d", nil, []string{"k"}, "q1")
	wantRoute(t, ix, "d", nil, []string{"other", "k"}, "q1")
	wantRoute(t, ix, "d", nil, []string{"other"}, "q2")
	wantRoute(t, ix, "f", nil, []string{"k"}, "q1", "q2")
	wantRoute(t, ix, "f", nil, []string{"other"}, "q2")

	d := ix.Exchange("d")
	d.ClearAlternate()
	wantRoute(t, ix, "d", nil, []string{"other"})
	d.SetAlternate("") // the default exchange, reached so, routes nothing
	wantRoute(t, ix, "d", nil, []string{"q1"})
	d.SetAlternate("missing")
	wantRoute(t, ix, "d", nil, []string{"other"})
	d.SetAlternate("f")
	wantRoute(t, ix, "d", nil, []string{"other"}, "q2")

	wantRoute(t, ix, "", nil, []string{"q1", "nope", "q2", "q1"}, "q1", "q2")
	removeQueue(ix, "q1")
	wantRoute(t, ix, "", nil, []string{"q1", "q2"}, "q2")
	wantRoute(t, ix, "d", nil, []string{"k"}, "q2")
}

// Ensure a Change deletes an exchange with its bindings both ways, and
// the auto-delete exchanges it leaves without bindings, transitively.
func TestChangeAutoDelete(t *testing.T) {
	ix := NewIndex("/")
	addQueue(ix, "q")
	for _, name := range []string{"ad1", "ad2"} {
		ix.Apply(&Change{AddX: NewExchange(ExchangeDef{Name: name, Type: ExchangeFanout, AutoDelete: true})})
	}
	declare(t, ix, "x", ExchangeFanout, nil)
	bindX(t, ix, "ad1", "ad2", "")
	bindQ(t, ix, "ad2", "q", "", nil)
	bindX(t, ix, "x", "ad1", "")
	bindQ(t, ix, "x", "q", "", nil)

	// Deleting ad2's only binding deletes ad2, whose deletion removes
	// ad1's only binding, which deletes ad1.
	var c Change
	c.DeleteBinding(ix.Exchange("ad2").Binding(BindingDef{Source: "ad2", Dest: "q"}.Ident()))
	c.AutoDelete()
	if len(c.DelX) != 2 || len(c.DelB) != 3 {
		t.Fatalf("change deletes %d exchanges and %d bindings, want 2 and 3", len(c.DelX), len(c.DelB))
	}
	ix.Apply(&c)
	if ix.Exchange("ad1") != nil || ix.Exchange("ad2") != nil {
		t.Fatal("auto-delete exchanges left")
	}
	if n := ix.Exchange("x").NumBindings(); n != 1 {
		t.Fatalf("x has %d bindings, want 1 (to q)", n)
	}
	wantRoute(t, ix, "x", nil, nil, "q")
	// The freed exchange ids are reused.
	declare(t, ix, "y", ExchangeFanout, nil)
	if next := ix.xIDs.next; next != int32(len(standardExchanges)+3) {
		t.Fatalf("next exchange id %d, want %d", next, len(standardExchanges)+3)
	}
}
