package main

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Super streams:
//
//	add_super_stream     PUT /api/stream/super-streams/{vhost}/{name}
//	delete_super_stream  DELETE /api/stream/super-streams/{vhost}/{name}
//	list_super_streams   GET /api/stream/super-streams/{vhost}

var superStreamVerbs = []*verb{
	{
		name: "add_super_stream",
		usage: "<name> [--vhost <vhost>] [--partitions <partitions> | --binding-keys <binding-keys>] " +
			"[--max-length-bytes <max-length-bytes>] [--max-age <max-age>] " +
			"[--stream-max-segment-size-bytes <stream-max-segment-size-bytes>] " +
			"[--leader-locator <leader-locator>] [--initial-cluster-size <initial-cluster-size>]",
		summary: "Adds a super stream: --partitions N (default 3) or --binding-keys a,b (alias --routing-keys)",
		min:     1, max: 1,
		opts: []opt{
			{name: "partitions", value: true},
			{name: "binding-keys", value: true},
			{name: "routing-keys", value: true},
			{name: "max-length-bytes", value: true},
			{name: "max-age", value: true},
			{name: "stream-max-segment-size-bytes", value: true},
			{name: "leader-locator", value: true},
			{name: "initial-cluster-size", value: true},
		},
		run: runAddSuperStream,
	},
	{
		name: "delete_super_stream", usage: "<name> [--vhost <vhost>]", min: 1, max: 1,
		summary: "Deletes a super stream and its partition streams",
		run:     runDeleteSuperStream,
	},
	{
		name: "list_super_streams", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists super streams with their partitions and binding keys (Warren)",
		columns: superStreamColumns,
		run:     runListSuperStreams,
	},
}

// superStreamBody is PUT /api/stream/super-streams/{vhost}/{name}. Warren
// reads binding_keys; RabbitMQ 4.x's endpoint of the same path reads
// binding-keys. Both go out, so the command works against either.
type superStreamBody struct {
	Partitions        int              `json:"partitions,omitempty"`
	BindingKeys       string           `json:"binding_keys,omitempty"`
	RabbitBindingKeys string           `json:"binding-keys,omitempty"`
	Arguments         *superStreamArgs `json:"arguments,omitempty"`
}

// superStreamArgs are the partition streams' arguments, named as in
// RabbitMQ (the x- prefix dropped): sizes in bytes, max-age as "<n>s".
type superStreamArgs struct {
	MaxLengthBytes      int64  `json:"max-length-bytes,omitempty"`
	MaxAge              string `json:"max-age,omitempty"`
	MaxSegmentSizeBytes int64  `json:"stream-max-segment-size-bytes,omitempty"`
	LeaderLocator       string `json:"queue-leader-locator,omitempty"`
	InitialClusterSize  int    `json:"initial-cluster-size,omitempty"`
}

func runAddSuperStream(c *cmd) error {
	name := c.args[0]
	body, err := superStreamRequest(c.opts)
	if err != nil {
		return err
	}
	c.banner("Adding a super stream...")
	err = c.api.send(c.ctx, http.MethodPut, apiPath("stream", "super-streams", c.vhost, name), body)
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	if c.json {
		c.done()
	} else {
		c.printf("Super stream %s has been created\n", name)
	}
	return nil
}

