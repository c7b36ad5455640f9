// Package mgmt is Warren's management HTTP API: RabbitMQ's paths, JSON
// field names, status codes and error bodies ({"error": ..., "reason":
// ...}) on port 15672, so rabbitmqadmin, monitoring scripts, the
// Terraform provider and client test suites that set up vhosts and users
// through the API work against Warren.
//
// Authentication is HTTP basic against the broker's users. A user needs
// one of RabbitMQ's management tags: management (sees the virtual hosts
// it has permissions in and its own connections), policymaker (also sets
// policies there), monitoring (sees every virtual host and connection),
// administrator (everything: users, virtual hosts, permissions,
// definitions). Objects are built from the model on each request; rates
// come from a sampler that reads every queue's counters every 5 seconds
// (stats.go), so the publish and deliver paths only count.
//
// Beyond RabbitMQ: super streams (PUT/DELETE /api/stream/super-streams/
// {vhost}/{name}, as rabbitmq_stream_management 3.13+), stored consumer
// offsets listed and reset (/api/stream/offsets), named producers with
// their last publishing id and duplicates (/api/stream/producers),
// single-active-consumer groups (/api/stream/consumer-groups), and a
// stream's offsets, segments and size under "stream" in its queue object.
//
// The same listener serves the web console (package mgmt/console) at "/":
// every path outside /api/ is one of its files, so an unknown /api/ path
// is still the API's JSON 404.
package mgmt
