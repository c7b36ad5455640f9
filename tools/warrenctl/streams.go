package main

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Streams:
//
//	stream_status                GET /api/queues/{vhost}/{stream}
//	                             --tracking: GET /api/stream/producers/{vhost}/{stream}
//	                             and GET /api/stream/offsets/{vhost}/{stream}
//	list_stream_connections      GET /api/stream/connections
//	list_stream_publishers       GET /api/stream/publishers/{vhost}
//	list_stream_consumers        GET /api/stream/consumers/{vhost}
//	list_stream_consumer_groups  GET /api/stream/consumer-groups/{vhost}
//	list_stream_offsets          GET /api/stream/offsets/{vhost}[/{stream}]
//	reset_stream_offset          PUT /api/stream/offsets/{vhost}/{stream}/{reference}
//	list_stream_producers        GET /api/stream/producers/{vhost}[/{stream}]

var streamVerbs = []*verb{
	{
		name: "stream_status", usage: "[--vhost <vhost>] [--tracking] <stream> [<column> ...]", min: 1, max: -1,
		summary: "Displays the status of a stream; --tracking lists its producers' and consumers' stored state instead",
		opts:    []opt{{name: "tracking"}},
		columns: streamStatusColumns,
		run:     runStreamStatus,
	},
	{
		name: "list_stream_connections", usage: "[<column> ...]", min: 0, max: -1,
		summary: "Lists stream connections",
		columns: streamConnectionColumns,
		run:     runListStreamConnections,
	},
	{
		name: "list_stream_publishers", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists all stream publishers in a virtual host",
		columns: streamPublisherColumns,
		run:     runListStreamPublishers,
	},
	{
		name: "list_stream_consumers", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists all stream consumers in a virtual host",
		columns: streamConsumerColumns,
		run:     runListStreamConsumers,
	},
	{
		name: "list_stream_consumer_groups", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists groups of stream single active consumers in a virtual host",
		columns: consumerGroupColumns,
		run:     runListStreamConsumerGroups,
	},
	{
		name: "list_stream_offsets", usage: "[--vhost <vhost>] [<stream>]", min: 0, max: 1,
		summary: "Lists the offsets consumers stored, in a virtual host or one stream (Warren)",
		run:     runListStreamOffsets,
	},
	{
		name: "reset_stream_offset", usage: "[--vhost <vhost>] <stream> <consumer> <offset | first | last | timestamp=<ms since epoch or RFC 3339>>", min: 3, max: 3,
		summary: "Sets the offset stored for a consumer reference on a stream (Warren)",
		run:     runResetStreamOffset,
	},
	{
		name: "list_stream_producers", usage: "[--vhost <vhost>] [<stream>]", min: 0, max: 1,
		summary: "Lists the producers' deduplication state (last publishing id), in a virtual host or one stream (Warren)",
		run:     runListStreamProducers,
	},
}

func streamMissing(err error, stream, vhost string) error {
	return notFound(err, exitDataErr, `Stream '%s' not found in vhost '%s'`, stream, vhost)
}

// streamStatusColumns read GET /api/queues/{vhost}/{stream}. Warren adds a
// "stream" object to a stream queue; RabbitMQ has only readers (per node),
// so against RabbitMQ the offsets print empty. One node, one row: the
// writer.
var streamStatusColumns = []column{
	constant("role", "writer"),
	{name: "node", get: streamNode},
	fieldAt("offset", "stream.last_offset"),
	fieldAt("committed_offset", "stream.committed_offset"),
	fieldAt("first_offset", "stream.first_offset"),
	{name: "readers", get: func(q jv) jv {
		if r := q.path("stream.readers"); r.kind != kMissing {
			return r
		}
		return q.get("readers").get(streamNode(q).str())
	}},
	fieldAt("segments", "stream.segments"),
	fieldAt("last_offset", "stream.last_offset"),
	fieldAt("first_timestamp", "stream.first_timestamp"),
	fieldAt("last_timestamp", "stream.last_timestamp"),
	fieldAt("size_bytes", "stream.size_bytes"),
}

// streamNode is the node of a stream's writer.
func streamNode(q jv) jv {
	if l := q.get("leader"); l.kind == kString {
		return l
	}
	return q.get("node")
}

