package route

// Change is one atomic change of an Index: an exchange and bindings to
// add, or bindings and exchanges to delete with what their deletion
// implies (DeleteExchange, AutoDelete). The writer builds it reading the
// index, stores its durable part, then applies it (Index.Apply).
type Change struct {
	AddX *Exchange
	AddB []*Binding

	DelB       []*Binding
	DelX       []*Exchange
	delBSet    map[*Binding]bool
	srcRemoved map[*Exchange]int // bindings of DelB by source
	delXSet    map[*Exchange]bool
}

// DeleteBinding adds b to the bindings to delete.
func (c *Change) DeleteBinding(b *Binding) {
	if c.delBSet == nil {
		c.delBSet = map[*Binding]bool{}
		c.srcRemoved = map[*Exchange]int{}
	}
	if c.delBSet[b] {
		return
	}
	c.delBSet[b] = true
	c.DelB = append(c.DelB, b)
	c.srcRemoved[b.src]++
}

// DeleteExchange deletes x and every binding from or to it.
func (c *Change) DeleteExchange(x *Exchange) {
	if c.delXSet == nil {
		c.delXSet = map[*Exchange]bool{}
	}
	if c.delXSet[x] {
		return
	}
	c.delXSet[x] = true
	c.DelX = append(c.DelX, x)
	for _, b := range x.src {
		c.DeleteBinding(b)
	}
	for _, b := range x.dst {
		c.DeleteBinding(b)
	}
}

// AutoDelete deletes the auto-delete exchanges the change leaves without
// bindings as a source, transitively (deleting one removes its bindings
// as a destination, which may empty another), as RabbitMQ does.
func (c *Change) AutoDelete() {
	for i := 0; i < len(c.DelB); i++ {
		s := c.DelB[i].src
		if s.def.AutoDelete && !c.delXSet[s] && c.srcRemoved[s] == len(s.src) {
			c.DeleteExchange(s)
		}
	}
}
