package main

import "testing"

func TestQueueVerbs(t *testing.T) {
	queues := get("/api/queues/%2F", rmq("queues-root.json"))
	listQueues := req("GET", "/api/queues/%2F")
	runCases(t, []cliCase{{
		name:   "list_queues",
		args:   []string{"list_queues"},
		routes: []route{queues},
		want:   []sent{listQueues},
	}, {
		name: "list_queues_columns",
		args: []string{"list_queues", "name", "messages", "messages_ready", "messages_unacknowledged",
			"consumers", "type", "durable", "auto_delete", "arguments", "policy", "state", "members", "exclusive_consumer_tag"},
		routes: []route{queues},
		want:   []sent{listQueues},
	}, {
		name:   "list_queues_json",
		args:   []string{"--formatter", "json", "list_queues", "name", "messages", "arguments", "durable"},
		routes: []route{queues},
		want:   []sent{listQueues},
	}, {
		name:   "list_queues_quiet_comma_columns",
		args:   []string{"list_queues", "-q", "name,type", "consumers", "-t", "5"},
		routes: []route{queues},
		want:   []sent{listQueues},
	}, {
		name:   "list_queues_silent",
		args:   []string{"-s", "list_queues", "name", "messages_ready"},
		routes: []route{queues},
		want:   []sent{listQueues},
	}, {
		name:   "list_queues_no_table_headers",
		args:   []string{"list_queues", "--no-table-headers", "--timeout", "2.5"},
		routes: []route{queues},
		want:   []sent{listQueues},
	}, {
		name:   "list_queues_empty",
		args:   []string{"list_queues", "-p", "ctl-v"},
		routes: []route{emptyList("/api/queues/ctl-v")},
		want:   []sent{req("GET", "/api/queues/ctl-v")},
	}, {
		name:   "list_queues_empty_json",
		args:   []string{"list_queues", "-p", "ctl-v", "--formatter", "json"},
		routes: []route{emptyList("/api/queues/ctl-v")},
		want:   []sent{req("GET", "/api/queues/ctl-v")},
	}, {
		name: "list_queues_bad_column",
		args: []string{"list_queues", "name", "bogus", "nope"},
		code: exitUsage,
	}, {
		name:   "list_queues_missing_vhost",
		args:   []string{"list_queues", "-p", "ctl-nope"},
		routes: []route{notFound404("GET", "/api/queues/ctl-nope")},
		want:   []sent{req("GET", "/api/queues/ctl-nope")},
		code:   exitDataErr,
	}, {
		name:   "list_exchanges",
		args:   []string{"list_exchanges"},
		routes: []route{get("/api/exchanges/%2F", rmq("exchanges-root.json"))},
		want:   []sent{req("GET", "/api/exchanges/%2F")},
	}, {
		name:   "list_exchanges_columns",
		args:   []string{"list_exchanges", "name", "type", "durable", "auto_delete", "internal", "arguments", "policy"},
		routes: []route{get("/api/exchanges/%2F", rmq("exchanges-root.json"))},
		want:   []sent{req("GET", "/api/exchanges/%2F")},
	}, {
		name:   "list_bindings",
		args:   []string{"list_bindings"},
		routes: []route{get("/api/bindings/%2F", rmq("bindings-root.json"))},
		want:   []sent{req("GET", "/api/bindings/%2F")},
	}, {
		name:   "list_bindings_json",
		args:   []string{"list_bindings", "source_name", "routing_key", "arguments", "--formatter", "json"},
		routes: []route{get("/api/bindings/%2F", rmq("bindings-root.json"))},
		want:   []sent{req("GET", "/api/bindings/%2F")},
	}, {
		name:   "list_consumers",
		args:   []string{"list_consumers"},
		routes: []route{get("/api/consumers/%2F", rmq("consumers-root.json"))},
		want:   []sent{req("GET", "/api/consumers/%2F")},
	}, {
		name:   "list_consumers_columns",
		args:   []string{"list_consumers", "queue_name", "consumer_tag", "activity_status", "exclusive"},
		routes: []route{get("/api/consumers/%2F", rmq("consumers-root.json"))},
		want:   []sent{req("GET", "/api/consumers/%2F")},
	}, {
		name:   "purge_queue",
		args:   []string{"purge_queue", "ctl-q1"},
		routes: []route{noContent("DELETE", "/api/queues/%2F/ctl-q1/contents")},
		want:   []sent{req("DELETE", "/api/queues/%2F/ctl-q1/contents")},
	}, {
		name:   "purge_queue_missing",
		args:   []string{"purge_queue", "-p", "ctl-v", "ctl-nope"},
		routes: []route{notFound404("DELETE", "/api/queues/ctl-v/ctl-nope/contents")},
		want:   []sent{req("DELETE", "/api/queues/ctl-v/ctl-nope/contents")},
		code:   exitDataErr,
	}, {
		name:   "delete_queue",
		args:   []string{"delete_queue", "ctl-q1"},
		routes: []route{noContent("DELETE", "/api/queues/%2F/ctl-q1")},
		want:   []sent{req("DELETE", "/api/queues/%2F/ctl-q1")},
	}, {
		name:   "delete_queue_if_empty_if_unused",
		args:   []string{"delete_queue", "ctl-q1", "--if-empty", "-u"},
		routes: []route{noContent("DELETE", "/api/queues/%2F/ctl-q1?if-empty=true&if-unused=true")},
		want:   []sent{req("DELETE", "/api/queues/%2F/ctl-q1?if-empty=true&if-unused=true")},
	}, {
		name: "delete_queue_not_empty",
		args: []string{"delete_queue", "-e", "ctl-q1"},
		routes: []route{{method: "DELETE", uri: "/api/queues/%2F/ctl-q1?if-empty=true", status: 400,
			file: rmq("queue-not-empty.json")}},
		want: []sent{req("DELETE", "/api/queues/%2F/ctl-q1?if-empty=true")},
		code: exitDataErr,
	}, {
		name:   "delete_queue_missing",
		args:   []string{"delete_queue", "ctl-nope"},
		routes: []route{notFound404("DELETE", "/api/queues/%2F/ctl-nope")},
		want:   []sent{req("DELETE", "/api/queues/%2F/ctl-nope")},
		code:   exitDataErr,
	}, {
		name: "delete_queue_unknown_option",
		args: []string{"delete_queue", "ctl-q1", "--if-idle"},
		code: exitUsage,
	}})
}
