package main

import "testing"

func TestSuperStreamVerbs(t *testing.T) {
	const path = "/api/stream/super-streams/%2F/ctl-ss"
	runCases(t, []cliCase{{
		name:   "add_super_stream",
		args:   []string{"add_super_stream", "ctl-ss", "--partitions", "2"},
		routes: []route{created("PUT", path)},
		want:   []sent{withBody("PUT", path, `{"partitions":2}`)},
	}, {
		name:   "add_super_stream_default_partitions",
		args:   []string{"add_super_stream", "ctl-ss", "-q"},
		routes: []route{created("PUT", path)},
		want:   []sent{withBody("PUT", path, `{"partitions":3}`)},
	}, {
		name: "add_super_stream_binding_keys_arguments",
		args: []string{"add_super_stream", "ctl-ss2", "-p", "ctl-v", "--binding-keys", "amer,emea",
			"--max-length-bytes", "20gb", "--max-age", "PT10M30S", "--stream-max-segment-size-bytes", "500mb",
			"--leader-locator", "balanced", "--initial-cluster-size", "3"},
		routes: []route{created("PUT", "/api/stream/super-streams/ctl-v/ctl-ss2")},
		want: []sent{withBody("PUT", "/api/stream/super-streams/ctl-v/ctl-ss2",
			`{"binding_keys":"amer,emea","binding-keys":"amer,emea","arguments":{"max-length-bytes":20000000000,"max-age":"630s","stream-max-segment-size-bytes":500000000,"queue-leader-locator":"balanced","initial-cluster-size":3}}`)},
	}, {
		name:   "add_super_stream_routing_keys_json",
		args:   []string{"add_super_stream", "ctl-ss2", "--routing-keys", "a", "--max-age", "7D", "--formatter", "json"},
		routes: []route{created("PUT", "/api/stream/super-streams/%2F/ctl-ss2")},
		want: []sent{withBody("PUT", "/api/stream/super-streams/%2F/ctl-ss2",
			`{"binding_keys":"a","binding-keys":"a","arguments":{"max-age":"7D"}}`)},
	}, {
		name: "add_super_stream_partitions_and_keys",
		args: []string{"add_super_stream", "ctl-ss", "--partitions", "2", "--binding-keys", "a,b"},
		code: exitUsage,
	}, {
		name: "add_super_stream_zero_partitions",
		args: []string{"add_super_stream", "ctl-ss", "--partitions", "0"},
		code: exitUsage,
	}, {
		name: "add_super_stream_bad_max_age",
		args: []string{"add_super_stream", "ctl-ss", "--max-age", "ten minutes"},
		code: exitUsage,
	}, {
		name: "add_super_stream_exists",
		args: []string{"add_super_stream", "ctl-ss", "--partitions", "2"},
		routes: []route{{method: "PUT", uri: path, status: 400,
			body: `{"error":"bad_request","reason":"super stream ctl-ss already exists"}`}},
		want: []sent{withBody("PUT", path, `{"partitions":2}`)},
		code: exitDataErr,
	}, {
		name:   "delete_super_stream",
		args:   []string{"delete_super_stream", "ctl-ss"},
		routes: []route{noContent("DELETE", path)},
		want:   []sent{req("DELETE", path)},
	}, {
		name:   "delete_super_stream_missing",
		args:   []string{"delete_super_stream", "ctl-nope"},
		routes: []route{notFound404("DELETE", "/api/stream/super-streams/%2F/ctl-nope")},
		want:   []sent{req("DELETE", "/api/stream/super-streams/%2F/ctl-nope")},
		code:   exitDataErr,
	}, {
		name:   "list_super_streams",
		args:   []string{"list_super_streams"},
		routes: []route{get("/api/stream/super-streams/%2F", wrn("super-streams-root.json"))},
		want:   []sent{req("GET", "/api/stream/super-streams/%2F")},
	}, {
		name:   "list_super_streams_json",
		args:   []string{"list_super_streams", "name", "partitions", "--formatter", "json"},
		routes: []route{get("/api/stream/super-streams/%2F", wrn("super-streams-root.json"))},
		want:   []sent{req("GET", "/api/stream/super-streams/%2F")},
	}})
}

