package main

import "testing"

func TestTableText(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`"ctl-q1"`, "ctl-q1"},
		{`3`, "3"},
		{`0.0`, "0.0"},
		{`true`, "true"},
		{`null`, ""},
		{`[]`, "[]"},
		{`["monitoring","management"]`, "[monitoring, management]"},
		{`{}`, "[]"},
		{`{"x-queue-type":"quorum","x-max-length":1000}`, `[{"x-queue-type","quorum"},{"x-max-length",1000}]`},
		{`{"capabilities":{"basic.nack":true},"n":null,"l":[1,"a"]}`, `[{"capabilities",[{"basic.nack",true}]},{"n",undefined},{"l",[1,"a"]}]`},
		{`[{"a":1},{"b":"c"}]`, `[[{"a",1}], [{"b","c"}]]`},
		{` { "k" : "v\"w\u00e9" } `, `[{"k","v"wé"}]`},
	} {
		v, err := parseJSON([]byte(tc.json))
		if err != nil {
			t.Errorf("parseJSON(%s): %v", tc.json, err)
			continue
		}
		if got := tableText(v); got != tc.want {
			t.Errorf("tableText(%s) = %s, want %s", tc.json, got, tc.want)
		}
	}
}

func TestCompactKeepsOrderAndNumbers(t *testing.T) {
	const in = "{ \"z\": 1.50, \"a\": [ 1e3, \"<&>\" ] }"
	v, err := parseJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(v.compact()), `{"z":1.50,"a":[1e3,"<&>"]}`; got != want {
		t.Errorf("compact = %s, want %s", got, want)
	}
	if got := v.path("a").vals[1].s; got != "<&>" {
		t.Errorf("string = %q", got)
	}
}

func TestParseInformationUnit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1000", 1000, true},
		{"20gb", 20_000_000_000, true},
		{"500MB", 500_000_000, true},
		{"1k", 1000, true},
		{"1GiB", 1 << 30, true},
		{"2Ki", 2048, true},
		{"1PiB", 1 << 50, true},
		{"", 0, false},
		{"1.5gb", 0, false},
		{"10 gb", 0, false},
		{"10xb", 0, false},
		{"99999999999pb", 0, false},
	} {
		got, ok := parseInformationUnit(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseInformationUnit(%q) = %d, %v, want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseMaxAge(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"PT10M30S", "630s", true},
		{"P5DT8H", "460800s", true},
		{"P1Y2M", "36720000s", true},
		{"PT1.5S", "1s", true},
		{"7D", "7D", true},
		{"12h", "12h", true},
		{"P", "", false},
		{"PT", "", false},
		{"P1DT", "", false},
		{"10 minutes", "", false},
		{"1w", "", false},
	} {
		got, ok := parseMaxAge(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseMaxAge(%q) = %q, %v, want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
