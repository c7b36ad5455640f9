package main

import "testing"

func TestConnectionVerbs(t *testing.T) {
	const conn = "127.0.0.1:55094 -> 127.0.0.1:15673"
	const connURI = "/api/connections/127.0.0.1:55094%20-%3E%20127.0.0.1:15673"
	runCases(t, []cliCase{{
		// The stream connections in the response are left out.
		name:   "list_connections",
		args:   []string{"list_connections"},
		routes: []route{get("/api/connections", rmq("connections.json"))},
		want:   []sent{req("GET", "/api/connections")},
	}, {
		name: "list_connections_columns",
		args: []string{"list_connections", "name", "pid", "user", "vhost", "protocol", "channels", "ssl",
			"peer_cert_subject", "client_properties", "connected_at"},
		routes: []route{get("/api/connections", rmq("connections.json"))},
		want:   []sent{req("GET", "/api/connections")},
	}, {
		name:   "list_channels",
		args:   []string{"list_channels"},
		routes: []route{get("/api/channels", rmq("channels.json"))},
		want:   []sent{req("GET", "/api/channels")},
	}, {
		name: "list_channels_columns",
		args: []string{"list_channels", "name", "connection", "number", "user", "vhost", "transactional", "confirm",
			"consumer_count", "messages_unacknowledged", "messages_unconfirmed", "prefetch_count", "global_prefetch_count"},
		routes: []route{get("/api/channels", rmq("channels.json"))},
		want:   []sent{req("GET", "/api/channels")},
	}, {
		name:   "close_connection",
		args:   []string{"close_connection", conn, "maintenance\nwindow"},
		routes: []route{noContent("DELETE", connURI)},
		want:   []sent{{method: "DELETE", uri: connURI, header: map[string]string{"X-Reason": "maintenance window"}}},
	}, {
		name:   "close_connection_missing",
		args:   []string{"close_connection", "ctl-nope", "bye"},
		routes: []route{notFound404("DELETE", "/api/connections/ctl-nope")},
		want:   []sent{{method: "DELETE", uri: "/api/connections/ctl-nope", header: map[string]string{"X-Reason": "bye"}}},
		code:   exitDataErr,
	}, {
		name: "close_connection_no_reason",
		args: []string{"close_connection", conn},
		code: exitUsage,
	}})
}
