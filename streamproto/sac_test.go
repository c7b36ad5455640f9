package streamproto

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/streamproto/wire"
)

// Unit tests of the single active consumer coordinator with fake
// subscriptions: a script of joins, leaves and replies, and the exact
// ConsumerUpdates, delivery starts and stops each step causes.

// sacHarness drives a coordinator with fake members named by one letter.
type sacHarness struct {
	t       *testing.T
	co      sacCoordinator
	members map[string]*sacMember
	subs    map[string]*sacFakeSub
	events  []string                  // since the last step
	held    map[string]uint32         // activations answered by hold, by member
	streams map[string]*osiris.Stream // fake stream instances, for group identity only
}

// sacFakeSub records what the coordinator asks of a subscription.
type sacFakeSub struct {
	h          *sacHarness
	name       string
	delivering bool
}

func (s *sacFakeSub) consumerUpdate(corr uint32, active bool) {
	if active {
		s.h.events = append(s.h.events, fmt.Sprintf("%s:up#%d", s.name, corr))
	} else {
		s.h.events = append(s.h.events, fmt.Sprintf("%s:down#%d", s.name, corr))
	}
}

func (s *sacFakeSub) stopDelivery() {
	if s.delivering {
		s.h.events = append(s.h.events, s.name+":stop")
	}
	s.delivering = false
}

// sacOwner is a fake connection; members share one with owner=X.
type sacOwner struct{ name string }

func newSACHarness(t *testing.T) *sacHarness {
	return &sacHarness{t: t, members: map[string]*sacMember{}, subs: map[string]*sacFakeSub{}, held: map[string]uint32{},
		streams: map[string]*osiris.Stream{"s": new(osiris.Stream), "s2": new(osiris.Stream)}}
}

// step runs one command and returns the events it caused, space
// separated, plus the join's code when it is not OK. Commands:
//
//	join A [stream=s] [super=inv] [part=N] [owner=X] [name=g]
//	leave A B ...          (one call, several members)
//	reply A                (answers A's pending ConsumerUpdate; an activation is completed)
//	reply A as=B           (A's pending corr, from B's connection)
//	reply A corr=N         (a corr of choice from A's connection)
//	hold A / complete A    (answer an activation, then complete it later)
//	drop [stream=s]        (the stream is deleted)
func (h *sacHarness) step(cmd string) string {
	h.t.Helper()
	f := strings.Fields(cmd)
	opts := map[string]string{"stream": "s", "name": "g"}
	var args []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			opts[k] = v
		} else {
			args = append(args, a)
		}
	}
	h.events = nil
	extra := ""
	switch f[0] {
	case "join":
		name := args[0]
		sub := &sacFakeSub{h: h, name: name}
		owner := &sacOwner{name}
		if o := opts["owner"]; o != "" {
			owner = h.members[o].owner.(*sacOwner)
		}
		m := &sacMember{owner: owner, sub: sub}
		partition := -1
		if p, ok := opts["part"]; ok {
			partition, _ = strconv.Atoi(p)
		}
		key := sacKey{vhost: "/", stream: opts["stream"], name: opts["name"]}
		code := h.co.join(m, key, h.streams[opts["stream"]], opts["super"], partition, func() {
			h.events = append(h.events, name+":joined")
		})
		if code != wire.CodeOK {
			extra = fmt.Sprintf(" code=0x%02x", uint16(code))
		} else {
			h.members[name], h.subs[name] = m, sub
		}
	case "leave":
		var ms []*sacMember
		for _, a := range args {
			ms = append(ms, h.members[a])
		}
		h.co.leave(ms...)
	case "reply", "hold":
		m := h.members[args[0]]
		corr := h.corrOf(m)
		if c, ok := opts["corr"]; ok {
			n, _ := strconv.Atoi(c)
			corr = uint32(n)
		}
		owner := m.owner
		if as := opts["as"]; as != "" {
			owner = h.members[as].owner
		}
		got := h.co.reply(owner, corr)
		if got != nil && got != m {
			h.t.Fatalf("%s: reply returned member %s", cmd, got.sub.(*sacFakeSub).name)
		}
		if got != nil {
			if f[0] == "hold" {
				h.held[args[0]] = corr
				extra = " held"
			} else {
				h.complete(args[0], corr)
			}
		}
	case "complete":
		h.complete(args[0], h.held[args[0]])
	case "drop":
		h.co.dropStream("/", opts["stream"], h.streams[opts["stream"]])
	default:
		h.t.Fatalf("unknown command %q", cmd)
	}
	h.check()
	return strings.TrimSpace(strings.Join(h.events, " ") + extra)
}

