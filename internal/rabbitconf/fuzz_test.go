package rabbitconf

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// Crashers found by FuzzParse live in testdata/fuzz/FuzzParse/ and run
// as ordinary test cases with `go test`.

// FuzzParse checks that Parse never panics; that its errors are *Error
// values wrapping ErrSyntax on a line of the input; that what it accepts
// has one entry per well-formed key, on distinct lines of the input,
// with valid UTF-8 values; and that the entries written back out (each
// value plain or quoted as needed) parse to the same entries.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"listeners.tcp.default = 5672\n# comment\n\ndefault_user = alice # trailing\n",
		"a = b\r\nc = 'd # e'\r\n",
		"a = '''\n  x\n'y'\n'''\nb = c\n",
		"a = 'b\nc'\n",
		"a = 'b\nc = d\n",
		"loopback_users.john\\.doe = true\n",
		"a = b\na = c\n",
		"include conf.d/*.conf\n",
		"a = $(<f)\n",
		"\xef\xbb\xbfa = b",
		"a =\n",
		"a = ''''''\n",
		"a = b  \t",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse("f.conf", data)
		lines := bytes.Count(data, []byte{'\n'}) + 1
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v is not an *Error wrapping ErrSyntax", err)
			}
			if e.Line < 1 || e.Line > lines || e.Name != "f.conf" {
				t.Fatalf("error at %s:%d of %d lines", e.Name, e.Line, lines)
			}
			return
		}
		seenKey, seenLine := map[string]bool{}, map[int]bool{}
		for _, e := range entries {
			if !wellFormedKey(e.Key) || seenKey[e.Key] {
				t.Fatalf("key %q malformed or repeated", e.Key)
			}
			if e.Line < 1 || e.Line > lines || seenLine[e.Line] {
				t.Fatalf("entry %q at line %d of %d, or a line twice", e.Key, e.Line, lines)
			}
			if !utf8.ValidString(e.Value) {
				t.Fatalf("value %q of %q is not UTF-8", e.Value, e.Key)
			}
			seenKey[e.Key], seenLine[e.Line] = true, true
		}
		out, kept := format(entries)
		again, err := Parse("again.conf", out)
		if err != nil {
			t.Fatalf("%q written out does not parse: %v", out, err)
		}
		if got, want := keyValues(again), keyValues(kept); !equalKV(got, want) {
			t.Fatalf("%q written out parses to %q, want %q", out, got, want)
		}
	})
}

func equalKV(a, b []kv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// wellFormedKey reports a key of the grammar: words of word bytes and
// escaped dots, joined by dots.
func wellFormedKey(key string) bool {
	for _, w := range strings.Split(strings.ReplaceAll(key, `\.`, "_"), ".") {
		if w == "" {
			return false
		}
		for i := 0; i < len(w); i++ {
			if !isWordByte(w[i]) {
				return false
			}
		}
	}
	return true
}

// format writes entries back out, one per line, and returns the ones it
// could write: each value unquoted, in single quotes or in triple
// quotes, whichever reads back the same.
func format(entries []Entry) ([]byte, []Entry) {
	var b []byte
	var kept []Entry
	for _, e := range entries {
		v, ok := quote(e.Value)
		if !ok {
			continue
		}
		b = append(b, e.Key+" = "+v+"\n"...)
		kept = append(kept, e)
	}
	return b, kept
}

func quote(v string) (string, bool) {
	switch {
	case v != "" && !strings.ContainsAny(v, "#\n\r") && !strings.ContainsAny(v[:1], " \t'") &&
		!strings.ContainsAny(v[len(v)-1:], " \t") && !isFileValue(v):
		return v, true
	case !strings.Contains(v, "'"):
		return "'" + v + "'", true
	case !strings.Contains(v, "'''") && trimHeredoc("'''"+v+"'''") == v:
		return "'''" + v + "'''", true
	}
	return "", false
}
