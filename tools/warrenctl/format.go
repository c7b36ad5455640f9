package main

import (
	"bytes"
	"fmt"
	"strings"
)

// column is one column a list verb can print. get picks the value out of a
// row of the HTTP response (nil: the member called name); text renders it
// for the table formatter (nil: tableText).
type column struct {
	name string
	get  func(row jv) jv
	text func(v jv) string
}

// field is a column that is a member of the row with the same name.
func field(name string) column { return column{name: name} }

// fieldAt is a column read from another member or a nested one
// ("queue.name").
func fieldAt(name, path string) column {
	return column{name: name, get: func(row jv) jv { return row.path(path) }}
}

// constant is a column with the same value in every row.
func constant(name, value string) column {
	v := jstring(value)
	return column{name: name, get: func(jv) jv { return v }}
}

// value returns the column's value in row.
func (c column) value(row jv) jv {
	if c.get != nil {
		return c.get(row)
	}
	return row.get(c.name)
}

// tableText renders a value for the table formatter the way rabbitmqctl
// 3.10 prints the corresponding Erlang term, as far as JSON allows:
//
//	string, number, bool   as is: ctl-q1, 3, 0.5, true
//	null, missing          empty
//	array                  [monitoring, management]
//	object                 [{"x-queue-type","quorum"},{"x-max-length",1000}]
//
// Objects are AMQP tables (arguments, client_properties), which rabbitmqctl
// prints as a list of {"key",value} tuples; nested strings are quoted there.
func tableText(v jv) string {
	switch v.kind {
	case kMissing, kNull:
		return ""
	case kArray:
		parts := make([]string, len(v.vals))
		for i, e := range v.vals {
			if e.kind == kString || e.kind == kNumber || e.kind == kBool {
				parts[i] = e.s
			} else {
				parts[i] = termText(e)
			}
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case kObject:
		return termText(v)
	}
	return v.s
}

// termText renders a value nested in a table: strings in double quotes,
// null as undefined, arrays and objects without spaces.
func termText(v jv) string {
	switch v.kind {
	case kMissing, kNull:
		return "undefined"
	case kString:
		return `"` + v.s + `"`
	case kArray:
		parts := make([]string, len(v.vals))
		for i, e := range v.vals {
			parts[i] = termText(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case kObject:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = `{"` + k + `",` + termText(v.vals[i]) + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return v.s
}

// jsonText renders a value as compact JSON: a policy definition prints as
// {"max-length":500}, as rabbitmqctl prints it.
func jsonText(v jv) string {
	if v.kind == kMissing {
		return ""
	}
	return string(v.compact())
}

// proplistText renders an object of atoms, like a vhost's cluster_state,
// as rabbitmqctl does: [{rabbit@host, running}].
func proplistText(v jv) string {
	if v.kind != kObject {
		return tableText(v)
	}
	parts := make([]string, len(v.keys))
	for i, k := range v.keys {
		parts[i] = "{" + k + ", " + tableText(v.vals[i]) + "}"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// listing is the result of a list verb, ready to print.
type listing struct {
	cols []column
	rows []jv
	// blankWhenEmpty: an empty result prints one blank line (table) or []
	// (json), as rabbitmqctl's list_permissions, list_user_permissions and
	// list_policies do; the other list verbs print nothing (table) or
	// "[\n]" (json).
	blankWhenEmpty bool
}

// printListing writes a listing with the table or json formatter.
func (c *cmd) printListing(l listing) {
	if c.json {
		c.printJSONRows(l)
		return
	}
	if len(l.rows) == 0 {
		if l.blankWhenEmpty {
			fmt.Fprintln(c.out)
		}
		return
	}
	if !c.silent && !c.noHeaders {
		names := make([]string, len(l.cols))
		for i, col := range l.cols {
			names[i] = col.name
		}
		fmt.Fprintln(c.out, strings.Join(names, "\t"))
	}
	cells := make([]string, len(l.cols))
	for _, row := range l.rows {
		for i, col := range l.cols {
			text := col.text
			if text == nil {
				text = tableText
			}
			cells[i] = text(col.value(row))
		}
		fmt.Fprintln(c.out, strings.Join(cells, "\t"))
	}
}

// printJSONRows writes rows as rabbitmqctl's json formatter does: one object
// per line, the separating comma leading the next line. Values are the
// HTTP API's JSON, not rabbitmqctl's typed Erlang terms.
func (c *cmd) printJSONRows(l listing) {
	if len(l.rows) == 0 {
		if l.blankWhenEmpty {
			fmt.Fprintln(c.out, "[]")
		} else {
			fmt.Fprint(c.out, "[\n]\n")
		}
		return
	}
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, row := range l.rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		for j, col := range l.cols {
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(jstring(col.name).raw)
			b.WriteByte(':')
			b.Write(col.value(row).compact())
		}
		b.WriteString("}\n")
	}
	b.WriteString("]\n")
	c.out.Write(b.Bytes())
}

// pickColumns returns the columns args name, or the defaults when args is
// empty. Names may also be comma-separated (name,messages), as rabbitmqctl
// allows.
func pickColumns(all []column, args []string, defaults ...string) ([]column, error) {
	if len(args) == 0 {
		args = defaults
	}
	var (
		cols []column
		bad  []string
	)
	for _, a := range args {
		for _, name := range strings.Split(a, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			found := false
			for _, col := range all {
				if col.name == name {
					cols = append(cols, col)
					found = true
					break
				}
			}
			if !found {
				bad = append(bad, name)
			}
		}
	}
	if len(bad) > 0 {
		return nil, usagef("Info key(s) %s are not supported", strings.Join(bad, ","))
	}
	return cols, nil
}
