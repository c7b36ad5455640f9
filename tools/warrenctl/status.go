package main

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// status: GET /api/overview, then GET /api/nodes/{node} for the node the
// overview names.

var statusVerb = &verb{
	name: "status", usage: "", min: 0, max: 0,
	summary: "Displays the status of the node serving the management API",
	run:     runStatus,
}

// listenerPurpose is rabbitmqctl's description of a listener protocol.
var listenerPurpose = map[string]string{
	"amqp":       "AMQP 0-9-1",
	"amqp/ssl":   "AMQP 0-9-1 over TLS",
	"clustering": "inter-node and CLI tool communication",
	"http":       "HTTP API",
	"https":      "HTTP API over TLS (HTTPS)",
	"stream":     "stream",
	"stream/ssl": "stream over TLS",
}

func runStatus(c *cmd) error {
	ov, err := c.api.get(c.ctx, apiPath("overview"))
	if err != nil {
		return err
	}
	name := ov.get("node").str()
	var node jv
	if name != "" {
		node, err = c.api.get(c.ctx, apiPath("nodes", name))
		if err != nil {
			return err
		}
	}
	if c.json {
		c.printStatusJSON(ov, node)
		return nil
	}
	c.banner("Status of node %s ...", name)

	var b strings.Builder
	// line writes a line whose values are all present.
	line := func(format string, vals ...jv) {
		args := make([]any, len(vals))
		for i, v := range vals {
			if v.kind == kMissing || v.kind == kNull {
				return
			}
			args[i] = v.str()
		}
		fmt.Fprintf(&b, format+"\n", args...)
	}
	section := func(title string) { fmt.Fprintf(&b, "\n%s\n\n", title) }
	gb := func(v jv) jv {
		f, err := strconv.ParseFloat(v.str(), 64)
		if err != nil {
			return jv{}
		}
		return jstring(secondsText(math.Round(f/1e5) / 1e4))
	}
	seconds := func(ms jv) jv {
		n, err := strconv.ParseInt(ms.str(), 10, 64)
		if err != nil {
			return jv{}
		}
		return jstring(strconv.FormatInt(n/1000, 10))
	}

	b.WriteString("Runtime\n\n")
	line("OS PID: %s", node.get("os_pid"))
	line("Uptime (seconds): %s", seconds(node.get("uptime")))
	line("Product name: %s", ov.get("product_name"))
	line("Product version: %s", ov.get("product_version"))
	line("RabbitMQ version: %s", ov.get("rabbitmq_version"))
	line("Node name: %s", ov.get("node"))
	line("Erlang configuration: %s", ov.get("erlang_full_version"))
	line("Erlang processes: %s used, %s limit", node.get("proc_used"), node.get("proc_total"))
	line("Scheduler run queue: %s", node.get("run_queue"))
	line("Cluster heartbeat timeout (net_ticktime): %s", node.get("net_ticktime"))

	if plugins := node.get("enabled_plugins"); plugins.kind == kArray {
		section("Plugins")
		b.WriteString("Enabled plugins:\n\n")
		for _, p := range plugins.vals {
			fmt.Fprintf(&b, " * %s\n", p.str())
		}
	}

	section("Alarms")
	alarms := 0
	if node.get("mem_alarm").str() == "true" {
		fmt.Fprintf(&b, "Memory alarm on node %s\n", name)
		alarms++
	}
	if node.get("disk_free_alarm").str() == "true" {
		fmt.Fprintf(&b, "Free disk space alarm on node %s\n", name)
		alarms++
	}
	if alarms == 0 {
		b.WriteString("(none)\n")
	}

	section("Memory")
	line("Total memory used: %s gb", gb(node.get("mem_used")))
	line("Memory high watermark: %s gb", gb(node.get("mem_limit")))

	section("File Descriptors")
	line("Total: %s, limit: %s", node.get("fd_used"), node.get("fd_total"))
	line("Sockets: %s, limit: %s", node.get("sockets_used"), node.get("sockets_total"))

	section("Free Disk Space")
	line("Low free disk space watermark: %s gb", gb(node.get("disk_free_limit")))
	line("Free disk space: %s gb", gb(node.get("disk_free")))

	section("Totals")
	totals := ov.get("object_totals")
	line("Connection count: %s", totals.get("connections"))
	line("Queue count: %s", totals.get("queues"))
	line("Channel count: %s", totals.get("channels"))
	line("Consumer count: %s", totals.get("consumers"))

	if ls := ov.get("listeners"); ls.kind == kArray {
		section("Listeners")
		for _, l := range ls.vals {
			fmt.Fprintf(&b, "Interface: %s\n", listenerText(l))
		}
	}
	c.printf("%s", b.String())
	return nil
}

// printStatusJSON prints one object with rabbitmqctl status' JSON names
// where the API has the same datum, and the API's own names otherwise.
func (c *cmd) printStatusJSON(ov, node jv) {
	var b bytes.Buffer
	b.WriteByte('{')
	add := func(key string, v jv) {
		if v.kind == kMissing {
			return
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(jstring(key).raw)
		b.WriteByte(':')
		b.Write(v.compact())
	}
	add("node", ov.get("node"))
	add("pid", node.get("os_pid"))
	add("product_name", ov.get("product_name"))
	add("product_version", ov.get("product_version"))
	add("rabbitmq_version", ov.get("rabbitmq_version"))
	add("erlang_version", ov.get("erlang_full_version"))
	add("uptime_ms", node.get("uptime"))
	add("run_queue", node.get("run_queue"))
	add("processes_used", node.get("proc_used"))
	add("processes_limit", node.get("proc_total"))
	add("enabled_plugins", node.get("enabled_plugins"))
	add("mem_alarm", node.get("mem_alarm"))
	add("disk_free_alarm", node.get("disk_free_alarm"))
	add("mem_used", node.get("mem_used"))
	add("vm_memory_high_watermark_limit", node.get("mem_limit"))
	add("fd_used", node.get("fd_used"))
	add("fd_total", node.get("fd_total"))
	add("sockets_used", node.get("sockets_used"))
	add("sockets_total", node.get("sockets_total"))
	add("disk_free_limit", node.get("disk_free_limit"))
	add("disk_free", node.get("disk_free"))
	add("object_totals", ov.get("object_totals"))
	add("listeners", ov.get("listeners"))
	b.WriteString("}\n")
	c.out.Write(b.Bytes())
}

// listenerText is a listener as rabbitmqctl prints it after
// "Interface: ": "<ip>, port: <port>, protocol: <p>, purpose: <what>",
// an IPv6 address in brackets.
func listenerText(l jv) string {
	ip := l.get("ip_address").str()
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	proto := l.get("protocol").str()
	purpose := listenerPurpose[proto]
	if purpose == "" {
		purpose = proto
	}
	return fmt.Sprintf("%s, port: %s, protocol: %s, purpose: %s", ip, l.get("port").str(), proto, purpose)
}
