package prom_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// The metrics RabbitMQ's Grafana dashboards "RabbitMQ-Overview" and
// "RabbitMQ-Stream" query (rabbitmq-server,
// deps/rabbitmq_prometheus/docker/grafana/dashboards), every panel's
// expression read for its metric names. Each query joins on
// rabbitmq_identity_info.
var dashboardMetrics = []string{
	// RabbitMQ-Overview
	"rabbitmq_build_info",
	"rabbitmq_resident_memory_limit_bytes",
	"rabbitmq_disk_space_available_limit_bytes",
	"rabbitmq_identity_info",
	"rabbitmq_channels",
	"rabbitmq_channels_closed_total",
	"rabbitmq_channels_opened_total",
	"rabbitmq_connections",
	"rabbitmq_connections_closed_total",
	"rabbitmq_connections_opened_total",
	"rabbitmq_disk_space_available_bytes",
	"rabbitmq_erlang_uptime_seconds",
	"rabbitmq_global_consumers",
	"rabbitmq_global_messages_acknowledged_total",
	"rabbitmq_global_messages_confirmed_total",
	"rabbitmq_global_messages_delivered_consume_auto_ack_total",
	"rabbitmq_global_messages_delivered_consume_manual_ack_total",
	"rabbitmq_global_messages_delivered_get_auto_ack_total",
	"rabbitmq_global_messages_delivered_get_manual_ack_total",
	"rabbitmq_global_messages_delivered_total",
	"rabbitmq_global_messages_get_empty_total",
	"rabbitmq_global_messages_received_confirm_total",
	"rabbitmq_global_messages_received_total",
	"rabbitmq_global_messages_redelivered_total",
	"rabbitmq_global_messages_routed_total",
	"rabbitmq_global_messages_unroutable_dropped_total",
	"rabbitmq_global_messages_unroutable_returned_total",
	"rabbitmq_global_publishers",
	"rabbitmq_message_size_bytes",
	"rabbitmq_process_max_fds",
	"rabbitmq_process_open_fds",
	"rabbitmq_process_resident_memory_bytes",
	"rabbitmq_queue_messages_ready",
	"rabbitmq_queue_messages_unacked",
	"rabbitmq_queues",
	"rabbitmq_queues_created_total",
	"rabbitmq_queues_declared_total",
	"rabbitmq_queues_deleted_total",
	// RabbitMQ-Stream
	"rabbitmq_global_stream_error_access_refused_total",
	"rabbitmq_global_stream_error_authentication_failure_total",
	"rabbitmq_global_stream_error_frame_too_large_total",
	"rabbitmq_global_stream_error_internal_error_total",
	"rabbitmq_global_stream_error_precondition_failed_total",
	"rabbitmq_global_stream_error_publisher_does_not_exist_total",
	"rabbitmq_global_stream_error_sasl_authentication_failure_loopback_total",
	"rabbitmq_global_stream_error_sasl_challenge_total",
	"rabbitmq_global_stream_error_sasl_error_total",
	"rabbitmq_global_stream_error_sasl_mechanism_not_supported_total",
	"rabbitmq_global_stream_error_stream_already_exists_total",
	"rabbitmq_global_stream_error_stream_does_not_exist_total",
	"rabbitmq_global_stream_error_stream_not_available_total",
	"rabbitmq_global_stream_error_subscription_id_already_exists_total",
	"rabbitmq_global_stream_error_subscription_id_does_not_exist_total",
	"rabbitmq_global_stream_error_unknown_frame_total",
	"rabbitmq_global_stream_error_vhost_access_failure_total",
}

// Ensure every metric the dashboards query is in /metrics, with the
// labels their queries select on (protocol for the global counters), so
// that their panels show data.
func TestDashboardMetricsPresent(t *testing.T) {
	tb := mgmttest.Start(t)
	conn, err := amqp091.Dial(amqpURL(tb))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s := scrapeURL(t, tb.MetricsURL+"/metrics")
	for _, name := range dashboardMetrics {
		f := s[name]
		if f == nil || len(f.Metric) == 0 {
			t.Errorf("%s missing", name)
			continue
		}
		if len(name) > len("rabbitmq_global_") && name[:len("rabbitmq_global_")] == "rabbitmq_global_" {
			hasProto := false
			for _, l := range f.Metric[0].Label {
				hasProto = hasProto || l.GetName() == "protocol"
			}
			if !hasProto {
				t.Errorf("%s has no protocol label", name)
			}
		}
	}
	if s.value(t, "rabbitmq_connections") != 1 {
		t.Errorf("connections %v", s.value(t, "rabbitmq_connections"))
	}
}
