package sasl

import (
	"errors"
	"slices"
	"testing"
)

func TestOffered(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		tls  bool
		want []string
	}{
		{"defaults", Config{}, false, []string{"PLAIN", "AMQPLAIN", "ANONYMOUS"}},
		{"defaults over TLS", Config{}, true, []string{"PLAIN", "AMQPLAIN", "ANONYMOUS"}},
		{"anonymous off", Config{AnonymousUser: "none"}, false, []string{"PLAIN", "AMQPLAIN"}},
		{"external plain", Config{Mechanisms: []string{"EXTERNAL", "PLAIN"}}, false, []string{"PLAIN"}},
		{"external plain over TLS", Config{Mechanisms: []string{"EXTERNAL", "PLAIN"}}, true, []string{"EXTERNAL", "PLAIN"}},
		{"duplicates once", Config{Mechanisms: []string{"AMQPLAIN", "AMQPLAIN"}}, false, []string{"AMQPLAIN"}},
	} {
		if got := tc.cfg.Offered(tc.tls); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	cfg := Config{Mechanisms: []string{"PLAIN"}}
	for _, tc := range []struct {
		mech string
		want error
	}{{"PLAIN", nil}, {"AMQPLAIN", ErrNotOffered}, {"EXTERNAL", ErrNotOffered}, {"SCRAM-SHA-256", ErrUnknown}} {
		if got := cfg.Check(tc.mech, true); !errors.Is(got, tc.want) {
			t.Errorf("Check(%s): got %v, want %v", tc.mech, got, tc.want)
		}
	}
	if err := ParseMechanism("RABBIT-CR-DEMO"); err == nil {
		t.Error("ParseMechanism(RABBIT-CR-DEMO): no error")
	}
}

func TestAnonymousCredentials(t *testing.T) {
	if u, p, ok := (Config{}).AnonymousCredentials(); u != "guest" || p != "guest" || !ok {
		t.Errorf("defaults: got %q %q %v, want guest guest true", u, p, ok)
	}
	if u, p, ok := (Config{AnonymousUser: "bob", AnonymousPass: "s3"}).AnonymousCredentials(); u != "bob" || p != "s3" || !ok {
		t.Errorf("bob: got %q %q %v", u, p, ok)
	}
	if _, _, ok := (Config{AnonymousUser: "none"}).AnonymousCredentials(); ok {
		t.Error("none: ok")
	}
}
