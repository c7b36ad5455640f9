package main

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Virtual hosts and policies:
//
//	add_vhost      PUT /api/vhosts/{vhost}
//	delete_vhost   DELETE /api/vhosts/{vhost}
//	list_vhosts    GET /api/vhosts
//	set_policy     PUT /api/policies/{vhost}/{name}
//	clear_policy   DELETE /api/policies/{vhost}/{name}
//	list_policies  GET /api/policies/{vhost}

var vhostVerbs = []*verb{
	{
		name:    "add_vhost",
		usage:   `<vhost> [--description <description> --tags "<tag1>,<tag2>,<...>" --default-queue-type <quorum|classic|stream>]`,
		summary: "Creates a virtual host",
		min:     1, max: 1,
		opts: []opt{
			{name: "description", value: true},
			{name: "tags", value: true},
			{name: "default-queue-type", value: true},
		},
		run: runAddVhost,
	},
	{
		name: "delete_vhost", usage: "<vhost>", min: 1, max: 1,
		summary: "Deletes a virtual host and everything in it",
		run:     runDeleteVhost,
	},
	{
		name: "list_vhosts", usage: "[<column> ...]", min: 0, max: -1,
		summary: "Lists virtual hosts",
		columns: vhostColumns,
		run:     runListVhosts,
	},
	{
		name:    "set_policy",
		usage:   "[--vhost <vhost>] [--priority <priority>] [--apply-to <apply-to>] <name> <pattern> <definition>",
		summary: "Sets or updates a policy; <definition> is a JSON object, --apply-to one of queues, exchanges, all (default), classic_queues, quorum_queues, streams",
		min:     3, max: 3,
		opts: []opt{
			{name: "priority", value: true},
			{name: "apply-to", value: true},
		},
		run: runSetPolicy,
	},
	{
		name: "clear_policy", usage: "[--vhost <vhost>] <name>", min: 1, max: 1,
		summary: "Clears (removes) a policy",
		run:     runClearPolicy,
	},
	{
		name: "list_policies", usage: "[--vhost <vhost>]", min: 0, max: 0,
		summary: "Lists the policies in a virtual host",
		run:     runListPolicies,
	},
}

func vhostMissing(err error, vhost string) error {
	return notFound(err, exitDataErr, `Virtual host "%s" does not exist`, vhost)
}

// vhostBody is PUT /api/vhosts/{vhost}; tags are comma-separated.
type vhostBody struct {
	Description      *string `json:"description,omitempty"`
	Tags             *string `json:"tags,omitempty"`
	DefaultQueueType *string `json:"default_queue_type,omitempty"`
}

func runAddVhost(c *cmd) error {
	vhost := c.args[0]
	var body vhostBody
	if v, ok := c.opts["description"]; ok {
		body.Description = &v
	}
	if v, ok := c.opts["tags"]; ok {
		body.Tags = &v
	}
	if v, ok := c.opts["default-queue-type"]; ok {
		// RabbitMQ 3.10 stores any string here; rabbitmqctl checks.
		switch v {
		case "classic", "quorum", "stream":
		default:
			return usagef("unsupported default queue type %q: use quorum, classic or stream", v)
		}
		body.DefaultQueueType = &v
	}
	c.banner(`Adding vhost "%s" ...`, vhost)
	if err := c.api.send(c.ctx, http.MethodPut, apiPath("vhosts", vhost), body); err != nil {
		return err
	}
	c.done()
	return nil
}

func runDeleteVhost(c *cmd) error {
	vhost := c.args[0]
	c.banner(`Deleting vhost "%s" ...`, vhost)
	if err := c.api.send(c.ctx, http.MethodDelete, apiPath("vhosts", vhost), nil); err != nil {
		return vhostMissing(err, vhost)
	}
	c.done()
	return nil
}

var vhostColumns = []column{
	field("name"),
	field("description"),
	field("tags"),
	field("default_queue_type"),
	field("tracing"),
	{name: "cluster_state", text: proplistText},
	field("metadata"),
	field("protected_from_deletion"),
}

func runListVhosts(c *cmd) error {
	cols, err := pickColumns(vhostColumns, c.args, "name")
	if err != nil {
		return err
	}
	c.banner("Listing vhosts ...")
	rows, err := c.api.getList(c.ctx, apiPath("vhosts"))
	if err != nil {
		return err
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

// policyBody is PUT /api/policies/{vhost}/{name}.
type policyBody struct {
	Pattern    string          `json:"pattern"`
	Definition json.RawMessage `json:"definition"`
	Priority   int             `json:"priority"`
	ApplyTo    string          `json:"apply-to"`
}

func runSetPolicy(c *cmd) error {
	name, pattern, definition := c.args[0], c.args[1], c.args[2]
	body := policyBody{Pattern: pattern, ApplyTo: "all"}
	if v, ok := c.opts["priority"]; ok {
		p, err := strconv.Atoi(v)
		if err != nil {
			return usagef("invalid --priority %q: an integer", v)
		}
		body.Priority = p
	}
	if v, ok := c.opts["apply-to"]; ok {
		body.ApplyTo = v // the server knows which values it supports
	}
	c.banner(`Setting policy "%s" for pattern "%s" to "%s" with priority "%d" for vhost "%s" ...`,
		name, pattern, definition, body.Priority, c.vhost)
	def, err := parseJSON([]byte(definition))
	if err != nil || def.kind != kObject {
		return failf(exitDataErr, "JSON decoding error: the policy definition must be a JSON object, got %s", definition)
	}
	body.Definition = def.compact()
	if err := c.api.send(c.ctx, http.MethodPut, apiPath("policies", c.vhost, name), body); err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.done()
	return nil
}

func runClearPolicy(c *cmd) error {
	name := c.args[0]
	c.banner(`Clearing policy "%s" on vhost "%s" ...`, name, c.vhost)
	if err := c.api.send(c.ctx, http.MethodDelete, apiPath("policies", c.vhost, name), nil); err != nil {
		return notFound(err, exitDataErr, `Policy "%s" does not exist in vhost "%s"`, name, c.vhost)
	}
	c.done()
	return nil
}

var policyColumns = []column{
	field("vhost"),
	field("name"),
	field("pattern"),
	field("apply-to"),
	{name: "definition", text: jsonText},
	field("priority"),
}

func runListPolicies(c *cmd) error {
	c.banner(`Listing policies for vhost "%s" ...`, c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("policies", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: policyColumns, rows: rows, blankWhenEmpty: true})
	return nil
}