func runStreamStatus(c *cmd) error {
	stream := c.args[0]
	if c.has("tracking") {
		if len(c.args) > 1 {
			return usagef("--tracking takes no columns")
		}
		return c.streamTracking(stream)
	}
	cols, err := pickColumns(streamStatusColumns, c.args[1:],
		"role", "node", "offset", "committed_offset", "first_offset", "readers", "segments")
	if err != nil {
		return err
	}
	c.banner("Status of stream %s in vhost %s ...", stream, c.vhost)
	q, err := c.api.get(c.ctx, apiPath("queues", c.vhost, stream))
	if err != nil {
		return streamMissing(err, stream, c.vhost)
	}
	if t := q.get("type").str(); t != "stream" {
		return failf(exitDataErr, "Queue '%s' in vhost '%s' is a %s queue, not a stream", stream, c.vhost, t)
	}
	c.printListing(listing{cols: cols, rows: []jv{q}})
	return nil
}

var trackingColumns = []column{field("type"), field("reference"), field("value")}

// streamTracking prints a stream's tracking state as rabbitmq-streams
// stream_status --tracking does: a "sequence" row per producer reference
// (its last publishing id) and an "offset" row per consumer reference.
func (c *cmd) streamTracking(stream string) error {
	c.banner("Status of stream %s in vhost %s ...", stream, c.vhost)
	producers, err := c.api.getList(c.ctx, apiPath("stream", "producers", c.vhost, stream))
	if err != nil {
		return streamMissing(err, stream, c.vhost)
	}
	offsets, err := c.api.getList(c.ctx, apiPath("stream", "offsets", c.vhost, stream))
	if err != nil {
		return streamMissing(err, stream, c.vhost)
	}
	var rows []jv
	add := func(typ string, ref, value jv) {
		var b bytes.Buffer
		b.WriteString(`{"type":`)
		b.Write(jstring(typ).raw)
		b.WriteString(`,"reference":`)
		b.Write(ref.compact())
		b.WriteString(`,"value":`)
		b.Write(value.compact())
		b.WriteByte('}')
		row, _ := parseJSON(b.Bytes()) // valid: built from valid parts
		rows = append(rows, row)
	}
	for _, p := range producers {
		add("sequence", p.get("reference"), p.get("last_publishing_id"))
	}
	for _, o := range offsets {
		add("offset", o.get("reference"), o.get("offset"))
	}
	c.printListing(listing{cols: trackingColumns, rows: rows})
	return nil
}

// streamConnectionColumns are rabbitmq-streams'; pid is the name.
var streamConnectionColumns = []column{
	field("auth_mechanism"),
	field("client_properties"),
	fieldAt("conn_name", "name"),
	field("connected_at"),
	fieldAt("connection_state", "state"),
	field("frame_max"),
	fieldAt("heartbeat", "timeout"),
	field("host"),
	field("node"),
	field("peer_cert_issuer"),
	field("peer_cert_subject"),
	field("peer_cert_validity"),
	field("peer_host"),
	field("peer_port"),
	fieldAt("pid", "name"),
	field("port"),
	field("ssl"),
	field("ssl_cipher"),
	field("ssl_hash"),
	field("ssl_key_exchange"),
	field("ssl_protocol"),
	field("subscriptions"),
	field("user"),
	field("vhost"),
}

