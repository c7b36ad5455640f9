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
