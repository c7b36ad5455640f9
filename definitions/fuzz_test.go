package definitions

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// FuzzParse checks that Parse never panics, refuses only with an
// *InvalidError, and that what it accepts marshals and parses back to
// the same document.
func FuzzParse(f *testing.F) {
	for _, path := range []string{fixtureHTTP, fixtureCtl} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		good, "", "\xef\xbb\xbf{}", `{"queues": [{"name": "q", "arguments": {"a": [1, 2.5, {"b": "c"}], "d": -0.0, "e": 1e300}}]}`,
		`{"users": [{"name": "u", "tags": "a,b", "limits": [["max-connections", 3]]}]}`, `{"queues": [`, `[]`, `{"x": 1} 2`,
		`{"policies": [{"name": "p", "definition": {"max-length": 1.0}, "priority": 3}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %v (%T) is not ErrInvalid", err, err)
			}
			return
		}
		once, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal an accepted document: %v", err)
		}
		d2, err := Parse(once)
		if err != nil {
			t.Fatalf("parse the marshalled document %s: %v", once, err)
		}
		twice, err := json.Marshal(d2)
		if err != nil {
			t.Fatal(err)
		}
		if string(once) != string(twice) {
			t.Fatalf("parse, marshal, parse, marshal differs:\n%s\n%s", once, twice)
		}
	})
}
