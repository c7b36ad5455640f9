package definitions

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/superstream"
)

// TestWriteExportForRabbitMQ writes an export of Warren for
// testdata/rabbitmq-fixture.sh check-export, which imports it into a
// RabbitMQ and compares what that RabbitMQ then exports. It runs only
// with WARREN_DEFS_EXPORT set to the file to write. Every entity but
// guest and / is named defs-*: the fixture imported, and what only
// Warren makes (a vhost with metadata, a default queue type and limits,
// a user hashed by Warren, user limits, arguments of many AMQP types, a
// super stream made by the stream protocol's manager, an
// exchange-to-exchange binding from amq.direct).
func TestWriteExportForRabbitMQ(t *testing.T) {
	path := os.Getenv("WARREN_DEFS_EXPORT")
	if path == "" {
		t.Skip("WARREN_DEFS_EXPORT is not set")
	}
	b := openBroker(t)
	importFile(t, b, fixtureHTTP)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	defsW := queues.VHost{Name: "defs-w", Description: "made by Warren", Tags: []string{"w1", "w2"}, Limits: map[string]int64{"max-queues": 9}}
	_, err := b.PutVHost(defsW)
	must(err)
	must(b.AddUser("defs-zed", "zed-secret", "management"))
	must(b.PutUser(queues.User{Name: "defs-lim", Tags: []string{}, Limits: map[string]int64{"max-connections": 2}}))
	must(b.SetPermissions("guest", "defs-w", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
	must(b.SetPermissions("defs-zed", "defs-w", queues.Permissions{Configure: "^zed", Write: ".*", Read: ""}))
	must(b.SetGlobalParameter("defs-gp", json.RawMessage(`{"a":[1,2.5,"x"]}`)))
	decl := func(def queues.QueueDef) {
		t.Helper()
		_, _, _, err := b.DeclareQueue(queues.DeclareOptions{Def: def})
		must(err)
	}
	decl(queues.QueueDef{VHost: "defs-w", Name: "defs-w-classic", Durable: true,
		Args: map[string]any{"x-queue-type": "classic", "x-message-ttl": int32(1500), "x-max-length": int8(3)}})
	decl(queues.QueueDef{VHost: "defs-w", Name: "defs-w-untyped", Durable: true}) // classic, before the vhost's default
	defsW.DefaultQueueType = "quorum"
	_, err = b.PutVHost(defsW)
	must(err)
	decl(queues.QueueDef{VHost: "defs-w", Name: "defs-w-by-default", Durable: true}) // quorum
	decl(queues.QueueDef{VHost: "defs-w", Name: "defs-w-quorum", Durable: true, Args: map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(4)}})
	decl(queues.QueueDef{VHost: "defs-w", Name: "defs-w-autodel", AutoDelete: true})
	must(b.DeclareExchange(queues.ExchangeDef{VHost: "defs-w", Name: "defs-w-headers", Type: queues.ExchangeHeaders, Durable: true,
		Args: map[string]any{"x-weight": 1.5, "x-bytes": []byte("raw"), "x-nested": map[string]any{"a": []any{int8(1), "two", true}}}}))
	must(b.Bind(queues.BindingDef{VHost: "defs-w", Source: "defs-w-headers", Dest: "defs-w-quorum",
		Args: map[string]any{"x-match": "all", "ratio": 0.25, "n": int16(7)}}))
	must(b.Bind(queues.BindingDef{VHost: "defs-w", Source: "amq.direct", DestKind: queues.DestExchange, Dest: "defs-w-headers", Key: "e2e"}))
	must(b.SetTopicPermission(queues.TopicPermission{User: "defs-zed", VHost: "defs-w", Exchange: "amq.topic", Write: `^zed\.`, Read: ""}))
	must(superstream.NewManager(b).Create("guest", "defs-w", "defs-w-ss", []string{"defs-w-ss-eu", "defs-w-ss-us"}, []string{"eu", "us"},
		map[string]string{"max-length-bytes": "1000000", "max-age": "2h"}))
	if err := os.WriteFile(path, []byte(exportJSON(t, b, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}
