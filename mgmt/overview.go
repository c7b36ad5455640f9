package mgmt

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warren-mq/warren/definitions"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
	"golang.org/x/sys/unix"
)

// Version is Warren's version as the API reports it.
var Version = "0.1.0"

// managementVersion is the RabbitMQ version whose API and definitions
// format Warren follows (clients check it for features).
const managementVersion = definitions.FormatVersion

func (s *Server) registerOverview() {
	s.handle("GET", "/api/overview", accessManagement, s.overview)
	s.handle("GET", "/api/cluster-name", accessManagement, func(q *request) error {
		return q.reply(obj{"name": s.cfg.Node})
	})
	s.handle("GET", "/api/nodes", accessMonitoring, func(q *request) error {
		list := []obj{s.nodeObj()}
		for _, p := range s.peers() {
			list = append(list, peerObj(p))
		}
		return q.list(list)
	})
	s.handle("GET", "/api/nodes/{node}", accessMonitoring, func(q *request) error {
		if q.Var("node") == s.cfg.Node {
			return q.reply(s.nodeObj())
		}
		for _, p := range s.peers() {
			if p.Name == q.Var("node") {
				return q.reply(peerObj(p))
			}
		}
		return errNotFound()
	})
	// Warren's: forget_cluster_node through the API. The node must be
	// down (RabbitMQ refuses to forget a running node too) and not this
	// one.
	s.handle("DELETE", "/api/nodes/{node}", accessAdmin, func(q *request) error {
		if s.cfg.Forget == nil {
			return errBadRequest("not a cluster: there is no other node to forget")
		}
		err := s.cfg.Forget(q.r.Context(), q.Var("node"))
		switch {
		case err == nil:
			return q.noContent(false)
		case errors.Is(err, queues.ErrNotFound), errors.Is(err, queues.ErrNotApplied):
			return err
		}
		return errBadRequest(err.Error())
	})
	s.handle("GET", "/api/extensions", accessManagement, func(q *request) error { return q.reply([]obj{}) })

	ok := func(q *request) error { return q.reply(obj{"status": "ok"}) }
	// One node: the cluster's alarms are the node's.
	s.handle("GET", "/api/health/checks/alarms", accessManagement, s.alarmsCheck("There are alarms in effect in the cluster"))
	s.handle("GET", "/api/health/checks/local-alarms", accessManagement, s.alarmsCheck("There are alarms in effect on the node"))
	s.handle("GET", "/api/health/checks/node-is-quorum-critical", accessManagement, ok)
	s.handle("GET", "/api/health/checks/node-is-mirror-sync-critical", accessManagement, ok)
	s.handle("GET", "/api/health/checks/virtual-hosts", accessManagement, ok)
	s.handle("GET", "/api/health/checks/port-listener/{port}", accessManagement, s.portListener)
	s.handle("GET", "/api/health/checks/protocol-listener/{protocol}", accessManagement, s.protocolListener)
	s.handle("GET", "/api/aliveness-test/{vhost}", accessManagement, s.aliveness)
}

