package rabbitconf

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// kv is an entry without its line, for tables.
type kv struct{ key, value string }

func keyValues(entries []Entry) []kv {
	var out []kv
	for _, e := range entries {
		out = append(out, kv{e.Key, e.Value})
	}
	return out
}

// Ensure each form of line and value reads as cuttlefish reads it (the
// here-document cases are cuttlefish's own test files, multiline_*.conf).
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []kv
	}{
		{"empty", "", nil},
		{"blank and comments", "\n  \n\t\t\n# c\n   # indented\n#\n", nil},
		{"one", "a = b", []kv{{"a", "b"}}},
		{"no spaces", "a=b\n", []kv{{"a", "b"}}},
		{"dotted key", "listeners.tcp.default = 5672\n", []kv{{"listeners.tcp.default", "5672"}}},
		{"word bytes", "a_B-9.x = y\n", []kv{{"a_B-9.x", "y"}}},
		{"escaped dot", `loopback_users.john\.doe = true`, []kv{{`loopback_users.john\.doe`, "true"}}},
		{"indented", "  \t a = b \t \n", []kv{{"a", "b"}}},
		{"crlf", "a = b\r\nc = d\r\n", []kv{{"a", "b"}, {"c", "d"}}},
		{"lone cr is a character", "a = b\rc\n", []kv{{"a", "b\rc"}}},
		{"inner spaces kept", "a = x  y\tz  \n", []kv{{"a", "x  y\tz"}}},
		{"trailing comment", "a = b # c\n", []kv{{"a", "b"}}},
		{"hash ends a value", "default_pass = ab#cd\n", []kv{{"default_pass", "ab"}}},
		{"trailing blanks at eof", "a = b  \t", []kv{{"a", "b"}}},
		{"value with =", "a = b=c\n", []kv{{"a", "b=c"}}},
		{"double quotes kept", `a = "b c"`, []kv{{"a", `"b c"`}}},
		{"single quotes", "a = 'b # c' # d\n", []kv{{"a", "b # c"}}},
		{"empty quoted", "a = ''\n", []kv{{"a", ""}}},
		{"quoted spaces kept", "a = '  b  '\n", []kv{{"a", "  b  "}}},
		{"quoted across lines", "a = 'b\nc'\nd = e\n", []kv{{"a", "b\nc"}, {"d", "e"}}},
		{"unclosed quote is a character", "a = 'b\nc = d\n", []kv{{"a", "'b"}, {"c", "d"}}},
		{"quote inside unquoted", "a = b'c\n", []kv{{"a", "b'c"}}},
		{"heredoc", "a = '''\n    l0\n    l1\n    l2\n'''\n", []kv{{"a", "    l0\n    l1\n    l2"}}},
		{"heredoc empty", "a = '''\n'''\n", []kv{{"a", ""}}},
		{"heredoc six quotes", "a = ''''''\n", []kv{{"a", ""}}},
		{"heredoc same line", "a = '''value'''", []kv{{"a", "value"}}},
		{"heredoc whitespace only", "a = '''\n  \t\n\r  \n'''\n", []kv{{"a", "  \t\n\r  "}}},
		{"heredoc trailing comment", "a = '''\nvalue\n''' # this is a comment\n", []kv{{"a", "value"}}},
		{"heredoc special", "a = '''\nkey = value\n# comment\n'quoted' = \"double\"\n'''\n", []kv{{"a", "key = value\n# comment\n'quoted' = \"double\""}}},
		{"heredoc crlf", "a = '''\r\nx\r\n'''\r\n", []kv{{"a", "x"}}},
		{"heredoc quotes by delimiter trimmed", "a = '''\n'x'\n'''\n", []kv{{"a", "x"}}},
		{"heredoc include lines", "a = '''\ninclude other.conf\ninclude *.conf\n'''\n", []kv{{"a", "include other.conf\ninclude *.conf"}}},
		{"heredoc mixed", "a = '''\n    l0\nl1\n    l2\n'''\n\nregular = value\n\nanother = simple\n",
			[]kv{{"a", "    l0\nl1\n    l2"}, {"regular", "value"}, {"another", "simple"}}},
		{"unicode", "greeting = Hello 世界! 🌍\n", []kv{{"greeting", "Hello 世界! 🌍"}}},
		{"bom", "\xef\xbb\xbffoo = bar\n", []kv{{"foo", "bar"}}},
		{"key include is a key", "include = x\n", []kv{{"include", "x"}}},
		{"last wins, first place kept", "a.b.c = 1\na.b.c = 2\na.b.d = 1\na.b.c = 3\n", []kv{{"a.b.c", "3"}, {"a.b.d", "1"}}},
		{"escaped dot is another key", "a\\.b = 1\na.b = 2\n", []kv{{`a\.b`, "1"}, {"a.b", "2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("test.conf", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if g := keyValues(got); !reflect.DeepEqual(g, tc.want) {
				t.Fatalf("got %q, want %q", g, tc.want)
			}
		})
	}
}

