package erlterm

import "testing"

// Ensure floats print as Erlang prints them: always a fraction, no "+"
// and no leading zeros in the exponent.
func TestFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{1.5, "1.5"}, {100, "100.0"}, {-2, "-2.0"}, {0, "0.0"},
		{1e20, "1.0e20"}, {1.2345678901234568e20, "1.2345678901234568e20"}, {1e-7, "1.0e-7"},
	} {
		if got := Float(tc.f); got != tc.want {
			t.Errorf("Float(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}
