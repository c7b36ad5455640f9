package route

// Topic matching. A binding key is a pattern of dot-separated words where
// "*" matches exactly one word and "#" zero or more; a routing key is
// words. "" is zero words and "a..b" has an empty middle word, as
// rabbit_db_topic_exchange:split_topic_key_binary has it.
//
// The bindings of a topic exchange form a trie over the pattern words.
// Matching runs the trie as an NFA: the set of live nodes advances one
// routing key word at a time (literal child, "*" child, and a node reached
// by a "#" edge stays live), with a node's "#" child live whenever the
// node is (zero words). Each node enters a set at most once per word, so
// matching costs O(words × live nodes) whatever the number of "#" in the
// patterns — the memoisation of (node, remaining words) states that
// RabbitMQ's trie_match does, without the recursion.

// topicTrie is a trie of topic binding keys. Nodes are indexed by int32;
// node 0 is the root. Freed nodes are reused.
type topicTrie struct {
	nodes []topicNode
	free  []int32
}

type topicNode struct {
	parent int32
	word   string           // edge label from the parent: a word, "*" or "#"
	lit    map[string]int32 // children by literal word
	star   int32            // "*" child, or -1
	hash   int32            // "#" child, or -1
	isHash bool             // reached by a "#" edge: absorbs words
	dests  []*Binding       // bindings whose key ends here
}

// topicScratch is the matcher's per-call state (part of the pooled
// routing).
type topicScratch struct {
	gen       uint32
	seen      []uint32 // by node: gen when added to the current set
	cur, next []int32
}

func newTopicTrie() *topicTrie {
	return &topicTrie{nodes: []topicNode{{parent: -1, star: -1, hash: -1}}}
}

// forEachWord calls fn with each word of a topic key; "" has none.
func forEachWord(key string, fn func(w string)) {
	if key == "" {
		return
	}
	start := 0
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			fn(key[start:i])
			start = i + 1
		}
	}
	fn(key[start:])
}

// child returns n's child along w, or -1.
func (t *topicTrie) child(n int32, w string) int32 {
	nd := &t.nodes[n]
	switch w {
	case "*":
		return nd.star
	case "#":
		return nd.hash
	}
	if c, ok := nd.lit[w]; ok {
		return c
	}
	return -1
}

// newChild adds n's child along w.
func (t *topicTrie) newChild(n int32, w string) int32 {
	c := topicNode{parent: n, word: w, star: -1, hash: -1, isHash: w == "#"}
	var id int32
	if k := len(t.free); k > 0 {
		id = t.free[k-1]
		t.free = t.free[:k-1]
		t.nodes[id] = c
	} else {
		id = int32(len(t.nodes))
		t.nodes = append(t.nodes, c)
	}
	nd := &t.nodes[n]
	switch w {
	case "*":
		nd.star = id
	case "#":
		nd.hash = id
	default:
		if nd.lit == nil {
			nd.lit = map[string]int32{}
		}
		nd.lit[w] = id
	}
	return id
}

// find returns the node of pattern, or -1.
func (t *topicTrie) find(pattern string) int32 {
	n := int32(0)
	forEachWord(pattern, func(w string) {
		if n >= 0 {
			n = t.child(n, w)
		}
	})
	return n
}

// insert adds b under pattern.
func (t *topicTrie) insert(pattern string, b *Binding) {
	n := int32(0)
	forEachWord(pattern, func(w string) {
		c := t.child(n, w)
		if c < 0 {
			c = t.newChild(n, w)
		}
		n = c
	})
	t.nodes[n].dests = append(t.nodes[n].dests, b)
}

// remove removes b from under pattern and prunes the nodes left empty.
func (t *topicTrie) remove(pattern string, b *Binding) {
	n := t.find(pattern)
	if n < 0 {
		return
	}
	t.nodes[n].dests = removeBinding(t.nodes[n].dests, b)
	for n > 0 {
		nd := &t.nodes[n]
		if len(nd.dests) > 0 || len(nd.lit) > 0 || nd.star >= 0 || nd.hash >= 0 {
			return
		}
		p, w := nd.parent, nd.word
		*nd = topicNode{parent: -1, star: -1, hash: -1}
		t.free = append(t.free, n)
		pn := &t.nodes[p]
		switch w {
		case "*":
			pn.star = -1
		case "#":
			pn.hash = -1
		default:
			delete(pn.lit, w)
			if len(pn.lit) == 0 {
				pn.lit = nil
			}
		}
		n = p
	}
}

// match returns the nodes whose patterns match key. The slice belongs to
// s and is valid until the next call.
func (t *topicTrie) match(s *topicScratch, key string) []int32 {
	if len(s.seen) < len(t.nodes) {
		s.seen = growStamps(s.seen, len(t.nodes))
	}
	s.step()
	cur := t.enter(s, s.cur[:0], 0)
	if key != "" {
		start := 0
		for i := 0; i <= len(key); i++ {
			if i < len(key) && key[i] != '.' {
				continue
			}
			w := key[start:i]
			start = i + 1
			s.step()
			next := s.next[:0]
			for _, n := range cur {
				nd := &t.nodes[n]
				if nd.lit != nil {
					if c, ok := nd.lit[w]; ok {
						next = t.enter(s, next, c)
					}
				}
				if nd.star >= 0 {
					next = t.enter(s, next, nd.star)
				}
				if nd.isHash {
					next = t.enter(s, next, n)
				}
			}
			s.cur, s.next = next, cur
			cur = next
			if len(cur) == 0 {
				break
			}
		}
	}
	s.cur = cur
	return cur
}

// step starts a new node set.
func (s *topicScratch) step() {
	s.gen++
	if s.gen == 0 {
		clear(s.seen)
		s.gen = 1
	}
}

// enter adds n to the set, with the "#" children it implies.
func (t *topicTrie) enter(s *topicScratch, set []int32, n int32) []int32 {
	for n >= 0 && s.seen[n] != s.gen {
		s.seen[n] = s.gen
		set = append(set, n)
		n = t.nodes[n].hash
	}
	return set
}