// Ensure entries carry the line of their key, later lines counted past
// values that span lines, and a duplicate the line of the value kept.
func TestParseLines(t *testing.T) {
	in := "# header\n\na = 1\nb = '''\nx\ny\n'''\nc = 'p\nq'\r\nd = 4\na = 5\n"
	got, err := Parse("test.conf", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"a", "5", 11}, {"b", "x\ny", 4}, {"c", "p\nq", 8}, {"d", "4", 10}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// Ensure a line that cannot be read is an *Error naming the file, the
// line, its text and what is wrong, and wraps ErrSyntax.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		line     int
		text     string
		msg      string
	}{
		{"no equals", "a = 1\nfoo\n", 2, "foo", "want key = value"},
		{"space in key", "a b = c\n", 1, "a b = c", "a key is words"},
		{"bad key byte", "a/b = c\n", 1, "a/b = c", "a key is words"},
		{"no key", "= c\n", 1, "= c", "a key is words"},
		{"trailing dot", "a. = b\n", 1, "a. = b", "a key is words"},
		{"no value", "\n\na =\n", 3, "a =", "no value"},
		{"no value before comment", "a = # x\n", 1, "a = # x", "no value"},
		{"text after quote", "a = 'x' y\n", 1, "a = 'x' y", "may follow a quoted value"},
		{"quote closed lines later", "a = 'x\n# it's\n", 1, "a = 'x", "may follow a quoted value"},
		{"heredoc unclosed", "a = '''unclosed\n", 1, "a = '''unclosed", "no ''' closes"},
		{"heredoc embedded delimiter", "a = '''foo\nbar ''' baz\nbat\n'''\n", 1, "a = '''foo", "may follow a quoted value"},
		{"include", "\ninclude conf.d/*.conf\n", 2, "include conf.d/*.conf", "include is not supported"},
		{"file value", "default_pass = $(<secret.txt)\n", 1, "default_pass = $(<secret.txt)", "read from a file"},
		{"invalid utf-8", "a = \xff\n", 1, "a = \xff", "not valid UTF-8"},
		{"utf-16", "\xff\xfea\x00", 1, "\xff\xfea\x00", "UTF-16"},
		{"long line cut", "x" + strings.Repeat("y", 200) + "\n", 1, "x" + strings.Repeat("y", maxErrText-1) + "…", "want key = value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("w.conf", []byte(tc.in))
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("got %v, want an *Error wrapping ErrSyntax", err)
			}
			if e.Name != "w.conf" || e.Line != tc.line || e.Text != tc.text || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("got %s:%d %q %q, want w.conf:%d %q and a message with %q", e.Name, e.Line, e.Text, e.Msg, tc.line, tc.text, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("w.conf:%d: ", tc.line)) {
				t.Fatalf("error %q does not start with file:line", err)
			}
		})
	}
}

// Ensure Segments splits at dots that are not escaped.
func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{"a", []string{"a"}},
		{"a.b.c", []string{"a", "b", "c"}},
		{`loopback_users.john\.doe`, []string{"loopback_users", "john.doe"}},
		{`a\.\.b.c`, []string{"a..b", "c"}},
	} {
		if got := (Entry{Key: tc.key}).Segments(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Segments(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