func TestStreamVerbs(t *testing.T) {
	runCases(t, []cliCase{{
		name:   "stream_status",
		args:   []string{"stream_status", "ctl-s"},
		routes: []route{get("/api/queues/%2F/ctl-s", wrn("queue-ctl-s.json"))},
		want:   []sent{req("GET", "/api/queues/%2F/ctl-s")},
	}, {
		name: "stream_status_columns_json",
		args: []string{"stream_status", "ctl-s", "first_offset", "last_offset", "first_timestamp", "last_timestamp",
			"size_bytes", "--formatter", "json"},
		routes: []route{get("/api/queues/%2F/ctl-s", wrn("queue-ctl-s.json"))},
		want:   []sent{req("GET", "/api/queues/%2F/ctl-s")},
	}, {
		// RabbitMQ's queue object has no "stream" member: what it lacks
		// prints empty.
		name:   "stream_status_rabbitmq",
		args:   []string{"stream_status", "ctl-s"},
		routes: []route{get("/api/queues/%2F/ctl-s", rmq("queue-ctl-s.json"))},
		want:   []sent{req("GET", "/api/queues/%2F/ctl-s")},
	}, {
		name: "stream_status_not_a_stream",
		args: []string{"stream_status", "ctl-q1"},
		routes: []route{{method: "GET", uri: "/api/queues/%2F/ctl-q1", status: 200,
			body: `{"name":"ctl-q1","vhost":"/","type":"classic"}`}},
		want: []sent{req("GET", "/api/queues/%2F/ctl-q1")},
		code: exitDataErr,
	}, {
		name:   "stream_status_missing",
		args:   []string{"stream_status", "ctl-nope"},
		routes: []route{notFound404("GET", "/api/queues/%2F/ctl-nope")},
		want:   []sent{req("GET", "/api/queues/%2F/ctl-nope")},
		code:   exitDataErr,
	}, {
		name: "stream_status_tracking",
		args: []string{"stream_status", "--tracking", "ctl-s"},
		routes: []route{
			get("/api/stream/producers/%2F/ctl-s", wrn("producers-ctl-s.json")),
			get("/api/stream/offsets/%2F/ctl-s", wrn("offsets-ctl-s.json")),
		},
		want: []sent{req("GET", "/api/stream/producers/%2F/ctl-s"), req("GET", "/api/stream/offsets/%2F/ctl-s")},
	}, {
		name:   "list_stream_connections",
		args:   []string{"list_stream_connections"},
		routes: []route{get("/api/stream/connections", rmq("stream-connections.json"))},
		want:   []sent{req("GET", "/api/stream/connections")},
	}, {
		name: "list_stream_connections_columns",
		args: []string{"list_stream_connections", "conn_name", "user", "vhost", "peer_host", "peer_port",
			"connection_state", "heartbeat", "frame_max", "subscriptions"},
		routes: []route{get("/api/stream/connections", rmq("stream-connections.json"))},
		want:   []sent{req("GET", "/api/stream/connections")},
	}, {
		name:   "list_stream_publishers",
		args:   []string{"list_stream_publishers"},
		routes: []route{get("/api/stream/publishers/%2F", rmq("stream-publishers-root.json"))},
		want:   []sent{req("GET", "/api/stream/publishers/%2F")},
	}, {
		name:   "list_stream_publishers_json",
		args:   []string{"list_stream_publishers", "stream", "reference", "node", "--formatter", "json"},
		routes: []route{get("/api/stream/publishers/%2F", rmq("stream-publishers-root.json"))},
		want:   []sent{req("GET", "/api/stream/publishers/%2F")},
	}, {
		name:   "list_stream_consumers",
		args:   []string{"list_stream_consumers"},
		routes: []route{get("/api/stream/consumers/%2F", rmq("stream-consumers-root.json"))},
		want:   []sent{req("GET", "/api/stream/consumers/%2F")},
	}, {
		name:   "list_stream_consumers_missing_vhost",
		args:   []string{"list_stream_consumers", "-p", "ctl-nope"},
		routes: []route{notFound404("GET", "/api/stream/consumers/ctl-nope")},
		want:   []sent{req("GET", "/api/stream/consumers/ctl-nope")},
		code:   exitDataErr,
	}, {
		name:   "list_stream_consumer_groups",
		args:   []string{"list_stream_consumer_groups"},
		routes: []route{get("/api/stream/consumer-groups/%2F", wrn("consumer-groups-root.json"))},
		want:   []sent{req("GET", "/api/stream/consumer-groups/%2F")},
	}, {
		name:   "list_stream_consumer_groups_members",
		args:   []string{"list_stream_consumer_groups", "stream", "consumers", "members"},
		routes: []route{get("/api/stream/consumer-groups/%2F", wrn("consumer-groups-root.json"))},
		want:   []sent{req("GET", "/api/stream/consumer-groups/%2F")},
	}, {
		name:   "list_stream_offsets",
		args:   []string{"list_stream_offsets"},
		routes: []route{get("/api/stream/offsets/%2F", wrn("offsets-root.json"))},
		want:   []sent{req("GET", "/api/stream/offsets/%2F")},
	}, {
		name:   "list_stream_offsets_stream",
		args:   []string{"list_stream_offsets", "ctl-s"},
		routes: []route{get("/api/stream/offsets/%2F/ctl-s", wrn("offsets-ctl-s.json"))},
		want:   []sent{req("GET", "/api/stream/offsets/%2F/ctl-s")},
	}, {
		name:   "list_stream_offsets_missing_stream",
		args:   []string{"list_stream_offsets", "ctl-nope", "-p", "ctl-v"},
		routes: []route{notFound404("GET", "/api/stream/offsets/ctl-v/ctl-nope")},
		want:   []sent{req("GET", "/api/stream/offsets/ctl-v/ctl-nope")},
		code:   exitDataErr,
	}, {
		name:   "reset_stream_offset",
		args:   []string{"reset_stream_offset", "ctl-s", "ctl-ref", "42"},
		routes: []route{noContent("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref", `{"offset":42}`)},
	}, {
		name:   "reset_stream_offset_zero",
		args:   []string{"reset_stream_offset", "ctl-s", "ctl-ref", "0", "-q"},
		routes: []route{noContent("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref", `{"offset":0}`)},
	}, {
		name:   "reset_stream_offset_first",
		args:   []string{"reset_stream_offset", "-p", "ctl-v", "ctl-s", "my ref", "first"},
		routes: []route{noContent("PUT", "/api/stream/offsets/ctl-v/ctl-s/my%20ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/ctl-v/ctl-s/my%20ref", `{"offset":"first"}`)},
	}, {
		name:   "reset_stream_offset_last",
		args:   []string{"reset_stream_offset", "ctl-s", "ctl-ref", "last"},
		routes: []route{noContent("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref", `{"offset":"last"}`)},
	}, {
		name:   "reset_stream_offset_timestamp_ms",
		args:   []string{"reset_stream_offset", "ctl-s", "ctl-ref", "timestamp=1714564800000"},
		routes: []route{noContent("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref", `{"timestamp":1714564800000}`)},
	}, {
		name:   "reset_stream_offset_timestamp_rfc3339",
		args:   []string{"reset_stream_offset", "ctl-s", "ctl-ref", "timestamp=2024-05-01T14:00:00.5+02:00"},
		routes: []route{noContent("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/%2F/ctl-s/ctl-ref", `{"timestamp":1714564800500}`)},
	}, {
		name: "reset_stream_offset_bad",
		args: []string{"reset_stream_offset", "ctl-s", "ctl-ref", "-1"},
		code: exitUsage,
	}, {
		name: "reset_stream_offset_bad_spec",
		args: []string{"reset_stream_offset", "ctl-s", "ctl-ref", "next"},
		code: exitUsage,
	}, {
		name:   "reset_stream_offset_missing_stream",
		args:   []string{"reset_stream_offset", "ctl-nope", "ctl-ref", "first"},
		routes: []route{notFound404("PUT", "/api/stream/offsets/%2F/ctl-nope/ctl-ref")},
		want:   []sent{withBody("PUT", "/api/stream/offsets/%2F/ctl-nope/ctl-ref", `{"offset":"first"}`)},
		code:   exitDataErr,
	}, {
		name:   "list_stream_producers",
		args:   []string{"list_stream_producers"},
		routes: []route{get("/api/stream/producers/%2F", wrn("producers-root.json"))},
		want:   []sent{req("GET", "/api/stream/producers/%2F")},
	}, {
		name:   "list_stream_producers_stream_json",
		args:   []string{"list_stream_producers", "ctl-s", "--formatter", "json"},
		routes: []route{get("/api/stream/producers/%2F/ctl-s", wrn("producers-ctl-s.json"))},
		want:   []sent{req("GET", "/api/stream/producers/%2F/ctl-s")},
	}})
}
