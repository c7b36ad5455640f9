package queues

import "testing"

// Ensure Erlang terms in reply texts print as ~tp prints them.
func TestTermText(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{"abc", `<<"abc">>`},
		{`a"b\c`, `<<"a\"b\\c">>`},
		{"héllo", `<<"héllo"/utf8>>`},
		{[]byte{1, 200}, `<<1,200>>`},
		{int64(-3), "-3"},
		{1.5, "1.5"},
		{100.0, "100.0"},
		{1e20, "1.0e20"},
		{1e-7, "1.0e-7"},
		{[]any{int32(1), "a"}, `[{signedint,1},{longstr,<<"a">>}]`},
		{map[string]any{"k": true}, `[{<<"k">>,bool,true}]`},
	}
	for _, c := range cases {
		if got := termText(c.v); got != c.want {
			t.Errorf("termText(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
	for atom, want := range map[string]string{"direct": "direct", "x-consistent-hash": "'x-consistent-hash'", "Foo": "'Foo'"} {
		if got := termAtom(atom); got != want {
			t.Errorf("termAtom(%q) = %s, want %s", atom, got, want)
		}
	}
}
