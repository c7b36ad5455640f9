package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// cluster_status: GET /api/overview (cluster name, versions, listeners)
// and GET /api/nodes (the members, running or not, and their alarms),
// printed in rabbitmqctl cluster_status' sections.
//
// forget_cluster_node: DELETE /api/nodes/{node}, Warren's own endpoint
// (RabbitMQ's API has none: rabbitmqctl asks the node over Erlang
// distribution). The node must be stopped, and not the one the API is
// on; there is no --offline (a Warren node that is down has no API).

var forgetClusterNodeVerb = &verb{
	name: "forget_cluster_node", usage: "<existing_cluster_member_node>", min: 1, max: 1,
	summary: "Removes a node from the cluster",
	run:     runForgetClusterNode,
}

func runForgetClusterNode(c *cmd) error {
	node := c.args[0]
	c.banner("Removing node %s from the cluster", node)
	_, err := c.api.do(c.ctx, request{method: http.MethodDelete, path: apiPath("nodes", node)})
	if err != nil {
		return notFound(err, exitDataErr, "The node selected is not in the cluster.")
	}
	c.done()
	return nil
}

var clusterStatusVerb = &verb{
	name: "cluster_status", usage: "", min: 0, max: 0,
	summary: "Displays all the nodes in the cluster grouped by node type, together with the currently running nodes",
	run:     runClusterStatus,
}

// clusterView is what cluster_status prints.
type clusterView struct {
	node, name               string
	disk, running            []string
	product, version, erlang string
	cores                    map[string]string // node -> CPU cores, where the API says
	alarms                   []string          // "Memory alarm on node n1"
	partitions               []string          // running nodes that cannot reach others
	listeners                []jv
}

func runClusterStatus(c *cmd) error {
	ov, err := c.api.get(c.ctx, apiPath("overview"))
	if err != nil {
		return err
	}
	nodes, err := c.api.get(c.ctx, apiPath("nodes"))
	if err != nil {
		return err
	}
	v := clusterView{
		node: ov.get("node").str(), name: ov.get("cluster_name").str(),
		product: ov.get("product_name").str(), version: ov.get("product_version").str(), erlang: ov.get("erlang_version").str(),
		cores: map[string]string{},
	}
	if ls := ov.get("listeners"); ls.kind == kArray {
		v.listeners = ls.vals
	}
	for _, n := range nodes.vals {
		name := n.get("name").str()
		if t := n.get("type").str(); t == "disc" || t == "" {
			v.disk = append(v.disk, name)
		}
		if n.get("running").str() == "true" {
			v.running = append(v.running, name)
		}
		if p := n.get("processors"); p.kind != kMissing {
			v.cores[name] = p.str()
		}
		if n.get("mem_alarm").str() == "true" {
			v.alarms = append(v.alarms, "Memory alarm on node "+name)
		}
		if n.get("disk_free_alarm").str() == "true" {
			v.alarms = append(v.alarms, "Free disk space alarm on node "+name)
		}
		if ps := n.get("partitions"); ps.kind == kArray && len(ps.vals) > 0 {
			var peers []string
			for _, p := range ps.vals {
				peers = append(peers, p.str())
			}
			v.partitions = append(v.partitions, fmt.Sprintf("Node %s cannot communicate with %s", name, strings.Join(peers, ", ")))
		}
	}
	slices.Sort(v.disk)
	slices.Sort(v.running)
	if c.json {
		c.printClusterJSON(v)
		return nil
	}
	c.banner("Cluster status of node %s ...", v.node)
	var b strings.Builder
	section := func(title string, lines []string) {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n\n", title)
		if len(lines) == 0 {
			lines = []string{"(none)"}
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	section("Basics", []string{"Cluster name: " + v.name})
	section("Disk Nodes", v.disk)
	section("Running Nodes", v.running)
	var versions, cores, maint []string
	for _, n := range v.running {
		if n == v.node {
			// Only this node's: the API does not say the others'.
			runtime := "Erlang " + v.erlang
			if goVersion, ok := strings.CutPrefix(v.erlang, "go"); ok {
				runtime = "Go " + goVersion
			}
			versions = append(versions, fmt.Sprintf("%s: %s %s on %s", n, v.product, v.version, runtime))
		}
		if k, ok := v.cores[n]; ok {
			cores = append(cores, fmt.Sprintf("Node: %s, available CPU cores: %s", n, k))
		}
		maint = append(maint, fmt.Sprintf("Node: %s, status: not under maintenance", n))
	}
	section("Versions", versions)
	section("CPU Cores", cores)
	section("Maintenance status", maint)
	section("Alarms", v.alarms)
	section("Network Partitions", v.partitions)
	var ls []string
	for _, l := range v.listeners {
		ls = append(ls, fmt.Sprintf("Node: %s, interface: %s", l.get("node").str(), listenerText(l)))
	}
	section("Listeners", ls)
	c.printf("%s", b.String())
	return nil
}

// printClusterJSON prints the members of rabbitmqctl cluster_status
// --formatter json that the API can fill.
func (c *cmd) printClusterJSON(v clusterView) {
	nonNil := func(ss []string) []string {
		if ss == nil {
			return []string{}
		}
		return ss
	}
	ls := []json.RawMessage{}
	for _, l := range v.listeners {
		ls = append(ls, l.compact())
	}
	out, _ := json.Marshal(struct {
		ClusterName  string            `json:"cluster_name"`
		DiskNodes    []string          `json:"disk_nodes"`
		RunningNodes []string          `json:"running_nodes"`
		Alarms       []string          `json:"alarms"`
		Partitions   []string          `json:"partitions"`
		Listeners    []json.RawMessage `json:"listeners"`
	}{v.name, nonNil(v.disk), nonNil(v.running), nonNil(v.alarms), nonNil(v.partitions), ls})
	c.out.Write(append(out, '\n'))
}
