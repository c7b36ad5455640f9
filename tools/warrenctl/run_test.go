package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestStatus(t *testing.T) {
	status := []route{
		get("/api/overview", rmq("overview.json")),
		get("/api/nodes/warrenbench@localhost", rmq("node.json")),
	}
	want := []sent{req("GET", "/api/overview"), req("GET", "/api/nodes/warrenbench@localhost")}
	runCases(t, []cliCase{{
		name: "status", args: []string{"status"}, routes: status, want: want,
	}, {
		name: "status_quiet", args: []string{"-q", "status"}, routes: status, want: want,
	}, {
		name: "status_json", args: []string{"status", "--formatter", "json"}, routes: status, want: want,
	}})
}

// TestErrors covers what any verb can run into.
func TestErrors(t *testing.T) {
	queues := req("GET", "/api/queues/%2F")
	fail := func(status int, body string) []route {
		return []route{{method: "GET", uri: "/api/queues/%2F", status: status, body: body}}
	}
	runCases(t, []cliCase{{
		name: "login_failed",
		args: []string{"list_queues", "--password", "wrong"},
		auth: "guest:wrong",
		routes: []route{{method: "GET", uri: "/api/queues/%2F", status: 401,
			file: rmq("login-failed.json")}},
		want: []sent{queues},
		code: exitUnavailable,
	}, {
		name:   "access_refused",
		args:   []string{"list_queues", "--user", "ctl-user", "--password", "n3w"},
		auth:   "ctl-user:n3w",
		routes: fail(403, `{"error":"not_authorised","reason":"Access refused."}`),
		want:   []sent{queues},
		code:   exitUnavailable,
	}, {
		name:   "server_error",
		args:   []string{"list_queues"},
		routes: fail(500, `{"error":"internal_server_error","reason":"boom"}`),
		want:   []sent{queues},
		code:   exitSoftware,
	}, {
		name:   "server_error_not_json",
		args:   []string{"list_queues"},
		routes: fail(502, "<html>Bad Gateway</html>"),
		want:   []sent{queues},
		code:   exitSoftware,
	}, {
		name:   "unavailable",
		args:   []string{"list_queues"},
		routes: fail(503, ""),
		want:   []sent{queues},
		code:   exitUnavailable,
	}, {
		name:   "method_not_allowed",
		args:   []string{"add_super_stream", "ctl-ss"},
		routes: []route{{method: "PUT", uri: "/api/stream/super-streams/%2F/ctl-ss", status: 405}},
		want:   []sent{withBody("PUT", "/api/stream/super-streams/%2F/ctl-ss", `{"partitions":3}`)},
		code:   exitDataErr,
	}, {
		name:   "response_not_json",
		args:   []string{"list_queues"},
		routes: fail(200, "<html>this is not the management API</html>"),
		want:   []sent{queues},
		code:   exitSoftware,
	}, {
		name:   "response_not_a_list",
		args:   []string{"list_queues"},
		routes: fail(200, `{"name":"ctl-q1"}`),
		want:   []sent{queues},
		code:   exitSoftware,
	}, {
		name:   "env_url_and_credentials",
		args:   []string{"list_vhosts"},
		env:    map[string]string{"WARRENCTL_URL": "$URL/", "WARRENCTL_USER": "ctl-user", "WARRENCTL_PASSWORD": "n3w"},
		auth:   "ctl-user:n3w",
		routes: []route{get("/api/vhosts", rmq("vhosts.json"))},
		want:   []sent{req("GET", "/api/vhosts")},
	}, {
		name:   "flags_override_env",
		args:   []string{"list_vhosts", "--username", "guest"},
		env:    map[string]string{"WARRENCTL_USER": "ctl-user", "WARRENCTL_PASSWORD": "guest"},
		routes: []route{get("/api/vhosts", rmq("vhosts.json"))},
		want:   []sent{req("GET", "/api/vhosts")},
	}, {
		name: "unknown_verb",
		args: []string{"list_queus"},
		code: exitUsage,
	}, {
		name: "no_verb",
		args: []string{"-q"},
		code: exitUsage,
	}, {
		name: "help",
		args: []string{"help"},
	}, {
		name: "help_verb",
		args: []string{"help", "list_exchanges"},
	}, {
		name: "verb_help_option",
		args: []string{"delete_queue", "--help"},
	}, {
		name: "bad_formatter",
		args: []string{"list_queues", "--formatter", "pretty_table"},
		code: exitUsage,
	}, {
		name: "bad_timeout",
		args: []string{"list_queues", "-t", "soon"},
		code: exitUsage,
	}, {
		name: "option_needs_value",
		args: []string{"list_queues", "-p"},
		code: exitUsage,
	}, {
		name: "switch_takes_no_value",
		args: []string{"list_queues", "--quiet=yes"},
		code: exitUsage,
	}, {
		name: "bad_url",
		args: []string{"--url", "localhost:15672", "list_queues"},
		code: exitUsage,
	}})
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	args := []string{"--url", url, "list_queues"}
	code, stdout, stderr := runCLI(context.Background(), args, "", Env{})
	if code != exitUnavailable {
		t.Errorf("exit code %d, want %d", code, exitUnavailable)
	}
	checkGolden(t, "unreachable", []string{"--url", "$URL", "list_queues"}, code, stdout, stderr,
		map[string]string{url: "$URL", url[len("http://"):]: "$HOST"})
}

func TestTimeout(t *testing.T) {
	// The handler answers only when the client gives up.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	args := []string{"--url", srv.URL, "-t", "0.05", "list_queues"}
	code, stdout, stderr := runCLI(context.Background(), args, "", Env{})
	if code != exitTempFail {
		t.Errorf("exit code %d, want %d", code, exitTempFail)
	}
	checkGolden(t, "timeout", []string{"--url", "$URL", "-t", "0.05", "list_queues"}, code, stdout, stderr,
		map[string]string{srv.URL: "$URL"})
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		verb   string
		pos    []string
		global map[string]string
		opts   map[string]string
	}{
		{
			args:   []string{"-p", "v", "delete_queue", "q", "-e", "--if-unused=true"},
			verb:   "delete_queue",
			pos:    []string{"q"},
			global: map[string]string{"vhost": "v"},
			opts:   map[string]string{"if-empty": "", "if-unused": ""},
		},
		{
			args:   []string{"list_queues", "--vhost=a=b", "name", "--", "-q"},
			verb:   "list_queues",
			pos:    []string{"name", "-q"},
			global: map[string]string{"vhost": "a=b"},
			opts:   map[string]string{},
		},
		{
			args:   []string{"import_definitions", "-", "--quiet=false"},
			verb:   "import_definitions",
			pos:    []string{"-"},
			global: map[string]string{},
			opts:   map[string]string{},
		},
	} {
		p, err := parseArgs(tc.args)
		if err != nil {
			t.Errorf("parseArgs(%q): %v", tc.args, err)
			continue
		}
		if p.verbName != tc.verb || !reflect.DeepEqual(p.args, tc.pos) ||
			!reflect.DeepEqual(p.global, tc.global) || !reflect.DeepEqual(p.opts, tc.opts) {
			t.Errorf("parseArgs(%q) = verb %q args %q global %v opts %v, want %q %q %v %v",
				tc.args, p.verbName, p.args, p.global, p.opts, tc.verb, tc.pos, tc.global, tc.opts)
		}
	}
}
