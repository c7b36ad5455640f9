package rabbitconf

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every error Parse returns.
var ErrSyntax = errors.New("rabbitconf: malformed configuration")

// Entry is one key = value of a file.
type Entry struct {
	// Key is the key as written: its words joined by dots, a dot inside
	// a word still escaped (`loopback_users.john\.doe`). Segments splits
	// it.
	Key string
	// Value is the value with its quotes removed, or the unquoted text
	// without the whitespace around it.
	Value string
	// Line is the 1-based line the key is on.
	Line int
}

// Segments returns the key's words, an escaped dot inside a word
// unescaped: `loopback_users.john\.doe` is ["loopback_users", "john.doe"].
func (e Entry) Segments() []string {
	return splitKey(e.Key)
}

func splitKey(key string) []string {
	var segs []string
	var seg strings.Builder
	for i := 0; i < len(key); i++ {
		switch {
		case key[i] == '\\' && i+1 < len(key) && key[i+1] == '.':
			seg.WriteByte('.')
			i++
		case key[i] == '.':
			segs = append(segs, seg.String())
			seg.Reset()
		default:
			seg.WriteByte(key[i])
		}
	}
	return append(segs, seg.String())
}

// Error is a line Parse cannot read.
type Error struct {
	Name string // the name given to Parse, a file name
	Line int    // 1-based
	Text string // the line as written, without its line end; long lines are cut
	Msg  string // what is wrong
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s: %q", e.Name, e.Line, e.Msg, e.Text)
}

// Unwrap returns ErrSyntax.
func (e *Error) Unwrap() error { return ErrSyntax }

// maxErrText is how much of a line an Error quotes.
const maxErrText = 120

// A UTF-8 byte order mark at the start of a file is skipped; those of
// UTF-16 and UTF-32 are refused.
var (
	utf8BOM  = []byte{0xef, 0xbb, 0xbf}
	otherBOM = [][]byte{{0, 0, 0xfe, 0xff}, {0xff, 0xfe, 0, 0}, {0xfe, 0xff}, {0xff, 0xfe}}
)

// Parse reads a file in rabbitmq.conf syntax (see the package doc). name
// is what errors call the file. The entries are in the order their keys
// first appear, one per key. An error is an *Error for the first line
// that cannot be read.
func Parse(name string, data []byte) ([]Entry, error) {
	p := parser{name: name, b: bytes.TrimPrefix(data, utf8BOM), line: 1, noQuote: -1, noTriple: -1}
	for _, bom := range otherBOM {
		if bytes.HasPrefix(data, bom) {
			return nil, p.errorAt(0, "the file is UTF-16 or UTF-32; save it as UTF-8")
		}
	}
	var entries []Entry
	index := map[string]int{}
	for p.pos < len(p.b) {
		e, ok, err := p.readLine()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if i, dup := index[e.Key]; dup {
			entries[i].Value, entries[i].Line = e.Value, e.Line
			continue
		}
		index[e.Key] = len(entries)
		entries = append(entries, e)
	}
	return entries, nil
}

// parser reads b line by line; pos is at the start of line number line.
type parser struct {
	name string
	b    []byte
	pos  int
	line int
	// noQuote and noTriple, when not -1, are positions from which there
	// is no ' (no ''') left in b: a search from there fails without
	// looking, which keeps lines of unclosed quotes from making Parse
	// quadratic.
	noQuote, noTriple int
}

// readLine reads the line at p.pos and moves past it (and past the
// further lines a quoted value spans). ok reports a setting.
func (p *parser) readLine() (e Entry, ok bool, err error) {
	start := p.pos
	if e, end, ok := p.setting(start); ok {
		if !utf8.ValidString(e.Value) {
			return Entry{}, false, p.errorAt(start, "the value is not valid UTF-8")
		}
		if isFileValue(e.Value) {
			return Entry{}, false, p.errorAt(start, "values read from a file, $(<path), are not supported")
		}
		p.advance(end)
		return e, true, nil
	}
	if p.isInclude(start) {
		return Entry{}, false, p.errorAt(start, "include is not supported: Warren reads one file")
	}
	q := p.skipWS(start)
	if q < len(p.b) && p.b[q] == '#' {
		q = p.toLineEnd(q)
	}
	if !p.atLineEnd(q) {
		return Entry{}, false, p.errorAt(start, p.diagnose(start))
	}
	p.advance(q)
	return Entry{}, false, nil
}

