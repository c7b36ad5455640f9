package rabbitconf

import "testing"

// Ensure Schema knows RabbitMQ's keys, with $ segments matching any
// segment, and nothing else.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		key, app string
	}{
		{"listeners.tcp.default", "rabbit"},
		{"listeners.tcp", "rabbit"},
		{"vm_memory_high_watermark.relative", "rabbit"},
		{"disk_free_limit.absolute", "rabbit"},
		{"cluster_formation.peer_discovery_backend", "rabbit"},
		{"cluster_formation.classic_config.nodes.1", "rabbit"},
		{"ssl_options.cacertfile", "rabbit"}, // from the ssl_options partial
		{"ssl_options", "rabbit"},
		{"ssl_options.versions.1", "rabbit"},
		{"tcp_listen_options.backlog", "rabbit"},
		{"channel_max", "rabbit"}, // an alias
		{`loopback_users.john\.doe`, "rabbit"},
		{"collect_statistics_interval", "rabbit"},
		{"deprecated_features.permit.global_qos", "rabbit"},
		{"management.load_definitions", "rabbitmq_management"},
		{"management.tcp.port", "rabbitmq_management"},
		{"stream.advertised_host", "rabbitmq_stream"},
		{"stream.tcp_listen_options.nodelay", "rabbitmq_stream"},
		{"mqtt.listeners.tcp.default", "rabbitmq_mqtt"},
		{"cluster_formation.etcd.ssl_options.verify", "rabbitmq_peer_discovery_etcd"},
		{"prometheus.tcp.port", "rabbitmq_prometheus"},
		{"foo.bar", ""},
		{"listeners.tcp.default.extra", ""},
		{"listeners", ""},
		{"cluster_formation.etcd.ssl_options.dhfile", ""}, // excluded from that partial
		{"warren.data_dir", ""},
		{"Heartbeat", ""},
	} {
		app, ok := Schema(tc.key)
		if app != tc.app || ok != (tc.app != "") {
			t.Errorf("Schema(%q) = %q, %v; want %q", tc.key, app, ok, tc.app)
		}
	}
	if n := len(schemaKeys()); n < 1000 {
		t.Fatalf("%d keys read from rabbitmq_keys.txt", n)
	}
}

// Ensure Match compares segments, escaped dots inside one.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, key string
		want         bool
	}{
		{"heartbeat", "heartbeat", true},
		{"listeners.tcp.$name", "listeners.tcp.default", true},
		{"listeners.tcp.$name", "listeners.tcp", false},
		{"listeners.tcp.$name", "listeners.tcp.a.b", false},
		{"loopback_users.$user", `loopback_users.john\.doe`, true},
		{"a.b", `a\.b`, false},
	} {
		if got := Match(tc.pattern, tc.key); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.key, got, tc.want)
		}
	}
}