// superStreamRequest checks add_super_stream's options as rabbitmq-streams
// does, with its messages, and builds the request body.
func superStreamRequest(opts map[string]string) (superStreamBody, error) {
	var body superStreamBody
	partitions, hasPartitions := opts["partitions"]
	keys, hasKeys := opts["binding-keys"]
	routingKeys, hasRoutingKeys := opts["routing-keys"]
	switch {
	case hasKeys && hasRoutingKeys:
		return body, usagef("Specify --binding-keys only.")
	case hasPartitions && (hasKeys || hasRoutingKeys):
		return body, usagef("Specify --partitions or --binding-keys, not both.")
	case hasRoutingKeys:
		keys, hasKeys = routingKeys, true
	}
	if hasKeys {
		n := 0
		for _, k := range strings.Split(keys, ",") {
			if strings.TrimSpace(k) != "" {
				n++
			}
		}
		if n == 0 {
			return body, usagef("The number of binding keys must be greater than 0")
		}
		body.BindingKeys, body.RabbitBindingKeys = keys, keys
	} else {
		body.Partitions = 3
		if hasPartitions {
			p, err := strconv.Atoi(partitions)
			if err != nil || p < 1 {
				return body, usagef("The partition number must be greater than 0")
			}
			body.Partitions = p
		}
	}

	var args superStreamArgs
	if v, ok := opts["max-length-bytes"]; ok {
		n, ok := parseInformationUnit(v)
		if !ok {
			return body, usagef("Invalid value for --max-length-bytes, valid example values: 100gb, 50mb")
		}
		args.MaxLengthBytes = n
	}
	if v, ok := opts["max-age"]; ok {
		age, ok := parseMaxAge(v)
		if !ok {
			return body, usagef("Invalid value for --max-age, the value must be a ISO 8601 duration, e.g. PT10M30S for 10 minutes 30 seconds, P5DT8H for 5 days 8 hours.")
		}
		args.MaxAge = age
	}
	if v, ok := opts["stream-max-segment-size-bytes"]; ok {
		n, ok := parseInformationUnit(v)
		if !ok {
			return body, usagef("Invalid value for --stream-max-segment-size-bytes, valid example values: 100gb, 50mb")
		}
		args.MaxSegmentSizeBytes = n
	}
	if v, ok := opts["leader-locator"]; ok {
		switch v {
		case "client-local", "balanced", "random", "least-leaders":
		default:
			return body, usagef("Invalid value for --leader-locator, valid values are client-local, balanced.")
		}
		args.LeaderLocator = v
	}
	if v, ok := opts["initial-cluster-size"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return body, usagef("Invalid value for --initial-cluster-size, the value must be a positive integer.")
		}
		args.InitialClusterSize = n
	}
	if args != (superStreamArgs{}) {
		body.Arguments = &args
	}
	return body, nil
}

// informationUnit matches RabbitMQ's information units: 1000-based k, m,
// g, t, p (kb, MB, ...) and 1024-based ki, mi, gi, ti, pi (KiB, ...).
var informationUnit = regexp.MustCompile(`^([0-9]+)([kmgtp](i|ib|b)?)?$`)

// parseInformationUnit parses "500mb", "20gb", "1GiB" or a plain number
// of bytes.
func parseInformationUnit(s string) (int64, bool) {
	m := informationUnit.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	if m[2] == "" {
		return n, true
	}
	base := int64(1000)
	if m[3] == "i" || m[3] == "ib" {
		base = 1024
	}
	mult := int64(1)
	for range strings.IndexByte("kmgtp", m[2][0]) + 1 {
		mult *= base
	}
	if n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}

var (
	// isoDuration is ISO 8601's PnYnMnDTnHnMnS, as rabbitmq-streams takes.
	isoDuration = regexp.MustCompile(`^P(?:([0-9]+)Y)?(?:([0-9]+)M)?(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+)(?:\.[0-9]+)?S)?)?$`)
	// rabbitAge is the x-max-age format itself: 7D, 12h, 30m, 10s, 1Y, 2M.
	rabbitAge = regexp.MustCompile(`^[0-9]+[YMDhms]$`)
)

// parseMaxAge returns the x-max-age for an ISO 8601 duration, converted
// to seconds as rabbitmq-streams does (a year is 365 days, a month 30),
// or an x-max-age value as given.
func parseMaxAge(s string) (string, bool) {
	if rabbitAge.MatchString(s) {
		return s, true
	}
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		return "", false
	}
	units := []int64{365 * 86400, 30 * 86400, 86400, 3600, 60, 1}
	var total int64
	for i, u := range units {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > (math.MaxInt64-total)/u {
			return "", false
		}
		total += n * u
	}
	return strconv.FormatInt(total, 10) + "s", true
}

func runDeleteSuperStream(c *cmd) error {
	name := c.args[0]
	c.banner("Deleting a super stream...")
	err := c.api.send(c.ctx, http.MethodDelete, apiPath("stream", "super-streams", c.vhost, name), nil)
	if err != nil {
		return notFound(err, exitDataErr, `Super stream "%s" not found in vhost "%s"`, name, c.vhost)
	}
	if c.json {
		c.done()
	} else {
		c.printf("Super stream %s has been deleted\n", name)
	}
	return nil
}

var superStreamColumns = []column{
	field("name"),
	field("vhost"),
	field("partitions"),
	field("binding_keys"),
}

func runListSuperStreams(c *cmd) error {
	cols, err := pickColumns(superStreamColumns, c.args, "name", "partitions", "binding_keys")
	if err != nil {
		return err
	}
	c.banner("Listing super streams for vhost %s ...", c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("stream", "super-streams", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}
