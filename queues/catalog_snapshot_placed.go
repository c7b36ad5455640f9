package queues

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
)

// The replicated streams and quorum queues in a catalog snapshot
// (catalog_snapshot.go): their placements (members, leader, epoch) and
// the bindings to them, which are the cluster's, not a node's. A record's
// ID is the node's own directory name and does not travel: a node that
// restores a placement it lacks allocates its own, as the create
// commands' applies do.

// snapshotPlacements adds the replicated streams and queues, and the
// bindings to them, to s.
func (b *Broker) snapshotPlacements(s *catalogSnapshot) {
	for _, def := range b.StreamPlacements() {
		def.ID = 0
		s.Streams = append(s.Streams, def)
	}
	slices.SortFunc(s.Streams, func(x, y StreamDef) int { return cmpName(x.VHost, x.Name, y.VHost, y.Name) })
	reg := b.queueReg()
	reg.mu.Lock()
	for _, p := range reg.mu.placed {
		rec := p.rec
		rec.ID = 0
		s.Queues = append(s.Queues, rec)
	}
	reg.mu.Unlock()
	slices.SortFunc(s.Queues, func(x, y queueRecord) int { return cmpName(x.VHost, x.Name, y.VHost, y.Name) })
	for _, v := range s.VHosts {
		for _, bd := range b.Bindings(v.Name) {
			if bd.DestKind == DestQueue && b.placed(v.Name, bd.Dest) {
				s.QueueBindings = append(s.QueueBindings, bindingCmdDef(bd))
			}
		}
	}
}

func cmpName(v1, n1, v2, n2 string) int {
	return cmp.Or(cmp.Compare(v1, v2), cmp.Compare(n1, n2))
}

// placed reports whether name is a replicated stream or queue.
func (b *Broker) placed(vhost, name string) bool {
	_, ok := b.PlacementOf(vhost, name)
	return ok
}

// sameStream reports whether a stream's placement and one in a snapshot
// are the same stream (leader and epoch may differ: a leader move).
func sameStream(cur, want StreamDef) bool {
	return slices.Equal(cur.Members, want.Members) && maps.Equal(cur.Args, want.Args)
}

// sameQueue is sameStream for quorum queues.
func sameQueue(cur, want queueRecord) bool {
	if cur.Type != want.Type || cur.AutoDelete != want.AutoDelete || !slices.Equal(cur.Members, want.Members) {
		return false
	}
	a, err1 := decodeArgs(cur.Args)
	w, err2 := decodeArgs(want.Args)
	return err1 == nil && err2 == nil && reflect.DeepEqual(normalizeArgs(a), normalizeArgs(w))
}

// restoreReplaced deletes, through the delete commands' applies, the
// replicated streams and queues that the snapshot has under the same
// name but as another stream or queue (other members or arguments: one
// deleted and declared again while this node was away); they are created
// again by restorePlacements.
func (b *Broker) restoreReplaced(s *catalogSnapshot, run func(command)) {
	for _, want := range s.Streams {
		if cur, ok := b.StreamPlacement(want.VHost, want.Name); ok && !sameStream(cur, want) {
			run(&cmdDeleteStream{VHost: want.VHost, Name: want.Name})
		}
	}
	for _, want := range s.Queues {
		if cur, ok := b.queueReg().placement(want.VHost, want.Name); ok && !sameQueue(cur, want) {
			run(&cmdDeleteQuorum{VHost: want.VHost, Name: want.Name})
		}
	}
}

// restorePlacements creates the snapshot's streams and queues this node
// lacks (each member opens its copy in its role) and moves the leaders
// whose epoch the snapshot has moved on, through the commands' applies;
// then it adds the bindings to them.
func (b *Broker) restorePlacements(s *catalogSnapshot, run func(command)) {
	for _, want := range s.Streams {
		cur, ok := b.StreamPlacement(want.VHost, want.Name)
		switch {
		case !ok:
			want.ID = 0
			run(&cmdCreateStream{want})
		case want.Epoch > cur.Epoch:
			run(&cmdStreamLeader{VHost: want.VHost, Name: want.Name, Leader: want.Leader, Epoch: want.Epoch})
		}
	}
	for _, want := range s.Queues {
		cur, ok := b.queueReg().placement(want.VHost, want.Name)
		switch {
		case !ok:
			want.ID = 0
			run(&cmdDeclareQuorum{want})
		case want.Epoch > cur.Epoch:
			run(&cmdQueueLeader{VHost: want.VHost, Name: want.Name, Leader: want.Leader, Epoch: want.Epoch})
		}
	}
	for _, bd := range s.QueueBindings {
		run(&cmdBind{bd})
	}
}

// restoreUnplaced removes what the snapshot lacks: the bindings to
// replicated streams and queues, then the streams and queues themselves,
// with their data.
func (b *Broker) restoreUnplaced(s *catalogSnapshot, vhosts []string, run func(command)) {
	wantB := map[string]bool{}
	for _, bd := range s.QueueBindings {
		wantB[bd.VHost+"\x00"+normalIdent(bd.def())] = true
	}
	for _, vhost := range vhosts {
		for _, bd := range b.Bindings(vhost) {
			if bd.DestKind == DestQueue && b.placed(vhost, bd.Dest) && !wantB[vhost+"\x00"+normalIdent(bd)] {
				run(&cmdUnbind{bindingCmdDef(bd)})
			}
		}
	}
	wantS := map[streamName]bool{}
	for _, def := range s.Streams {
		wantS[streamName{def.VHost, def.Name}] = true
	}
	for _, def := range b.StreamPlacements() {
		if !wantS[streamName{def.VHost, def.Name}] {
			run(&cmdDeleteStream{VHost: def.VHost, Name: def.Name})
		}
	}
	wantQ := map[streamName]bool{}
	for _, rec := range s.Queues {
		wantQ[streamName{rec.VHost, rec.Name}] = true
	}
	for _, p := range b.QueuePlacements() {
		if !wantQ[streamName{p.VHost, p.Name}] {
			run(&cmdDeleteQuorum{VHost: p.VHost, Name: p.Name})
		}
	}
}
