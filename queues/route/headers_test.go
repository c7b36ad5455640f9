package route

import (
	"slices"
	"testing"
	"time"
)

// namedTable is a table type of a front end's codec.
type namedTable map[string]any

// Ensure headers bindings match as RabbitMQ 4.3's
// rabbit_exchange_type_headers does.
func TestHeadersMatch(t *testing.T) {
	type m = map[string]any
	ts := time.Unix(5, 0).UTC()
	cases := []struct {
		name    string
		args    m
		headers m
		want    bool
	}{
		{"all default, equal", m{"a": "x"}, m{"a": "x"}, true},
		{"all default, different", m{"a": "x"}, m{"a": "y"}, false},
		{"all default, missing", m{"a": "x"}, nil, false},
		{"all needs every key", m{"x-match": "all", "a": int32(1), "b": int32(2)}, m{"a": int32(1)}, false},
		{"all with extra headers", m{"x-match": "all", "a": int32(1), "b": int32(2)}, m{"a": int32(1), "b": int32(2), "c": "z"}, true},
		{"all, no keys", m{"x-match": "all"}, nil, true},
		{"default, no args", m{}, nil, true},
		{"any one of", m{"x-match": "any", "a": int32(1), "b": int32(2)}, m{"b": int32(2)}, true},
		{"any none", m{"x-match": "any", "a": int32(1), "b": int32(2)}, m{"c": int32(1)}, false},
		{"any, no keys", m{"x-match": "any"}, m{"a": "x"}, false},
		{"any, nil headers", m{"x-match": "any", "a": "x"}, nil, false},
		{"int widths", m{"a": int32(1)}, m{"a": int64(1)}, true},
		{"unsigned and signed", m{"a": uint8(7)}, m{"a": int16(7)}, true},
		{"int is not float", m{"a": int32(1)}, m{"a": 1.0}, false},
		{"float widths", m{"a": float32(1.5)}, m{"a": 1.5}, true},
		{"longstr and bytes", m{"a": "x"}, m{"a": []byte("x")}, true},
		{"bool", m{"a": true}, m{"a": true}, true},
		{"bool is not int", m{"a": true}, m{"a": int32(1)}, false},
		{"void: present", m{"a": nil}, m{"a": "anything"}, true},
		{"void: present as void", m{"a": nil}, m{"a": nil}, true},
		{"void: absent", m{"a": nil}, m{"b": "x"}, false},
		{"value vs void header", m{"a": "x"}, m{"a": nil}, false},
		{"any with void", m{"x-match": "any", "a": nil, "b": "y"}, m{"a": int8(0)}, true},
		{"x- args ignored by all", m{"x-match": "all", "x-foo": "bar"}, nil, true},
		{"x- args ignored by any", m{"x-match": "any", "x-foo": "bar"}, m{"x-foo": "bar"}, false},
		{"all-with-x: absent", m{"x-match": "all-with-x", "x-foo": "bar"}, nil, false},
		{"all-with-x: present", m{"x-match": "all-with-x", "x-foo": "bar", "a": int32(1)}, m{"x-foo": "bar", "a": int64(1)}, true},
		{"all-with-x ignores x-match", m{"x-match": "all-with-x"}, nil, true},
		{"any-with-x", m{"x-match": "any-with-x", "x-foo": "bar", "a": "b"}, m{"x-foo": "bar"}, true},
		{"any-with-x none", m{"x-match": "any-with-x", "x-foo": "bar"}, m{"x-foo": "baz"}, false},
		{"x- header data", m{"a": "x"}, m{"a": "x", "x-b": "y"}, true},
		{"timestamp header in ms", m{"t": int64(5000)}, m{"t": ts}, true},
		{"timestamp vs timestamp", m{"t": ts}, m{"t": ts}, false},
		{"array", m{"a": []any{int32(1), "s"}}, m{"a": []any{int32(1), "s"}}, true},
		{"array element types", m{"a": []any{int32(1)}}, m{"a": []any{int64(1)}}, false},
		{"table", m{"a": m{"k": int32(1)}}, m{"a": m{"k": int32(1)}}, true},
		{"table element types", m{"a": m{"k": int32(1)}}, m{"a": m{"k": int16(1)}}, false},
		{"named table", m{"a": namedTable{"k": "v"}}, m{"a": m{"k": "v"}}, true},
	}
	// All the bindings on one exchange, so that they share interned keys.
	h, _ := newRouter(ExchangeHeaders)
	bs := make([]*Binding, len(cases))
	for i, c := range cases {
		bs[i] = &Binding{q: &Queue{name: c.name, id: int32(i)}, hm: newHeadersMatcher(c.args)}
		h.add(bs[i])
	}
	ix := &Index{qIDs: idAlloc{next: int32(len(cases))}}
	check := func(odd bool) {
		t.Helper()
		var r routing
		for i, c := range cases {
			if odd && i%2 == 0 {
				continue
			}
			r.begin(ix, nil)
			h.route(&r, nil, c.headers)
			r.headers.release()
			if got := slices.Contains(r.dst, c.name); got != c.want {
				t.Errorf("%s: match(%v, %v) = %v, want %v", c.name, c.args, c.headers, got, c.want)
			}
		}
	}
	check(false)
	// Removing bindings frees their keys; the others still match.
	for i := 0; i < len(bs); i += 2 {
		h.remove(bs[i])
	}
	check(true)
	for i := 1; i < len(bs); i += 2 {
		h.remove(bs[i])
	}
	if hr := h.(*headersRouter); len(hr.keyIdx) != 0 || len(hr.free) != len(hr.keyRefs) {
		t.Fatalf("keys left after removing every binding: %v", hr.keyIdx)
	}
}