// isFileValue reports a value cuttlefish would replace with the
// contents of a file: $(<path).
func isFileValue(v string) bool {
	return len(v) > len("$(<)") && strings.HasPrefix(v, "$(<") && strings.HasSuffix(v, ")")
}

// advance moves p.pos past the line end at or after end (end is at a
// line end or at the end of b), counting the lines passed.
func (p *parser) advance(end int) {
	if end < len(p.b) {
		if p.b[end] == '\r' {
			end++
		}
		end++ // '\n'
	}
	p.line += bytes.Count(p.b[p.pos:end], []byte{'\n'})
	p.pos = end
}

// setting reads `ws* key ws* "=" ws* value ws* comment?` at i, followed
// by a line end; end is that line end's position.
func (p *parser) setting(i int) (e Entry, end int, ok bool) {
	i = p.skipWS(i)
	keyStart := i
	i, ok = p.key(i)
	if !ok {
		return Entry{}, 0, false
	}
	key := string(p.b[keyStart:i])
	i = p.skipWS(i)
	if i >= len(p.b) || p.b[i] != '=' {
		return Entry{}, 0, false
	}
	i = p.skipWS(i + 1)
	value, i, ok := p.value(i)
	if !ok {
		return Entry{}, 0, false
	}
	i = p.skipWS(i)
	if i < len(p.b) && p.b[i] == '#' {
		i = p.toLineEnd(i)
	}
	if !p.atLineEnd(i) {
		return Entry{}, 0, false
	}
	return Entry{Key: key, Value: value, Line: p.line}, i, true
}

// key reads `word ("." word)*` at i.
func (p *parser) key(i int) (end int, ok bool) {
	i, ok = p.word(i)
	if !ok {
		return i, false
	}
	for i < len(p.b) && p.b[i] == '.' {
		j, ok := p.word(i + 1)
		if !ok {
			break // the "." is not part of the key
		}
		i = j
	}
	return i, true
}

