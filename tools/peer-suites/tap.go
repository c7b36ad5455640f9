package main

import (
	"regexp"
	"strings"
)

// tapParser reads the TAP that Node's test runner writes (node --test
// --test-reporter=tap): nested subtests, four spaces a level, each
// announced by "# Subtest: <name>" and ended by "ok N - <name>" or "not
// ok N - <name>" with a YAML block. Leaves are the tests; a suite or file
// that fails by itself (a timeout, an uncaught exception outside its
// tests) counts as a failed test too, as the tests it cut short never
// report.
type tapParser struct {
	path     []string // names of the open subtests, by level
	children []bool   // whether the subtest at each level had subtests
	rs       []result
	pending  *result // a failed non-leaf, until its failureType is read
}

var (
	tapSubtest = regexp.MustCompile(`^((?:    )*)# Subtest: (.*)$`)
	tapResult  = regexp.MustCompile(`^((?:    )*)(ok|not ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$`)
	tapFailure = regexp.MustCompile(`^\s*failureType: '(\w+)'`)
)

func (p *tapParser) line(l string) {
	if m := tapSubtest.FindStringSubmatch(l); m != nil {
		p.flush()
		lv := len(m[1]) / 4
		p.path = append(p.path[:min(lv, len(p.path))], m[2])
		p.children = append(p.children[:min(lv, len(p.children))], false)
		if lv > 0 && lv-1 < len(p.children) {
			p.children[lv-1] = true
		}
		return
	}
	if m := tapResult.FindStringSubmatch(l); m != nil {
		p.flush()
		lv := len(m[1]) / 4
		name := strings.Join(append(append([]string(nil), p.path[:min(lv, len(p.path))]...), m[3]), " ")
		leaf := lv >= len(p.children) || !p.children[lv]
		state := "passed"
		switch {
		case m[4] != "":
			state = "skipped"
		case m[2] == "not ok":
			state = "failed"
		}
		if leaf {
			p.rs = append(p.rs, result{name: name, state: state})
		} else if state == "failed" {
			p.pending = &result{name: name, state: state}
		}
		return
	}
	if p.pending != nil {
		if m := tapFailure.FindStringSubmatch(l); m != nil {
			if m[1] != "subtestsFailed" {
				p.pending.name += ": " + m[1]
				p.rs = append(p.rs, *p.pending)
			}
			p.pending = nil
		}
	}
}

// flush drops a pending non-leaf failure whose type never came.
func (p *tapParser) flush() { p.pending = nil }

func (p *tapParser) results() []result {
	p.flush()
	return p.rs
}

// mochaTAP reads the TAP that mocha's tap reporter writes (mocha
// --reporter tap), and mocha-tap.js, which the harness runs instead: one
// flat line per test, "ok N <full title>" (with "#
// SKIP -" for a pending test) or "not ok N <full title>" followed by the
// error indented by two spaces. The full title is the describe blocks'
// titles and the test's, space-separated (mocha's reporter removes every
// '#' from it, mocha-tap.js does not). A
// failed hook ("<suite> \"before each\" hook for \"<test>\"") is a failed
// test too, as the tests it cut short never report. A test reported twice
// (mocha reports a failure after a pass when, say, done is called twice)
// keeps its worse outcome.
type mochaTAP struct {
	rs  []result
	idx map[string]int // index in rs by name
}

var mochaResult = regexp.MustCompile(`^(ok|not ok) \d+ (.*?)( # SKIP -)?$`)

func (p *mochaTAP) line(l string) {
	m := mochaResult.FindStringSubmatch(l)
	if m == nil {
		return
	}
	r := result{name: m[2], state: "passed"}
	switch {
	case m[1] == "not ok":
		r.state = "failed"
	case m[3] != "":
		r.state = "skipped"
	}
	if i, ok := p.idx[r.name]; ok {
		if r.state == "failed" {
			p.rs[i].state = "failed"
		}
		return
	}
	if p.idx == nil {
		p.idx = map[string]int{}
	}
	p.idx[r.name] = len(p.rs)
	p.rs = append(p.rs, r)
}

func (p *mochaTAP) results() []result { return p.rs }
