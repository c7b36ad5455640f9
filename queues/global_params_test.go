package queues

import (
	"encoding/json"
	"errors"
	"testing"
)

// Ensure global parameters are stored as JSON values, listed by name,
// survive a restart and are cleared.
func TestGlobalParameters(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	if err := b.SetGlobalParameter("cluster_name", json.RawMessage(`"rabbit@east"`)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetGlobalParameter("extra", json.RawMessage(`{"a":[1,2]}`)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name  string
		value string
	}{{"", `1`}, {"x", `{`}, {"x", ``}} {
		if err := b.SetGlobalParameter(bad.name, json.RawMessage(bad.value)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SetGlobalParameter(%q, %q) = %v, want ErrInvalidArgument", bad.name, bad.value, err)
		}
	}
	b.Close()
	b = openBroker(t, dir)
	defer b.Close()
	ps, err := b.GlobalParameters()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "cluster_name" || string(ps[0].Value) != `"rabbit@east"` ||
		ps[1].Name != "extra" || string(ps[1].Value) != `{"a":[1,2]}` {
		t.Fatalf("GlobalParameters = %s", mustJSON(t, ps))
	}
	if v, err := b.GetGlobalParameter("cluster_name"); err != nil || string(v) != `"rabbit@east"` {
		t.Fatalf("GetGlobalParameter = %s, %v", v, err)
	}
	if err := b.ClearGlobalParameter("extra"); err != nil {
		t.Fatal(err)
	}
	if err := b.ClearGlobalParameter("extra"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second clear: %v, want ErrNotFound", err)
	}
	if _, err := b.GetGlobalParameter("extra"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cleared parameter: %v, want ErrNotFound", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
