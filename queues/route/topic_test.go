package route

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// refTopicMatch is the reference matcher: a dynamic programme over
// (pattern word, key word) positions.
func refTopicMatch(pattern, key string) bool {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ".")
	}
	p, k := split(pattern), split(key)
	// m[i][j]: p[i:] matches k[j:]
	m := make([][]bool, len(p)+1)
	for i := range m {
		m[i] = make([]bool, len(k)+1)
	}
	m[len(p)][len(k)] = true
	for i := len(p) - 1; i >= 0; i-- {
		for j := len(k); j >= 0; j-- {
			switch p[i] {
			case "#":
				m[i][j] = m[i+1][j] || j < len(k) && m[i][j+1]
			case "*":
				m[i][j] = j < len(k) && m[i+1][j+1]
			default:
				m[i][j] = j < len(k) && p[i] == k[j] && m[i+1][j+1]
			}
		}
	}
	return m[0][0]
}

// trieMatches returns the patterns of the bindings in t matching key.
func trieMatches(t *topicTrie, s *topicScratch, key string) []string {
	var out []string
	for _, n := range t.match(s, key) {
		for _, b := range t.nodes[n].dests {
			out = append(out, b.def.Key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func trieOf(patterns ...string) *topicTrie {
	t := newTopicTrie()
	for _, p := range patterns {
		t.insert(p, &Binding{def: BindingDef{Key: p}})
	}
	return t
}

// Ensure the trie matches each pattern as the reference does, on the
// cases RabbitMQ's topic tests single out.
func TestTopicMatchTable(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		{"#", "", true},
		{"#", "a", true},
		{"#", "a.b.c", true},
		{"#", ".", true},
		{"*", "", false},
		{"*", "a", true},
		{"*", "a.b", false},
		{"*", ".", false},
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		{"a", "a", true},
		{"a", "b", false},
		{"a.#.b", "a.b", true},
		{"a.#.b", "a.x.b", true},
		{"a.#.b", "a.x.y.b", true},
		{"a.#.b", "a.b.c", false},
		{"a.#.b", "b.a.b", false},
		{"a.#.b", "a.b.b", true},
		{"#.#", "", true},
		{"#.#", "a", true},
		{"#.#", "a.b.c", true},
		{"*.*", "a.b", true},
		{"*.*", "a", false},
		{"*.*", "a.b.c", false},
		{"*.*", ".", true},
		{"*.*", "a.", true},
		{"a..b", "a..b", true},
		{"a..b", "a.b", false},
		{"a.*.b", "a..b", true},
		{"a.b", "a..b", false},
		{"a.", "a.", true},
		{"a.", "a", false},
		{"a.*", "a.", true},
		{"a.#", "a", true},
		{"a.#", "a.", true},
		{"#.a", "a", true},
		{"#.a", "b.a", true},
		{"#.a", "a.b", false},
		{"#.a.#", "x.a.y", true},
		{"#.a.#", "a", true},
		{"#.b.#", "a.b.c", true},
		{"*.#", "", false},
		{"*.#", "a", true},
		{"#.*", "", false},
		{"#.*", "a.b.c", true},
		{"*.#.*", "a", false},
		{"*.#.*", "a.b", true},
		{"a.*.#", "a", false},
		{"a.*.#", "a.b.c.d", true},
		{"stock.*.nyse", "stock.ibm.nyse", true},
		{"stock.#", "stock", true},
		{"*", "*", true},
		{"a", "*", false},
		{"#", "#", true},
		{"a.#.#.b", "a.b", true},
		{"a.#.#.b", "a.x.y.z.b", true},
		{"#.#.#.#.a", strings.Repeat("x.", 40) + "b", false},
		{"#.a.#.a.#.a.#.a.#.b", strings.Repeat("a.", 60) + "a", false},
		{"#.a.#.a.#.a.#.a.#.b", strings.Repeat("a.", 60) + "b", true},
	}
	var s topicScratch
	for _, c := range cases {
		if ref := refTopicMatch(c.pattern, c.key); ref != c.want {
			t.Fatalf("reference(%q, %q) = %v, want %v", c.pattern, c.key, ref, c.want)
		}
		got := len(trieMatches(trieOf(c.pattern), &s, c.key)) == 1
		if got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
	// All the patterns in one trie.
	all := make([]string, len(cases))
	for i, c := range cases {
		all[i] = c.pattern
	}
	tr := trieOf(all...)
	for _, c := range cases {
		var want []string
		for _, p := range all {
			if refTopicMatch(p, c.key) {
				want = append(want, p)
			}
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if got := trieMatches(tr, &s, c.key); !slices.Equal(got, want) {
			t.Errorf("key %q: got %q, want %q", c.key, got, want)
		}
	}
}

// Ensure keys of many words against patterns with many '#' stay linear:
// no (node, word) state is expanded twice.
func TestTopicMatchNotCombinatorial(t *testing.T) {
	tr := trieOf("#.a.#.a.#.a.#.a.#.a.#.a.#.b", "#.#.#.#.#.#.#.#.c", "*.#.*.#.*.#.*.#.d")
	key := strings.Repeat("a.", 500) + "z"
	var s topicScratch
	start := time.Now()
	if got := trieMatches(tr, &s, key); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("match took %v", d)
	}
}

// Ensure removing bindings prunes the trie back to its root and that
// freed nodes are reused.
func TestTopicTrieRemove(t *testing.T) {
	tr := newTopicTrie()
	patterns := []string{"a.b.c", "a.b", "a.*.c", "#", "a.#", "#.c", "", "a..c", "a.b.c"}
	bs := make([]*Binding, len(patterns))
	for i, p := range patterns {
		bs[i] = &Binding{def: BindingDef{Key: p}}
		tr.insert(p, bs[i])
	}
	var s topicScratch
	if got := trieMatches(tr, &s, "a.b.c"); !slices.Equal(got, []string{"#", "#.c", "a.#", "a.*.c", "a.b.c"}) {
		t.Fatalf("got %q", got)
	}
	size := len(tr.nodes)
	tr.remove("a.b.c", bs[0])
	if got := trieMatches(tr, &s, "a.b.c"); !slices.Contains(got, "a.b.c") {
		t.Fatalf("second a.b.c binding lost: %q", got)
	}
	for i, p := range patterns {
		tr.remove(p, bs[i])
	}
	tr.remove("x.y", bs[0]) // missing: no-op
	if live := len(tr.nodes) - len(tr.free); live != 1 {
		t.Fatalf("%d live nodes after removing everything, want the root", live)
	}
	if r := tr.nodes[0]; len(r.lit) != 0 || r.star >= 0 || r.hash >= 0 || len(r.dests) != 0 {
		t.Fatalf("root not empty: %+v", r)
	}
	for i, p := range patterns {
		tr.insert(p, bs[i])
	}
	if len(tr.nodes) != size {
		t.Fatalf("nodes not reused: %d, was %d", len(tr.nodes), size)
	}
}

// FuzzTopicMatch compares the trie with the reference matcher. The first
// argument holds up to eight patterns separated by '|'; half of them are
// removed again before a second comparison.
func FuzzTopicMatch(f *testing.F) {
	f.Add("a.#.b|*.*|#", "a.x.b")
	f.Add("#.#|#", "")
	f.Add("a..b|a.*.b|*.#.*", "a..b")
	f.Add("#.a.#.b.#|a.#.#.b", "a.a.b.b")
	f.Add("||*", ".")
	f.Fuzz(func(t *testing.T, patterns, key string) {
		ps := strings.Split(patterns, "|")
		if len(ps) > 8 {
			ps = ps[:8]
		}
		tr := newTopicTrie()
		bs := make([]*Binding, len(ps))
		for i, p := range ps {
			bs[i] = &Binding{def: BindingDef{Key: p}}
			tr.insert(p, bs[i])
		}
		var s topicScratch
		check := func(live []string) {
			var want []string
			for _, p := range live {
				if refTopicMatch(p, key) {
					want = append(want, p)
				}
			}
			slices.Sort(want)
			want = slices.Compact(want)
			if got := trieMatches(tr, &s, key); !slices.Equal(got, want) {
				t.Fatalf("patterns %q key %q: got %q, want %q", live, key, got, want)
			}
		}
		check(ps)
		var live []string
		for i, p := range ps {
			if i%2 == 0 {
				tr.remove(p, bs[i])
			} else {
				live = append(live, p)
			}
		}
		check(live)
	})
}
