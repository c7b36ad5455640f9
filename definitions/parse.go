package definitions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads a definitions document. It is as lenient as RabbitMQ where
// RabbitMQ's own exports differ (tags and limits of either form, the 4.x
// metadata fields, keys it does not know, which it ignores) and strict
// about types: a value of the wrong JSON type, a list that is not an
// array of objects, null in arguments, or a document that is not one
// JSON object is refused with an *InvalidError (errors.Is ErrInvalid)
// naming each place, as "queues[3] "orders": durable: a string where a
// boolean was expected". An empty document is an empty Definitions, as in
// RabbitMQ. Parse checks the form only; Import checks the content.
func Parse(data []byte) (*Definitions, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 BOM, as rabbit_misc:strip_bom
	if len(bytes.TrimSpace(data)) == 0 {
		return &Definitions{}, nil
	}
	if !utf8.Valid(data) {
		return nil, &InvalidError{Reasons: []string{"the document is not UTF-8"}}
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil {
		return nil, &InvalidError{Reasons: []string{"not a JSON object: " + describeError(err, data)}}
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return nil, &InvalidError{Reasons: []string{fmt.Sprintf("not one JSON object: more follows at byte %d", len(data)-len(rest))}}
	}
	if top == nil {
		return nil, &InvalidError{Reasons: []string{"not a JSON object: null"}}
	}
	p := &parser{top: top}
	d := &Definitions{}
	p.scalar("rabbit_version", &d.RabbitVersion)
	p.scalar("rabbitmq_version", &d.RabbitMQVersion)
	p.scalar("product_name", &d.ProductName)
	p.scalar("product_version", &d.ProductVersion)
	p.scalar("rabbitmq_definition_format", &d.DefinitionFormat)
	p.scalar("original_cluster_name", &d.OriginalClusterName)
	p.scalar("original_vhost_name", &d.OriginalVHostName)
	p.scalar("explanation", &d.Explanation)
	p.scalar("metadata", &d.Metadata)
	p.scalar("description", &d.Description)
	p.scalar("default_queue_type", &d.DefaultQueueType)
	p.scalar("limits", &d.Limits)
	d.Users = parseList(p, "users", func() User { return User{} })
	d.VHosts = parseList(p, "vhosts", func() VHost { return VHost{} })
	d.Permissions = parseList(p, "permissions", func() Permission { return Permission{} })
	d.TopicPermissions = parseList(p, "topic_permissions", func() TopicPermission { return TopicPermission{} })
	d.Parameters = parseList(p, "parameters", func() Parameter { return Parameter{} })
	d.GlobalParameters = parseList(p, "global_parameters", func() GlobalParameter { return GlobalParameter{} })
	d.Policies = parseList(p, "policies", func() Policy { return Policy{} })
	d.Queues = parseList(p, "queues", func() Queue { return Queue{Durable: true} })
	d.Exchanges = parseList(p, "exchanges", func() Exchange { return Exchange{Durable: true} })
	d.Bindings = parseList(p, "bindings", func() Binding { return Binding{} })
	if err := p.reasons.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// parser is one Parse: the top-level object and the reasons found.
type parser struct {
	top     map[string]json.RawMessage
	reasons reasons
}

// scalar decodes the top-level key into v, if present and not null.
func (p *parser) scalar(key string, v any) {
	raw, ok := p.top[key]
	if !ok || string(raw) == "null" {
		return
	}
	if err := json.Unmarshal(raw, v); err != nil {
		p.reasons.add("%s: %s", key, describeError(err, raw))
	}
}

// parseList decodes the array under key, each element into a value that
// fresh returns (with its defaults). null or an absent key is nil.
func parseList[T any](p *parser, key string, fresh func() T) []T {
	raw, ok := p.top[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		p.reasons.add("%s: %s where an array was expected", key, jsonKind(raw))
		return nil
	}
	out := make([]T, 0, len(elems))
	for i, e := range elems {
		v := fresh()
		if err := json.Unmarshal(e, &v); err != nil {
			p.reasons.add("%s[%d]%s: %s", key, i, labelOf(e), describeError(err, e))
			continue
		}
		out = append(out, v)
	}
	return out
}

// labelOf returns ` "name"` for an element with a name (or user, or
// source), to name it in reasons.
func labelOf(raw json.RawMessage) string {
	var id struct {
		Name   any `json:"name"`
		User   any `json:"user"`
		Source any `json:"source"`
	}
	if json.Unmarshal(raw, &id) != nil {
		return ""
	}
	for _, v := range []any{id.Name, id.User, id.Source} {
		if s, ok := v.(string); ok {
			return " " + strconv.Quote(s)
		}
	}
	return ""
}

// describeError turns an error of json.Unmarshal into a reason.
func describeError(err error, raw []byte) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := kindName(te.Type)
		got := "a " + te.Value
		switch {
		case te.Value == "object" || te.Value == "array":
			got = "an " + te.Value
		case strings.HasPrefix(te.Value, "number "):
			got = "the number " + strings.TrimPrefix(te.Value, "number ")
		}
		if te.Field == "" {
			return fmt.Sprintf("%s where %s was expected", got, want)
		}
		return fmt.Sprintf("%s: %s where %s was expected", te.Field, got, want)
	}
	return describeJSONError(err, raw)
}

// describeJSONError turns a syntax error into a reason with its offset.
func describeJSONError(err error, raw []byte) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Sprintf("invalid JSON: it ends after %d bytes", len(raw))
	}
	return err.Error()
}

// kindName names the JSON kind a Go type takes.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return t.String()
}
