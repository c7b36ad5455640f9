package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefinitionVerbs(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("testdata", rmq("definitions.json")))
	if err != nil {
		t.Fatal(err)
	}
	defs := get("/api/definitions", rmq("definitions.json"))
	runCases(t, []cliCase{{
		name:   "export_definitions_stdout",
		args:   []string{"export_definitions", "-"},
		routes: []route{defs},
		want:   []sent{req("GET", "/api/definitions")},
	}, {
		name:   "export_definitions_file",
		args:   []string{"export_definitions", "$TMP/defs.json"},
		routes: []route{defs},
		want:   []sent{req("GET", "/api/definitions")},
		check: func(t *testing.T, tmp string) {
			path := filepath.Join(tmp, "defs.json")
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(fixture) {
				t.Errorf("%s holds\n%s\nwant the response\n%s", path, got, fixture)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v (%v), want 0600", path, fi.Mode(), err)
			}
		},
	}, {
		name:   "export_definitions_unwritable",
		args:   []string{"export_definitions", "$TMP/no/such/dir/defs.json"},
		routes: []route{defs},
		want:   []sent{req("GET", "/api/definitions")},
		code:   exitDataErr,
	}, {
		name:   "import_definitions_file",
		args:   []string{"import_definitions", "testdata/" + rmq("definitions.json")},
		routes: []route{noContent("POST", "/api/definitions")},
		want:   []sent{withBody("POST", "/api/definitions", string(fixture))},
	}, {
		name:   "import_definitions_stdin",
		args:   []string{"import_definitions", "-q"},
		stdin:  `{"vhosts":[{"name":"ctl-imp"}]}`,
		routes: []route{noContent("POST", "/api/definitions")},
		want:   []sent{withBody("POST", "/api/definitions", `{"vhosts":[{"name":"ctl-imp"}]}`)},
	}, {
		name:  "import_definitions_not_json",
		args:  []string{"import_definitions", "-"},
		stdin: "garbage",
		code:  exitDataErr,
	}, {
		name: "import_definitions_missing_file",
		args: []string{"import_definitions", "$TMP/nonexistent.json"},
		code: exitDataErr,
	}, {
		name:  "import_definitions_rejected",
		args:  []string{"import_definitions"},
		stdin: `{"vhosts":"not a list"}`,
		routes: []route{{method: "POST", uri: "/api/definitions", status: 400,
			file: rmq("definitions-bad.json")}},
		want: []sent{withBody("POST", "/api/definitions", `{"vhosts":"not a list"}`)},
		code: exitDataErr,
	}})
}
