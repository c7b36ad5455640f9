package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// jkind is the type of a JSON value; kMissing is a value that was not there
// (an absent object member), which prints like null.
type jkind uint8

const (
	kMissing jkind = iota
	kNull
	kBool
	kNumber
	kString
	kArray
	kObject
)

// jv is a decoded JSON value that keeps what encoding/json into `any` loses:
// the order of object members and the text of numbers. Columns print values
// as the server sent them (a policy definition keeps its key order, 1.0
// stays 1.0), and the json formatter copies raw.
type jv struct {
	kind jkind
	s    string   // kString: the decoded string; kNumber, kBool: the literal
	keys []string // kObject: member names, in document order
	vals []jv     // kObject: member values; kArray: elements
	raw  []byte   // the value's JSON text as received (nil for kMissing)
}

// errNotJSON reports a response body or input that is not valid JSON.
var errNotJSON = errors.New("warrenctl: not valid JSON")

// parseJSON decodes one JSON document.
func parseJSON(data []byte) (jv, error) {
	if !json.Valid(data) {
		return jv{}, errNotJSON
	}
	p := jparser{b: data}
	return p.value(), nil
}

// jstring returns a string value as if it came from the server.
func jstring(s string) jv {
	raw, _ := json.Marshal(s) // a string always marshals
	return jv{kind: kString, s: s, raw: raw}
}

// jparser walks a document that json.Valid has accepted, so it does not
// check syntax again.
type jparser struct {
	b []byte
	i int
}

func (p *jparser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jparser) value() jv {
	p.ws()
	start := p.i
	var v jv
	switch c := p.b[p.i]; c {
	case '{':
		v.kind = kObject
		p.i++
		p.ws()
		for p.b[p.i] != '}' {
			k := p.value()
			p.ws()
			p.i++ // ':'
			v.keys = append(v.keys, k.s)
			v.vals = append(v.vals, p.value())
			p.ws()
			if p.b[p.i] == ',' {
				p.i++
				p.ws()
			}
		}
		p.i++
	case '[':
		v.kind = kArray
		p.i++
		p.ws()
		for p.b[p.i] != ']' {
			v.vals = append(v.vals, p.value())
			p.ws()
			if p.b[p.i] == ',' {
				p.i++
				p.ws()
			}
		}
		p.i++
	case '"':
		p.i++
		for p.b[p.i] != '"' {
			if p.b[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		p.i++
		v.kind = kString
		_ = json.Unmarshal(p.b[start:p.i], &v.s) // valid by json.Valid
	case 't':
		p.i += len("true")
		v.kind, v.s = kBool, "true"
	case 'f':
		p.i += len("false")
		v.kind, v.s = kBool, "false"
	case 'n':
		p.i += len("null")
		v.kind = kNull
	default:
		for p.i < len(p.b) && strings.IndexByte("+-0123456789.eE", p.b[p.i]) >= 0 {
			p.i++
		}
		v.kind = kNumber
		v.s = string(p.b[start:p.i])
	}
	v.raw = p.b[start:p.i]
	return v
}

// get returns member k of an object, or a missing value.
func (v jv) get(k string) jv {
	for i, key := range v.keys {
		if key == k {
			return v.vals[i]
		}
	}
	return jv{}
}

// path follows dot-separated member names ("queue.name").
func (v jv) path(p string) jv {
	for _, k := range strings.Split(p, ".") {
		v = v.get(k)
	}
	return v
}

// str returns a string or a number/bool literal; "" for anything else.
func (v jv) str() string {
	switch v.kind {
	case kString, kNumber, kBool:
		return v.s
	}
	return ""
}

// compact returns the value's JSON text without insignificant whitespace;
// null for a missing value.
func (v jv) compact() []byte {
	if v.kind == kMissing {
		return []byte("null")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v.raw); err != nil {
		return v.raw // cannot happen: raw passed json.Valid
	}
	return b.Bytes()
}
