package main

import "testing"

func TestVhostVerbs(t *testing.T) {
	policyBody := `{"pattern":"^ctl-q1$","definition":{"max-length":500},"priority":3,"apply-to":"queues"}`
	runCases(t, []cliCase{{
		name: "add_vhost",
		args: []string{"add_vhost", "ctl-v3", "--description", "ctl test vhost", "--tags", "a,b",
			"--default-queue-type", "quorum"},
		routes: []route{created("PUT", "/api/vhosts/ctl-v3")},
		want: []sent{withBody("PUT", "/api/vhosts/ctl-v3",
			`{"description":"ctl test vhost","tags":"a,b","default_queue_type":"quorum"}`)},
	}, {
		name:   "add_vhost_plain_quiet",
		args:   []string{"-q", "add_vhost", "ctl v/4"},
		routes: []route{created("PUT", "/api/vhosts/ctl%20v%2F4")},
		want:   []sent{withBody("PUT", "/api/vhosts/ctl%20v%2F4", `{}`)},
	}, {
		name: "add_vhost_bad_queue_type",
		args: []string{"add_vhost", "ctl-v3", "--default-queue-type", "bogus"},
		code: exitUsage,
	}, {
		name:   "delete_vhost",
		args:   []string{"delete_vhost", "ctl-v"},
		routes: []route{noContent("DELETE", "/api/vhosts/ctl-v")},
		want:   []sent{req("DELETE", "/api/vhosts/ctl-v")},
	}, {
		name:   "delete_vhost_missing",
		args:   []string{"delete_vhost", "ctl-nope"},
		routes: []route{notFound404("DELETE", "/api/vhosts/ctl-nope")},
		want:   []sent{req("DELETE", "/api/vhosts/ctl-nope")},
		code:   exitDataErr,
	}, {
		name:   "list_vhosts",
		args:   []string{"list_vhosts"},
		routes: []route{get("/api/vhosts", rmq("vhosts.json"))},
		want:   []sent{req("GET", "/api/vhosts")},
	}, {
		name:   "list_vhosts_columns",
		args:   []string{"list_vhosts", "name", "description", "tags", "default_queue_type", "tracing", "cluster_state"},
		routes: []route{get("/api/vhosts", rmq("vhosts.json"))},
		want:   []sent{req("GET", "/api/vhosts")},
	}, {
		name:   "list_vhosts_columns_json",
		args:   []string{"list_vhosts", "name,tags,cluster_state", "--formatter", "json"},
		routes: []route{get("/api/vhosts", rmq("vhosts.json"))},
		want:   []sent{req("GET", "/api/vhosts")},
	}, {
		name:   "set_policy",
		args:   []string{"set_policy", "--priority", "3", "--apply-to", "queues", "ctl-pol", "^ctl-q1$", `{"max-length": 500}`},
		routes: []route{created("PUT", "/api/policies/%2F/ctl-pol")},
		want:   []sent{withBody("PUT", "/api/policies/%2F/ctl-pol", policyBody)},
	}, {
		name:   "set_policy_defaults",
		args:   []string{"set_policy", "-p", "ctl-v", "ctl-pol2", "^ctl-<&>", `{"max-age":"1D","queue-mode":"lazy"}`},
		routes: []route{created("PUT", "/api/policies/ctl-v/ctl-pol2")},
		want: []sent{withBody("PUT", "/api/policies/ctl-v/ctl-pol2",
			`{"pattern":"^ctl-<&>","definition":{"max-age":"1D","queue-mode":"lazy"},"priority":0,"apply-to":"all"}`)},
	}, {
		name: "set_policy_bad_definition",
		args: []string{"set_policy", "ctl-pol3", "^x", "notjson"},
		code: exitDataErr,
	}, {
		name: "set_policy_bad_priority",
		args: []string{"set_policy", "--priority", "high", "ctl-pol3", "^x", "{}"},
		code: exitUsage,
	}, {
		name: "set_policy_rejected",
		args: []string{"set_policy", "ctl-bad", "^x", `{"max-length":"x"}`, "--apply-to", "queues"},
		routes: []route{{method: "PUT", uri: "/api/policies/%2F/ctl-bad", status: 400,
			file: rmq("policy-invalid.json")}},
		want: []sent{withBody("PUT", "/api/policies/%2F/ctl-bad",
			`{"pattern":"^x","definition":{"max-length":"x"},"priority":0,"apply-to":"queues"}`)},
		code: exitDataErr,
	}, {
		name: "set_policy_missing_vhost",
		args: []string{"set_policy", "-p", "ctl-nope", "ctl-bad", "^x", `{"max-length":1}`, "--apply-to", "queues"},
		routes: []route{{method: "PUT", uri: "/api/policies/ctl-nope/ctl-bad", status: 404,
			file: rmq("vhost-not-found.json")}},
		want: []sent{withBody("PUT", "/api/policies/ctl-nope/ctl-bad",
			`{"pattern":"^x","definition":{"max-length":1},"priority":0,"apply-to":"queues"}`)},
		code: exitDataErr,
	}, {
		name:   "clear_policy",
		args:   []string{"clear_policy", "ctl-pol"},
		routes: []route{noContent("DELETE", "/api/policies/%2F/ctl-pol")},
		want:   []sent{req("DELETE", "/api/policies/%2F/ctl-pol")},
	}, {
		name:   "clear_policy_missing",
		args:   []string{"clear_policy", "ctl-nope"},
		routes: []route{notFound404("DELETE", "/api/policies/%2F/ctl-nope")},
		want:   []sent{req("DELETE", "/api/policies/%2F/ctl-nope")},
		code:   exitDataErr,
	}, {
		name:   "list_policies",
		args:   []string{"list_policies"},
		routes: []route{get("/api/policies/%2F", rmq("policies-root.json"))},
		want:   []sent{req("GET", "/api/policies/%2F")},
	}, {
		name:   "list_policies_json",
		args:   []string{"list_policies", "--formatter", "json"},
		routes: []route{get("/api/policies/%2F", rmq("policies-root.json"))},
		want:   []sent{req("GET", "/api/policies/%2F")},
	}, {
		name:   "list_policies_empty",
		args:   []string{"list_policies", "-p", "ctl-v"},
		routes: []route{emptyList("/api/policies/ctl-v")},
		want:   []sent{req("GET", "/api/policies/ctl-v")},
	}})
}
