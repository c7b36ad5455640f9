package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestClusterStatus(t *testing.T) {
	node, err := os.ReadFile(filepath.Join("testdata", rmq("node.json")))
	if err != nil {
		t.Fatal(err)
	}
	single := []route{
		get("/api/overview", rmq("overview.json")),
		{method: "GET", uri: "/api/nodes", status: 200, body: "[" + string(node) + "]"},
	}
	three := []route{
		get("/api/overview", rmq("overview.json")),
		get("/api/nodes", "warren/nodes-cluster.json"),
	}
	want := []sent{req("GET", "/api/overview"), req("GET", "/api/nodes")}
	runCases(t, []cliCase{{
		name: "cluster_status_single", args: []string{"cluster_status"}, routes: single, want: want,
	}, {
		name: "cluster_status_three", args: []string{"cluster_status"}, routes: three, want: want,
	}, {
		name: "cluster_status_json", args: []string{"cluster_status", "--formatter", "json"}, routes: three, want: want,
	}})
}

func TestForgetClusterNode(t *testing.T) {
	del := func(node string) []sent { return []sent{req("DELETE", "/api/nodes/"+node)} }
	runCases(t, []cliCase{{
		name: "forget_cluster_node", args: []string{"forget_cluster_node", "n3"},
		routes: []route{{method: "DELETE", uri: "/api/nodes/n3", status: 204}}, want: del("n3"),
	}, {
		name: "forget_cluster_node_running", args: []string{"forget_cluster_node", "n2"}, code: exitDataErr,
		routes: []route{{method: "DELETE", uri: "/api/nodes/n2", status: 400,
			body: `{"error":"bad_request","reason":"cluster: node is running: Warren on node n2 must be stopped before it can be removed (n1 reaches it)"}`}},
		want: del("n2"),
	}, {
		name: "forget_cluster_node_unknown", args: []string{"forget_cluster_node", "n9"}, code: exitDataErr,
		routes: []route{{method: "DELETE", uri: "/api/nodes/n9", status: 404, body: `{"error":"Object Not Found","reason":"Not Found"}`}},
		want:   del("n9"),
	}, {
		name: "forget_cluster_node_json", args: []string{"forget_cluster_node", "--formatter", "json", "n3"},
		routes: []route{{method: "DELETE", uri: "/api/nodes/n3", status: 204}}, want: del("n3"),
	}, {
		name: "forget_cluster_node_offline", args: []string{"forget_cluster_node", "--offline", "n3"}, code: exitUsage,
	}})
}