// word reads `("\." | [A-Za-z0-9_-])+` at i.
func (p *parser) word(i int) (end int, ok bool) {
	start := i
	for i < len(p.b) {
		switch c := p.b[i]; {
		case c == '\\' && i+1 < len(p.b) && p.b[i+1] == '.':
			i += 2
		case isWordByte(c):
			i++
		default:
			return i, i > start
		}
	}
	return i, i > start
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// value reads a triple-quoted, single-quoted or unquoted value at i, in
// that order of preference.
func (p *parser) value(i int) (v string, end int, ok bool) {
	if bytes.HasPrefix(p.b[i:], []byte("'''")) {
		if j := p.find(i+3, "'''", &p.noTriple); j >= 0 {
			end = j + 3
			return trimHeredoc(string(p.b[i:end])), end, true
		}
	}
	if i < len(p.b) && p.b[i] == '\'' {
		if j := p.find(i+1, "'", &p.noQuote); j >= 0 {
			return string(p.b[i+1 : j]), j + 1, true
		}
	}
	// Unquoted: up to (not including) whitespace followed by a line end,
	// or a comment, or the end of b.
	j := i
	for j < len(p.b) {
		c := p.b[j]
		if c == ' ' || c == '\t' {
			k := p.skipWS(j)
			if k < len(p.b) && (p.b[k] == '#' || p.atCRLF(k)) {
				break
			}
			j = k
			continue
		}
		if c == '#' || p.atCRLF(j) {
			break
		}
		j++
	}
	if j == i {
		return "", i, false
	}
	return strings.TrimRight(string(p.b[i:j]), " \t"), j, true
}

// trimHeredoc removes the leading and the trailing run of "'", "\n"
// and "\r\n" from a triple-quoted value, delimiters included, as cuttlefish's
// string:trim(Node, both, [$', $\n, "\r\n"]) does.
func trimHeredoc(s string) string {
	for len(s) > 0 {
		if strings.HasPrefix(s, "\r\n") {
			s = s[2:]
		} else if s[0] == '\'' || s[0] == '\n' {
			s = s[1:]
		} else {
			break
		}
	}
	for len(s) > 0 {
		if strings.HasSuffix(s, "\r\n") {
			s = s[:len(s)-2]
		} else if c := s[len(s)-1]; c == '\'' || c == '\n' {
			s = s[:len(s)-1]
		} else {
			break
		}
	}
	return s
}

// find returns the position of the first sep at or after i, or -1.
// *none remembers a position from which there is none.
func (p *parser) find(i int, sep string, none *int) int {
	if *none >= 0 && i >= *none {
		return -1
	}
	j := bytes.Index(p.b[i:], []byte(sep))
	if j < 0 {
		*none = i
		return -1
	}
	return i + j
}

// isInclude reports an `include <path>` line at i, the one other kind of
// line cuttlefish accepts.
func (p *parser) isInclude(i int) bool {
	i = p.skipWS(i)
	if !bytes.HasPrefix(p.b[i:], []byte("include")) {
		return false
	}
	i += len("include")
	j := p.skipWS(i)
	if j == i {
		return false
	}
	i = j
	for i < len(p.b) && (isWordByte(p.b[i]) || p.b[i] == '.' || p.b[i] == '*' || p.b[i] == '/') {
		i++
	}
	if i == j {
		return false
	}
	i = p.skipWS(i)
	if i < len(p.b) && p.b[i] == '#' {
		i = p.toLineEnd(i)
	}
	return p.atLineEnd(i)
}

func (p *parser) skipWS(i int) int {
	for i < len(p.b) && (p.b[i] == ' ' || p.b[i] == '\t') {
		i++
	}
	return i
}

// toLineEnd returns the position of the line end at or after i, or
// len(b).
func (p *parser) toLineEnd(i int) int {
	j := bytes.IndexByte(p.b[i:], '\n')
	if j < 0 {
		return len(p.b)
	}
	j += i
	if j > i && p.b[j-1] == '\r' {
		j--
	}
	return j
}

// atCRLF reports a line end ("\n" or "\r\n") at i.
func (p *parser) atCRLF(i int) bool {
	return i < len(p.b) && (p.b[i] == '\n' || p.b[i] == '\r' && i+1 < len(p.b) && p.b[i+1] == '\n')
}

// atLineEnd reports a line end or the end of b at i.
func (p *parser) atLineEnd(i int) bool {
	return i == len(p.b) || p.atCRLF(i)
}

// diagnose says what is wrong with the line at i, which is neither a
// setting, a comment nor blank.
func (p *parser) diagnose(i int) string {
	i = p.skipWS(i)
	j, ok := p.key(i)
	if !ok {
		return "want key = value; a key is words of letters, digits, _ and - joined by dots"
	}
	j = p.skipWS(j)
	if j >= len(p.b) || p.b[j] != '=' {
		if p.atLineEnd(j) {
			return "want key = value"
		}
		return "want key = value; a key is words of letters, digits, _ and - joined by dots"
	}
	j = p.skipWS(j + 1)
	if p.atLineEnd(j) || p.b[j] == '#' {
		return "no value (write '' for an empty one)"
	}
	if bytes.HasPrefix(p.b[j:], []byte("'''")) && p.find(j+3, "'''", &p.noTriple) < 0 {
		return "no ''' closes the value"
	}
	return "only whitespace or a # comment may follow a quoted value (a value in single quotes ends at the next ', even lines later)"
}

// errorAt returns the Error for the line starting at i.
func (p *parser) errorAt(i int, msg string) *Error {
	end := p.toLineEnd(i)
	text := p.b[i:end]
	if len(text) > maxErrText {
		text = append(text[:maxErrText:maxErrText], "…"...)
	}
	return &Error{Name: p.name, Line: p.line, Text: string(text), Msg: msg}
}
