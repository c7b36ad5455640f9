package testutil

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// HexBytes builds bytes from annotated lines: hex octets separated by
// spaces, 'ascii' tokens (no spaces) for text, and '#' comments.
//
//	HexBytes(t, `
//		01 0001 0000000d  # method frame, channel 1, size 13
//		'ex'              # exchange
//	`)
func HexBytes(t testing.TB, src string) []byte {
	t.Helper()
	var out []byte
	for line := range strings.SplitSeq(src, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, tok := range strings.Fields(line) {
			if len(tok) >= 2 && tok[0] == '\'' && tok[len(tok)-1] == '\'' {
				out = append(out, tok[1:len(tok)-1]...)
				continue
			}
			b, err := hex.DecodeString(tok)
			if err != nil {
				t.Fatalf("HexBytes: bad token %q: %v", tok, err)
			}
			out = append(out, b...)
		}
	}
	return out
}

// AssertBytes fails the test, with both dumped as hex, unless got is
// want.
func AssertBytes(t testing.TB, got, want []byte) {
	t.Helper()
	if string(got) != string(want) {
		t.Fatalf("bytes differ\ngot:%s\nwant:%s", dump(got), dump(want))
	}
}

// dump formats bytes as hex in groups of 16 for failure messages.
func dump(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 16 {
		fmt.Fprintf(&sb, "\n\t%04x  % x", i, b[i:min(i+16, len(b))])
	}
	return sb.String()
}
