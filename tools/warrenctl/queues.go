package main

import (
	"net/http"
	"net/url"
	"strings"
)

// Queues, exchanges, bindings and consumers:
//
//	list_queues     GET /api/queues/{vhost}
//	list_exchanges  GET /api/exchanges/{vhost}
//	list_bindings   GET /api/bindings/{vhost}
//	list_consumers  GET /api/consumers/{vhost}
//	purge_queue     DELETE /api/queues/{vhost}/{queue}/contents
//	delete_queue    DELETE /api/queues/{vhost}/{queue}[?if-empty=true][&if-unused=true]

var queueVerbs = []*verb{
	{
		name: "list_queues", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists queues and their properties",
		columns: queueColumns,
		run:     runListQueues,
	},
	{
		name: "list_exchanges", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists exchanges",
		columns: exchangeColumns,
		run:     runListExchanges,
	},
	{
		name: "list_bindings", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists all bindings in a virtual host",
		columns: bindingColumns,
		run:     runListBindings,
	},
	{
		name: "list_consumers", usage: "[--vhost <vhost>] [<column> ...]", min: 0, max: -1,
		summary: "Lists all consumers in a virtual host",
		columns: consumerColumns,
		run:     runListConsumers,
	},
	{
		name: "purge_queue", usage: "[--vhost <vhost>] <queue>", min: 1, max: 1,
		summary: "Purges a queue (removes all messages in it)",
		run:     runPurgeQueue,
	},
	{
		name: "delete_queue", usage: "[--vhost <vhost>] <queue_name> [--if-empty|-e] [--if-unused|-u]", min: 1, max: 1,
		summary: "Deletes a queue",
		opts:    []opt{{name: "if-empty", short: "e"}, {name: "if-unused", short: "u"}},
		run:     runDeleteQueue,
	},
}

// queueColumns are rabbitmqctl 3.10's list_queues columns. The HTTP API has
// no Erlang pids: pid and exclusive_consumer_pid print empty, owner_pid
// prints the owning connection's name; slave_pids and
// synchronised_slave_pids print the mirrors' nodes. disk_reads and
// disk_writes print what the server reports, which for RabbitMQ is
// nothing.
var queueColumns = []column{
	field("arguments"),
	field("auto_delete"),
	field("consumer_capacity"),
	field("consumer_utilisation"),
	field("consumers"),
	field("disk_reads"),
	field("disk_writes"),
	field("durable"),
	field("exclusive"),
	field("exclusive_consumer_pid"),
	field("exclusive_consumer_tag"),
	field("head_message_timestamp"),
	field("leader"),
	field("members"),
	field("memory"),
	field("message_bytes"),
	field("message_bytes_persistent"),
	field("message_bytes_ram"),
	field("message_bytes_ready"),
	field("message_bytes_unacknowledged"),
	field("messages"),
	field("messages_persistent"),
	field("messages_ram"),
	field("messages_ready"),
	field("messages_ready_ram"),
	field("messages_unacknowledged"),
	field("messages_unacknowledged_ram"),
	field("name"),
	field("node"),
	field("online"),
	fieldAt("owner_pid", "owner_pid_details.name"),
	field("pid"),
	field("policy"),
	fieldAt("slave_pids", "slave_nodes"),
	field("state"),
	fieldAt("synchronised_slave_pids", "synchronised_slave_nodes"),
	field("type"),
	field("vhost"),
}

func runListQueues(c *cmd) error {
	cols, err := pickColumns(queueColumns, c.args, "name", "messages")
	if err != nil {
		return err
	}
	c.banner("Timeout: %s seconds ...", secondsText(c.timeout.Seconds()))
	c.banner("Listing queues for vhost %s ...", c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("queues", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

var exchangeColumns = []column{
	field("arguments"),
	field("auto_delete"),
	field("durable"),
	field("internal"),
	field("name"),
	field("policy"),
	field("type"),
	field("vhost"),
}

func runListExchanges(c *cmd) error {
	cols, err := pickColumns(exchangeColumns, c.args, "name", "type")
	if err != nil {
		return err
	}
	c.banner("Listing exchanges for vhost %s ...", c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("exchanges", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

// bindingColumns: bindings always have an exchange as their source.
var bindingColumns = []column{
	fieldAt("source_name", "source"),
	constant("source_kind", "exchange"),
	fieldAt("destination_name", "destination"),
	fieldAt("destination_kind", "destination_type"),
	field("routing_key"),
	field("arguments"),
	field("vhost"),
}

func runListBindings(c *cmd) error {
	cols, err := pickColumns(bindingColumns, c.args,
		"source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments")
	if err != nil {
		return err
	}
	c.banner("Listing bindings for vhost %s...", c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("bindings", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

// consumerColumns: channel_pid is the channel's name.
var consumerColumns = []column{
	field("ack_required"),
	field("active"),
	field("activity_status"),
	field("arguments"),
	fieldAt("channel_pid", "channel_details.name"),
	field("consumer_tag"),
	field("exclusive"),
	field("prefetch_count"),
	fieldAt("queue_name", "queue.name"),
}

func runListConsumers(c *cmd) error {
	cols, err := pickColumns(consumerColumns, c.args,
		"queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "arguments")
	if err != nil {
		return err
	}
	c.banner("Listing consumers in vhost %s ...", c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("consumers", c.vhost))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

func queueMissing(err error, queue, vhost string) error {
	return notFound(err, exitDataErr, `Queue '%s' not found in vhost '%s'`, queue, vhost)
}

func runPurgeQueue(c *cmd) error {
	queue := c.args[0]
	c.banner("Purging queue '%s' in vhost '%s' ...", queue, c.vhost)
	err := c.api.send(c.ctx, http.MethodDelete, apiPath("queues", c.vhost, queue, "contents"), nil)
	if err != nil {
		return queueMissing(err, queue, c.vhost)
	}
	c.done()
	return nil
}

func runDeleteQueue(c *cmd) error {
	queue := c.args[0]
	q := url.Values{}
	var conds []string
	if c.has("if-empty") {
		q.Set("if-empty", "true")
		conds = append(conds, "if queue is empty ")
	}
	if c.has("if-unused") {
		q.Set("if-unused", "true")
		conds = append(conds, "if queue is unused ")
	}
	c.banner("Deleting queue '%s' on vhost '%s' %s...", queue, c.vhost, strings.Join(conds, "and "))
	_, err := c.api.do(c.ctx, request{method: http.MethodDelete, path: apiPath("queues", c.vhost, queue), query: q})
	if err != nil {
		return queueMissing(err, queue, c.vhost)
	}
	c.done()
	return nil
}