// peers returns the cluster's other nodes, by name.
func (s *Server) peers() []Peer {
	if s.cfg.Peers == nil {
		return nil
	}
	ps := s.cfg.Peers()
	slices.SortFunc(ps, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// peerObj is another node in /api/nodes: what this node knows of it
// (RabbitMQ shows a stopped node the same way, with running false).
func peerObj(p Peer) obj {
	return obj{"name": p.Name, "type": "disc", "running": p.Running, "being_drained": false, "partitions": []string{}}
}

// clusterState is a vhost's cluster_state: each node, running or not.
func (s *Server) clusterState() obj {
	o := obj{s.cfg.Node: "running"}
	for _, p := range s.peers() {
		if p.Running {
			o[p.Name] = "running"
		} else {
			o[p.Name] = "nodedown"
		}
	}
	return o
}

func (s *Server) listenerObjs() []obj {
	out := []obj{}
	for _, l := range s.cfg.Listeners {
		host, port := hostPort(l.Addr)
		out = append(out, obj{"node": s.cfg.Node, "protocol": l.Protocol, "ip_address": host, "port": port})
	}
	return out
}

func hostPort(a net.Addr) (string, int) {
	host, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	port, _ := strconv.Atoi(p)
	if host == "" || host == "::" {
		host = "::"
	}
	return host, port
}

func (s *Server) overview(q *request) error {
	vs, err := q.visibleVHosts()
	if err != nil {
		return err
	}
	now := s.rates.clock()
	msgRange, err := parseRange(q.r.URL.Query(), "msg_rates", now)
	if err != nil {
		return err
	}
	lenRange, err := parseRange(q.r.URL.Query(), "lengths", now)
	if err != nil {
		return err
	}
	t := &totals{}
	exchanges := 0
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	for _, v := range vs {
		vt := s.rates.vhostTotals(v.Name)
		t.add(vt.count, vt.rate)
		t.queues += vt.queues
		t.consumers += vt.consumers
		exchanges += len(s.exchangeObjs(v.Name))
	}
	qt := obj{}
	t.put(qt)
	if msgRange != nil || lenRange != nil {
		hs := s.rates.historyOfVHosts(names)
		if msgRange != nil {
			ts, rs := rangeSamples(hs, msgRange)
			putSamples(qt["message_stats"].(obj), ts, rs, msgRateFields)
		}
		if lenRange != nil {
			ts, rs := rangeSamples(hs, lenRange)
			putSamples(qt, ts, rs, lengthFields)
		}
	}
	connections, channels := s.connectionCounts(q)
	t.consumers += s.streamConsumerCount(names)
	return q.reply(obj{
		"management_version":  managementVersion,
		"rates_mode":          "basic",
		"product_name":        "Warren",
		"product_version":     Version,
		"rabbitmq_version":    managementVersion,
		"erlang_version":      runtime.Version(),
		"erlang_full_version": fmt.Sprintf("Go %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH),
		"cluster_name":        s.cfg.Node,
		"node":                s.cfg.Node,
		"statistics_db_node":  s.cfg.Node,
		"listeners":           s.listenerObjs(),
		"contexts":            []obj{{"node": s.cfg.Node, "description": "Warren Management", "path": "/", "port": strconv.Itoa(s.httpPort())}},
		"exchange_types":      exchangeTypes(),
		"message_stats":       qt["message_stats"],
		"queue_totals": obj{
			"messages": qt["messages"], "messages_details": qt["messages_details"],
			"messages_ready": qt["messages_ready"], "messages_ready_details": qt["messages_ready_details"],
			"messages_unacknowledged": qt["messages_unacknowledged"], "messages_unacknowledged_details": qt["messages_unacknowledged_details"],
		},
		"object_totals": obj{
			"connections": connections, "channels": channels, "exchanges": exchanges,
			"queues": t.queues, "consumers": t.consumers,
		},
		"sample_retention_policies": obj{"global": []int{600}, "basic": []int{600}, "detailed": []int{600}},
		"disable_stats":             false,
		"enable_queue_totals":       false,
	})
}

func (s *Server) httpPort() int {
	for _, l := range s.cfg.Listeners {
		if l.Protocol == "http" {
			_, p := hostPort(l.Addr)
			return p
		}
	}
	return 0
}

func exchangeTypes() []obj {
	types := []struct{ name, desc string }{
		{"direct", "AMQP direct exchange, as per the AMQP specification"},
		{"fanout", "AMQP fanout exchange, as per the AMQP specification"},
		{"headers", "AMQP headers exchange, as per the AMQP specification"},
		{"topic", "AMQP topic exchange, as per the AMQP specification"},
		{"x-consistent-hash", "Consistent Hashing Exchange"},
		{"x-modulus-hash", "Modulus Hashing Exchange"},
		{"x-local-random", "Picks one random local binding (queue) to route via (to)."},
	}
	out := make([]obj, len(types))
	for i, t := range types {
		out[i] = obj{"name": t.name, "description": t.desc, "enabled": true}
	}
	return out
}

func (s *Server) nodeObj() obj {
	fds := 0
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	alarms := s.b.Alarms().Active()
	o := obj{
		"name":            s.cfg.Node,
		"type":            "disc",
		"running":         true,
		"being_drained":   false,
		"uptime":          time.Since(s.start).Milliseconds(),
		"os_pid":          strconv.Itoa(os.Getpid()),
		"processors":      runtime.NumCPU(),
		"mem_used":        residentBytes(),
		"mem_alarm":       alarms&alarm.Memory != 0,
		"disk_free_alarm": alarms&alarm.Disk != 0,
		"fd_used":         fds,
		"proc_used":       runtime.NumGoroutine(),
		"run_queue":       0,
		"rates_mode":      "basic",
		"applications":    []obj{{"name": "warren", "description": "Warren message broker", "version": Version}},
		"partitions":      []string{},
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		o["fd_total"] = rl.Cur
	}
	if s.cfg.DataDir != "" {
		var st unix.Statfs_t
		if unix.Statfs(s.cfg.DataDir, &st) == nil {
			o["disk_free"] = st.Bavail * uint64(st.Bsize)
		}
	}
	// The limits once a monitor has set them (the daemon's always does).
	if r := s.b.Alarms().Readings(); r.MemLimit > 0 || r.DiskLimit > 0 {
		o["mem_limit"], o["disk_free_limit"] = r.MemLimit, r.DiskLimit
		if _, ok := o["disk_free"]; !ok {
			o["disk_free"] = r.DiskFree
		}
	}
	return o
}

// alarmsCheck answers RabbitMQ's alarm health checks: 200 {"status":
// "ok"}, or 503 with the alarms in effect, as
// rabbit_mgmt_wm_health_check_alarms does.
func (s *Server) alarmsCheck(reason string) func(q *request) error {
	return func(q *request) error {
		active := s.b.Alarms().Active()
		if active == 0 {
			return q.reply(obj{"status": "ok"})
		}
		list := []obj{}
		active.Each(func(r alarm.Resource) {
			list = append(list, obj{"resource": r.String(), "node": s.cfg.Node})
		})
		writeJSON(q.w, 503, obj{"status": "failed", "reason": reason, "alarms": list})
		return nil
	}
}

// residentBytes is the process's resident memory (RabbitMQ's mem_used is
// the VM's total), falling back to what the Go runtime holds.
func residentBytes() uint64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return pages * uint64(os.Getpagesize())
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Sys
}

func (s *Server) portListener(q *request) error {
	port, err := strconv.Atoi(q.Var("port"))
	if err != nil {
		return errBadRequest("port must be an integer")
	}
	var ports []int
	for _, l := range s.cfg.Listeners {
		_, p := hostPort(l.Addr)
		if p == port {
			return q.reply(obj{"status": "ok", "port": port})
		}
		ports = append(ports, p)
	}
	writeJSON(q.w, 503, obj{"status": "failed", "reason": fmt.Sprintf("No active listener on port %d", port), "missing": port, "ports": ports})
	return nil
}

func (s *Server) protocolListener(q *request) error {
	// A comma-separated list, each name normalised as RabbitMQ's
	// rabbit_mgmt_wm_health_check_protocol_listener does; a listener's
	// own name has a slash (amqp/ssl), which the path carries
	// percent-encoded (amqp%2Fssl) and the router decodes.
	var active, missing []string
	for _, l := range s.cfg.Listeners {
		if !slices.Contains(active, l.Protocol) {
			active = append(active, l.Protocol)
		}
	}
	for _, p := range strings.Split(q.Var("protocol"), ",") {
		p = normalizeProtocol(p)
		if !slices.Contains(active, p) && !slices.Contains(missing, p) {
			missing = append(missing, p)
		}
	}
	if active == nil {
		active = []string{}
	}
	if len(missing) == 0 {
		return q.reply(obj{"status": "ok", "protocols": active})
	}
	writeJSON(q.w, 503, obj{"status": "failed", "reason": "No active listener", "missing": missing, "protocols": active})
	return nil
}

// protocolAliases are the other names RabbitMQ's protocol-listener
// check accepts for a listener's protocol (those of the protocols
// Warren has and of those it has not, which are then missing).
var protocolAliases = map[string]string{
	"amqp091": "amqp", "amqp0.9.1": "amqp", "amqp0-9-1": "amqp", "amqp0_9_1": "amqp",
	"amqp10": "amqp", "amqp1.0": "amqp", "amqp1-0": "amqp", "amqp1_0": "amqp",
	"amqps":   "amqp/ssl",
	"mqtt3.1": "mqtt", "mqtt3.1.1": "mqtt", "mqtt31": "mqtt", "mqtt311": "mqtt", "mqtt3_1": "mqtt", "mqtt3_1_1": "mqtt",
	"mqtts": "mqtt/ssl", "mqtt+tls": "mqtt/ssl", "mqtt+ssl": "mqtt/ssl",
	"stomp1.0": "stomp", "stomp1.1": "stomp", "stomp1.2": "stomp", "stomp10": "stomp", "stomp11": "stomp", "stomp12": "stomp",
	"stomp1_0": "stomp", "stomp1_1": "stomp", "stomp1_2": "stomp",
	"stomps": "stomp/ssl", "stomp+tls": "stomp/ssl", "stomp+ssl": "stomp/ssl",
	"http1": "http", "http1.1": "http", "http_api": "http", "management": "http", "management_ui": "http", "ui": "http",
	"cli": "clustering", "distribution": "clustering",
	"cli/ssl": "clustering/ssl", "cli/tls": "clustering/ssl", "distribution/ssl": "clustering/ssl", "distribution/tls": "clustering/ssl",
	"webmqtt": "http/web-mqtt", "web-mqtt": "http/web-mqtt", "web_mqtt": "http/web-mqtt",
	"webmqtt/tls": "https/web-mqtt", "web-mqtt/tls": "https/web-mqtt", "webmqtt/ssl": "https/web-mqtt", "web-mqtt/ssl": "https/web-mqtt",
	"webmqtt+tls": "https/web-mqtt", "web-mqtt+tls": "https/web-mqtt", "webmqtt+ssl": "https/web-mqtt", "web-mqtt+ssl": "https/web-mqtt",
	"webstomp": "http/web-stomp", "web-stomp": "http/web-stomp", "web_stomp": "http/web-stomp",
	"webstomp/tls": "https/web-stomp", "web-stomp/tls": "https/web-stomp", "webstomp/ssl": "https/web-stomp", "web-stomp/ssl": "https/web-stomp",
	"webstomp+tls": "https/web-stomp", "web-stomp+tls": "https/web-stomp", "webstomp+ssl": "https/web-stomp", "web-stomp+ssl": "https/web-stomp",
}

// normalizeProtocol lowercases a protocol name and resolves its alias;
// any other name stands for itself.
func normalizeProtocol(p string) string {
	p = strings.ToLower(p)
	if a, ok := protocolAliases[p]; ok {
		return a
	}
	return p
}

// aliveness declares the queue aliveness-test in vhost, publishes a
// message to it and gets it back, as RabbitMQ's (deprecated) check.
func (s *Server) aliveness(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	const name = "aliveness-test"
	qq, _, _, err := s.b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: v, Name: name, Durable: false}, Owner: s})
	if err != nil {
		return badOr(err)
	}
	done := make(chan error, 1)
	msg := queues.Message{RoutingKey: name, Props: []byte{0, 0}, Body: []byte("test_message")}
	qq.Publish(queues.EncodeRecord(nil, &msg), false, func(err error) { done <- err })
	if err := <-done; err != nil {
		return err
	}
	var got []byte
	ok, err := qq.Get(s, true, func(d *queues.Delivery) { got = slices.Clone(d.Body) })
	if err != nil || !ok || string(got) != "test_message" {
		writeJSON(q.w, 503, obj{"status": "failed", "reason": "the test message did not come back"})
		return nil
	}
	return q.reply(obj{"status": "ok"})
}