func runListStreamConnections(c *cmd) error {
	cols, err := pickColumns(streamConnectionColumns, c.args, "conn_name")
	if err != nil {
		return err
	}
	c.banner("Listing stream connections ...")
	rows, err := c.api.getList(c.ctx, apiPath("stream", "connections"))
	if err != nil {
		return err
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

// streamPublisherColumns: connection_pid is the connection's name.
var streamPublisherColumns = []column{
	fieldAt("connection_pid", "connection_details.name"),
	fieldAt("messages_confirmed", "confirmed"),
	fieldAt("messages_errored", "errored"),
	fieldAt("messages_published", "published"),
	fieldAt("node", "connection_details.node"),
	field("publisher_id"),
	field("reference"),
	fieldAt("stream", "queue.name"),
}

func runListStreamPublishers(c *cmd) error {
	cols, err := pickColumns(streamPublisherColumns, c.args, "connection_pid", "publisher_id", "stream",
		"reference", "messages_published", "messages_confirmed", "messages_errored")
	if err != nil {
		return err
	}
	c.banner("Listing stream publishers ...")
	rows, err := c.api.getList(c.ctx, apiPath("stream", "publishers", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

// streamConsumerColumns: connection_pid is the connection's name.
var streamConsumerColumns = []column{
	field("active"),
	field("activity_status"),
	fieldAt("connection_pid", "connection_details.name"),
	field("credits"),
	fieldAt("messages_consumed", "consumed"),
	fieldAt("node", "connection_details.node"),
	field("offset"),
	field("offset_lag"),
	field("properties"),
	fieldAt("stream", "queue.name"),
	field("subscription_id"),
}

func runListStreamConsumers(c *cmd) error {
	cols, err := pickColumns(streamConsumerColumns, c.args, "connection_pid", "subscription_id", "stream",
		"messages_consumed", "offset", "offset_lag", "credits", "properties")
	if err != nil {
		return err
	}
	c.banner("Listing stream consumers ...")
	rows, err := c.api.getList(c.ctx, apiPath("stream", "consumers", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

var consumerGroupColumns = []column{
	field("consumers"),
	field("members"),
	field("partition_index"),
	field("reference"),
	field("stream"),
	field("vhost"),
}

func runListStreamConsumerGroups(c *cmd) error {
	cols, err := pickColumns(consumerGroupColumns, c.args, "stream", "reference", "partition_index", "consumers")
	if err != nil {
		return err
	}
	c.banner("Listing stream consumer groups ...")
	rows, err := c.api.getList(c.ctx, apiPath("stream", "consumer-groups", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

var offsetColumns = []column{field("stream"), field("reference"), field("offset")}

func runListStreamOffsets(c *cmd) error {
	segs := []string{"stream", "offsets", c.vhost}
	if len(c.args) == 1 {
		segs = append(segs, c.args[0])
		c.banner("Listing stored offsets for stream %s in vhost %s ...", c.args[0], c.vhost)
	} else {
		c.banner("Listing stored offsets for vhost %s ...", c.vhost)
	}
	rows, err := c.api.getList(c.ctx, apiPath(segs...))
	if err != nil {
		if len(c.args) == 1 {
			return streamMissing(err, c.args[0], c.vhost)
		}
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: offsetColumns, rows: rows})
	return nil
}

// offsetBody is PUT /api/stream/offsets/{vhost}/{stream}/{reference}:
// {"offset": 123}, {"offset": "first"}, {"offset": "last"} or
// {"timestamp": <ms since epoch>}.
type offsetBody struct {
	Offset    any    `json:"offset,omitempty"`
	Timestamp *int64 `json:"timestamp,omitempty"`
}

// parseOffsetSpec reads reset_stream_offset's third argument.
func parseOffsetSpec(s string) (offsetBody, error) {
	switch {
	case s == "first" || s == "last":
		return offsetBody{Offset: s}, nil
	case strings.HasPrefix(s, "timestamp="):
		v := strings.TrimPrefix(s, "timestamp=")
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return offsetBody{Timestamp: &ms}, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return offsetBody{}, usagef("invalid timestamp %q: milliseconds since the epoch or RFC 3339 (2024-05-01T12:00:00Z)", v)
		}
		ms := t.UnixMilli()
		return offsetBody{Timestamp: &ms}, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return offsetBody{}, usagef("invalid offset %q: a number, first, last or timestamp=...", s)
	}
	return offsetBody{Offset: n}, nil
}

func runResetStreamOffset(c *cmd) error {
	stream, ref, spec := c.args[0], c.args[1], c.args[2]
	body, err := parseOffsetSpec(spec)
	if err != nil {
		return err
	}
	c.banner(`Resetting stored offset of consumer "%s" on stream '%s' in vhost '%s' to %s ...`, ref, stream, c.vhost, spec)
	err = c.api.send(c.ctx, http.MethodPut, apiPath("stream", "offsets", c.vhost, stream, ref), body)
	if err != nil {
		return streamMissing(err, stream, c.vhost)
	}
	c.done()
	return nil
}

var producerColumns = []column{field("stream"), field("reference"), field("last_publishing_id"), field("duplicates")}

func runListStreamProducers(c *cmd) error {
	segs := []string{"stream", "producers", c.vhost}
	if len(c.args) == 1 {
		segs = append(segs, c.args[0])
		c.banner("Listing producers for stream %s in vhost %s ...", c.args[0], c.vhost)
	} else {
		c.banner("Listing producers for vhost %s ...", c.vhost)
	}
	rows, err := c.api.getList(c.ctx, apiPath(segs...))
	if err != nil {
		if len(c.args) == 1 {
			return streamMissing(err, c.args[0], c.vhost)
		}
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: producerColumns, rows: rows})
	return nil
}