// complete calls activated for A's activation corr.
func (h *sacHarness) complete(name string, corr uint32) {
	m, sub := h.members[name], h.subs[name]
	if h.co.activated(m, corr, func() {
		sub.delivering = true
		h.events = append(h.events, name+":start")
	}) {
		return
	}
	h.events = append(h.events, name+":discard")
}

// corrOf is m's pending corr (white box).
func (h *sacHarness) corrOf(m *sacMember) uint32 {
	h.co.mu.Lock()
	defer h.co.mu.Unlock()
	return m.corr
}

// check asserts the coordinator's invariants: in every group at most one
// member is not inactive and it is the group's current member; only an
// active member delivers; the pending replies are exactly those of the
// activating and deactivating members; members point at their group.
func (h *sacHarness) check() {
	h.t.Helper()
	h.co.mu.Lock()
	defer h.co.mu.Unlock()
	pending := 0
	for key, g := range h.co.mu.groups {
		if g.key != key || len(g.members) == 0 {
			h.t.Fatalf("group %v: key %v, %d members", key, g.key, len(g.members))
		}
		busy := 0
		for _, m := range g.members {
			sub := m.sub.(*sacFakeSub)
			if m.group != g {
				h.t.Fatalf("member %s of group %v points at another group", sub.name, key)
			}
			if sub.delivering != (m.state == sacActive) {
				h.t.Fatalf("member %s is %v, delivering %v", sub.name, m.state, sub.delivering)
			}
			if m.state == sacInactive {
				continue
			}
			busy++
			if g.current != m {
				h.t.Fatalf("member %s is %v but not the group's current member", sub.name, m.state)
			}
			if m.state != sacActive {
				pending++
				if h.co.mu.pending[m.corr] != m {
					h.t.Fatalf("member %s is %v without its pending corr %d", sub.name, m.state, m.corr)
				}
			}
		}
		if busy > 1 {
			h.t.Fatalf("group %v has %d members not inactive", key, busy)
		}
		if busy == 0 && g.current != nil {
			h.t.Fatalf("group %v has a current member that is inactive", key)
		}
	}
	if len(h.co.mu.pending) != pending {
		h.t.Fatalf("%d pending replies, %d members waiting", len(h.co.mu.pending), pending)
	}
	for name, sub := range h.subs {
		if m := h.members[name]; m.group == nil && (sub.delivering || m.state != sacInactive) {
			h.t.Fatalf("member %s left but is %v, delivering %v", name, m.state, sub.delivering)
		}
	}
}

// groups is the number of groups.
func (h *sacHarness) groups() int {
	h.co.mu.Lock()
	defer h.co.mu.Unlock()
	return len(h.co.mu.groups)
}

