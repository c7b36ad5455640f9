package main

import (
	"net/http"
	"strconv"
	"strings"
)

// Connections and channels:
//
//	list_connections  GET /api/connections (stream connections left out)
//	list_channels     GET /api/channels
//	close_connection  DELETE /api/connections/{name}, X-Reason: <reason>

var connectionVerbs = []*verb{
	{
		name: "list_connections", usage: "[<column> ...]", min: 0, max: -1,
		summary: "Lists AMQP connections (list_stream_connections lists stream ones)",
		columns: connectionColumns,
		run:     runListConnections,
	},
	{
		name: "list_channels", usage: "[<column> ...]", min: 0, max: -1,
		summary: "Lists all channels",
		columns: channelColumns,
		run:     runListChannels,
	},
	{
		name: "close_connection", usage: "<connection name> <explanation>", min: 2, max: 2,
		summary: "Closes a connection; its name is list_connections' name column",
		run:     runCloseConnection,
	},
}

// connectionColumns are rabbitmqctl's; pid is the connection's name, the
// identifier the HTTP API uses.
var connectionColumns = []column{
	field("auth_mechanism"),
	field("channel_max"),
	field("channels"),
	field("client_properties"),
	field("connected_at"),
	field("frame_max"),
	field("host"),
	field("name"),
	field("node"),
	field("peer_cert_issuer"),
	field("peer_cert_subject"),
	field("peer_cert_validity"),
	field("peer_host"),
	field("peer_port"),
	fieldAt("pid", "name"),
	field("port"),
	field("protocol"),
	field("recv_cnt"),
	field("recv_oct"),
	field("send_cnt"),
	field("send_oct"),
	field("send_pend"),
	field("ssl"),
	field("ssl_cipher"),
	field("ssl_hash"),
	field("ssl_key_exchange"),
	field("ssl_protocol"),
	field("state"),
	field("timeout"),
	field("user"),
	field("user_provided_name"),
	field("vhost"),
}

// isStream reports a connection of the stream protocol, which
// /api/connections lists but rabbitmqctl list_connections does not.
func isStream(conn jv) bool {
	return strings.EqualFold(conn.get("protocol").str(), "stream")
}

func runListConnections(c *cmd) error {
	cols, err := pickColumns(connectionColumns, c.args, "user", "peer_host", "peer_port", "state")
	if err != nil {
		return err
	}
	c.banner("Listing connections ...")
	rows, err := c.api.getList(c.ctx, apiPath("connections"))
	if err != nil {
		return err
	}
	amqp := rows[:0]
	for _, r := range rows {
		if !isStream(r) {
			amqp = append(amqp, r)
		}
	}
	c.printListing(listing{cols: cols, rows: amqp})
	return nil
}

// channelColumns: pid is the channel's name, connection its connection's.
var channelColumns = []column{
	field("acks_uncommitted"),
	field("confirm"),
	fieldAt("connection", "connection_details.name"),
	field("consumer_count"),
	field("global_prefetch_count"),
	field("messages_unacknowledged"),
	field("messages_uncommitted"),
	field("messages_unconfirmed"),
	field("name"),
	field("node"),
	field("number"),
	fieldAt("pid", "name"),
	field("prefetch_count"),
	field("state"),
	field("transactional"),
	field("user"),
	field("vhost"),
}

func runListChannels(c *cmd) error {
	cols, err := pickColumns(channelColumns, c.args, "pid", "user", "consumer_count", "messages_unacknowledged")
	if err != nil {
		return err
	}
	c.banner("Listing channels ...")
	rows, err := c.api.getList(c.ctx, apiPath("channels"))
	if err != nil {
		return err
	}
	c.printListing(listing{cols: cols, rows: rows})
	return nil
}

func runCloseConnection(c *cmd) error {
	name, reason := c.args[0], c.args[1]
	c.banner("Closing connection %s, reason: %s...", name, reason)
	// A header value cannot hold line breaks.
	header := http.Header{"X-Reason": {strings.NewReplacer("\r", " ", "\n", " ").Replace(reason)}}
	_, err := c.api.do(c.ctx, request{method: http.MethodDelete, path: apiPath("connections", name), header: header})
	if err != nil {
		return notFound(err, exitDataErr, `Connection "%s" not found`, name)
	}
	c.done()
	return nil
}

// secondsText prints a float as Erlang does: 60.0, 0.5, 0.1365.
func secondsText(s float64) string {
	t := strconv.FormatFloat(s, 'f', -1, 64)
	if !strings.Contains(t, ".") {
		t += ".0"
	}
	return t
}