// Ensure the coordinator's choice and hand-over follow each script exactly:
// plain streams keep the first member and fail over in registration
// order; partitions go to partition mod members, handing over with
// ConsumerUpdate(active=0) and waiting for its reply; stale, foreign and
// overtaken replies change nothing; and every group is gone at the end.
func TestSACCoordinatorScripts(t *testing.T) {
	type step struct{ do, want string }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"plain one member", []step{
			{"join A", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"reply A", ""}, // answered already: stale
			{"leave A", "A:stop"},
			{"leave A", ""}, // left already
		}},
		{"plain two members", []step{
			{"join A", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B", "B:joined"},
			{"leave A", "A:stop B:up#1"},
			{"reply B", "B:start"},
			{"leave B", "B:stop"},
		}},
		{"plain three members fail over in registration order", []step{
			{"join A", "A:joined A:up#0"},
			{"join B", "B:joined"},
			{"join C", "C:joined"},
			{"reply A", "A:start"},
			{"leave B", ""}, // inactive: nothing changes
			{"join D", "D:joined"},
			{"leave A", "A:stop C:up#1"},
			{"reply C", "C:start"},
			{"leave C", "C:stop D:up#2"},
			{"reply D", "D:start"},
			{"leave D", "D:stop"},
		}},
		{"plain active leaves before answering", []step{
			{"join A", "A:joined A:up#0"},
			{"join B", "B:joined"},
			{"leave A", "B:up#1"},
			{"reply A corr=0", ""},
			{"reply B", "B:start"},
			{"leave B", "B:stop"},
		}},
		{"plain members leave together", []step{
			{"join A", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B owner=A", "B:joined"},
			{"join C", "C:joined"},
			{"leave A B", "A:stop C:up#1"}, // one connection closes: C is next, B is never activated
			{"reply C", "C:start"},
			{"leave C", "C:stop"},
		}},
		{"replies only from the member's connection and corr", []step{
			{"join A", "A:joined A:up#0"},
			{"join B", "B:joined"},
			{"reply A as=B", ""},
			{"reply A corr=7", ""},
			{"reply A", "A:start"},
			{"leave A B", "A:stop"},
		}},
		{"partition 0 with two members stays on the first", []step{
			{"join A super=inv part=0", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B super=inv part=0", "B:joined"},
			{"join C super=inv part=0", "C:joined"},
			{"leave A", "A:stop B:up#1"},
			{"reply B", "B:start"},
			{"leave B C", "B:stop"},
		}},
		{"partition 1 hands over on join and leave", []step{
			{"join A super=inv part=1", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B super=inv part=1", "B:joined A:stop A:down#1"}, // 1 mod 2: B
			{"reply B", ""}, // not B's turn to answer
			{"reply A", "B:up#2"},
			{"reply B", "B:start"},
			{"join C super=inv part=1", "C:joined"}, // 1 mod 3: still B
			{"leave A", "B:stop B:down#3"},          // [B C], 1 mod 2: C
			{"reply B", "C:up#4"},
			{"reply C", "C:start"},
			{"leave B", ""}, // [C], 1 mod 1: still C
			{"join D super=inv part=1", "D:joined C:stop C:down#5"},
			{"join E super=inv part=1", "E:joined"}, // [C D E], 1 mod 3: D, after C answers
			{"reply C", "D:up#6"},
			{"reply D", "D:start"},
			{"leave C D E", "D:stop"},
		}},
		{"partition 2 with three members", []step{
			{"join A super=inv part=2", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B super=inv part=2", "B:joined"},                 // 2 mod 2 = 0: A
			{"join C super=inv part=2", "C:joined A:stop A:down#1"}, // 2 mod 3: C
			{"reply A", "C:up#2"},
			{"reply C", "C:start"},
			{"leave C", "C:stop A:up#3"}, // the active leaves: [A B], 2 mod 2 = 0
			{"reply A", "A:start"},
			{"leave A B", "A:stop"},
		}},
		{"deactivated member's connection goes away before replying", []step{
			{"join A super=inv part=1", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B super=inv part=1", "B:joined A:stop A:down#1"},
			{"leave A", "B:up#2"},
			{"reply A corr=1", ""},
			{"reply B", "B:start"},
			{"leave B", "B:stop"},
		}},
		{"hand-over while the choice is still activating", []step{
			{"join A super=inv part=1", "A:joined A:up#0"},
			{"join B super=inv part=1", "B:joined A:down#1"},
			{"reply A corr=0", ""}, // its activation was overtaken
			{"reply A", "B:up#2"},
			{"reply B", "B:start"},
			{"leave A B", "B:stop"},
		}},
		{"activation overtaken while its reader opens", []step{
			{"join A super=inv part=1", "A:joined A:up#0"},
			{"hold A", "held"},
			{"join B super=inv part=1", "B:joined A:down#1"},
			{"complete A", "A:discard"},
			{"reply A", "B:up#2"},
			{"hold B", "held"},
			{"leave B", "A:up#3"},
			{"complete B", "B:discard"},
			{"reply A", "A:start"},
			{"leave A", "A:stop"},
		}},
		{"member joining during a hand-over waits for it", []step{
			{"join A super=inv part=1", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B super=inv part=1", "B:joined A:stop A:down#1"},
			{"join C super=inv part=1", "C:joined"}, // 1 mod 3 = B, after A answers
			{"reply A", "B:up#2"},
			{"reply B", "B:start"},
			{"leave A B C", "B:stop"},
		}},
		{"super stream is fixed by the first member", []step{
			{"join A super=inv part=0", "A:joined A:up#0"},
			{"join B super=other part=0", "code=0x11"},
			{"join C", "code=0x11"}, // no super stream: another group shape
			{"join D super=inv part=5", "D:joined"},
			{"reply A", "A:start"}, // the group's partition index stays 0
			{"leave A D", "A:stop"},
		}},
		{"super stream without a partition index is plain", []step{
			{"join A super=inv part=-1", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B super=inv part=-1", "B:joined"},
			{"leave A", "A:stop B:up#1"},
			{"leave B", ""},
		}},
		{"groups are per stream and name", []step{
			{"join A", "A:joined A:up#0"},
			{"join B name=other", "B:joined B:up#1"},
			{"join C stream=s2", "C:joined C:up#2"},
			{"reply A", "A:start"},
			{"reply B", "B:start"},
			{"reply C", "C:start"},
			{"leave A B C", "A:stop B:stop C:stop"},
		}},
		{"stream deletion drops its groups silently", []step{
			{"join A", "A:joined A:up#0"},
			{"reply A", "A:start"},
			{"join B", "B:joined"},
			{"join C stream=s2", "C:joined C:up#1"},
			{"drop", "A:stop"},
			{"leave A B", ""}, // no activation of B
			{"reply A corr=0", ""},
			{"leave C", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSACHarness(t)
			for i, s := range tc.steps {
				if got := h.step(s.do); got != s.want {
					t.Fatalf("step %d %q: got %q, want %q", i, s.do, got, s.want)
				}
			}
			if n := h.groups(); n != 0 {
				t.Fatalf("%d groups left at the end", n)
			}
		})
	}
}

// Ensure a group created on a stream instance that was deleted and
// created again is replaced when a member of the new instance joins
// before the deletion reaches the coordinator.
func TestSACCoordinatorRecreatedStream(t *testing.T) {
	h := newSACHarness(t)
	old := h.streams["s"]
	if got := h.step("join A"); got != "A:joined A:up#0" {
		t.Fatalf("join A: %q", got)
	}
	h.step("reply A")
	h.streams["s"] = new(osiris.Stream) // deleted and created again
	if got := h.step("join B"); got != "A:stop B:joined B:up#1" {
		t.Fatalf("join B on the new instance: got %q", got)
	}
	if got := h.step("leave A"); got != "" {
		t.Fatalf("leave A (dropped): got %q", got)
	}
	// The old instance's deletion arrives late and leaves the new group.
	h.co.dropStream("/", "s", old)
	if got := h.step("reply B"); got != "B:start" {
		t.Fatalf("reply B: got %q", got)
	}
	if got := h.step("leave B"); got != "B:stop" || h.groups() != 0 {
		t.Fatalf("leave B: got %q, %d groups", got, h.groups())
	}
}

// Ensure that for every partition index p and n members joining one by
// one (each activation answered at once), the member delivering at the
// end is member p mod n, and that members leaving from the front move it
// to p mod (members left).
func TestSACCoordinatorPartitionSpread(t *testing.T) {
	names := []string{"A", "B", "C"}
	for p := range 5 {
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("partition=%d/members=%d", p, n), func(t *testing.T) {
				h := newSACHarness(t)
				joinOpts := fmt.Sprintf(" super=inv part=%d", p)
				for _, name := range names[:n] {
					h.step("join " + name + joinOpts)
					h.settle()
				}
				if got, want := h.delivering(), names[p%n]; got != want {
					t.Fatalf("delivering %q, want %q", got, want)
				}
				for i := 0; i < n-1; i++ {
					h.step("leave " + names[i])
					h.settle()
					left := names[i+1 : n]
					if got, want := h.delivering(), left[p%len(left)]; got != want {
						t.Fatalf("after %s left: delivering %q, want %q", names[i], got, want)
					}
				}
				h.step("leave " + names[n-1])
				if h.groups() != 0 || h.delivering() != "" {
					t.Fatalf("after all left: %d groups, delivering %q", h.groups(), h.delivering())
				}
			})
		}
	}
}

// settle answers pending ConsumerUpdates until none is left.
func (h *sacHarness) settle() {
	h.t.Helper()
	for range 10 {
		h.co.mu.Lock()
		var m *sacMember
		for _, pm := range h.co.mu.pending {
			m = pm
		}
		h.co.mu.Unlock()
		if m == nil {
			return
		}
		h.step("reply " + m.sub.(*sacFakeSub).name)
	}
	h.t.Fatal("pending ConsumerUpdates do not settle")
}

// delivering is the name of the member delivering, "" if none; it fails
// if more than one is.
func (h *sacHarness) delivering() string {
	h.t.Helper()
	var got []string
	for name, s := range h.subs {
		if s.delivering {
			got = append(got, name)
		}
	}
	if len(got) > 1 {
		h.t.Fatalf("members %v deliver at once", got)
	}
	if len(got) == 0 {
		return ""
	}
	return got[0]
}
