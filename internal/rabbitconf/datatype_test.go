package rabbitconf

import (
	"strings"
	"testing"
)

// Ensure booleans are exactly true and false, as cuttlefish's boolean.
func TestParseBool(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
		ok   bool
	}{
		{"true", true, true}, {"false", false, true},
		{"True", false, false}, {"on", false, false}, {"yes", false, false}, {"1", false, false}, {"", false, false},
	} {
		got, err := ParseBool(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseBool(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// Ensure integers and sizes take cuttlefish's forms.
func TestParseIntAndBytesize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"+5", 5, true}, {"-5", -5, true}, {"007", 7, true},
		{"1.5", 0, false}, {"1e3", 0, false}, {"0x10", 0, false}, {"1_000", 0, false}, {" 1", 0, false}, {"", 0, false},
	} {
		got, err := ParseInt(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseInt(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"131072", 131072, true}, {"128KB", 128 << 10, true}, {"128kb", 128 << 10, true},
		{"1MB", 1 << 20, true}, {"2mb", 2 << 20, true}, {"1GB", 1 << 30, true}, {"3gb", 3 << 30, true},
		{"1Kb", 0, false}, {"1.5MB", 0, false}, {"KB", 0, false}, {"1 KB", 0, false}, {"1TB", 0, false},
		{"9223372036854775807GB", 0, false},
	} {
		got, err := ParseBytesize(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseBytesize(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// Ensure listener values are a port or an IP address and port, as
// RabbitMQ's listener keys take them, and become net.Listen addresses.
func TestParseListener(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		errHas   string
	}{
		{"5672", ":5672", ""},
		{"127.0.0.1:5672", "127.0.0.1:5672", ""},
		{"0.0.0.0:5673", "0.0.0.0:5673", ""},
		{"::1:5672", "[::1]:5672", ""},
		{":::5672", "[::]:5672", ""},
		{"fe80::1%eth0:5672", "[fe80::1%eth0]:5672", ""},
		{"0", "", "out of range"},
		{"65536", "", "out of range"},
		{"-1", "", "out of range"},
		{"abc", "", "not a port"},
		{"127.0.0.1:0", "", "out of range"},
		{"127.0.0.1:99999", "", "out of range"},
		{"localhost:5672", "", "no host name"},
		{"[::1]:5672", "", "no brackets"},
		{":5672", "", "not an IP address"},
		{"127.0.0.1:", "", "not a port"},
		{"unix:/var/run/rabbitmq.sock:0", "", "Unix domain sockets"},
		{"local:/var/run/rabbitmq.sock:0", "", "Unix domain sockets"},
	} {
		got, err := ParseListener(tc.in)
		if tc.errHas == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParseListener(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("ParseListener(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.errHas)
		}
	}
}

// Ensure information units are read as RabbitMQ's
// parse_information_unit reads them: binary for the i forms, decimal
// (as Kubernetes) for the others, and only its spellings.
func TestParseInformationUnit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"50000000", 50_000_000, true}, {"0", 0, true},
		{"50MB", 50_000_000, true}, {"50mb", 50_000_000, true}, {"50Mb", 50_000_000, true}, {"50M", 50_000_000, true}, {"50m", 50_000_000, true},
		{"500kB", 500_000, true}, {"500k", 500_000, true}, {"500K", 500_000, true},
		{"2GB", 2_000_000_000, true}, {"2G", 2_000_000_000, true}, {"2TB", 2_000_000_000_000, true}, {"1P", 1e15, true},
		{"1024MiB", 1 << 30, true}, {"1024Mi", 1 << 30, true}, {"1024mib", 1 << 30, true}, {"1024MIB", 1 << 30, true},
		{"8ki", 8 << 10, true}, {"8kiB", 8 << 10, true}, {"2GiB", 2 << 30, true}, {"2TiB", 2 << 40, true}, {"1PiB", 1 << 50, true},
		{"1mi", 0, false}, {"2T", 0, false}, {"2t", 0, false}, {"1.5GB", 0, false}, {"-1", 0, false}, {"", 0, false},
		{"GB", 0, false}, {"10 GB", 0, false}, {"10GBs", 0, false}, {"99999999999PB", 0, false},
	} {
		got, err := ParseInformationUnit(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseInformationUnit(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// Ensure floats are decimal numbers, not Go's other spellings.
func TestParseFloat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.4", 0.4, true}, {"1", 1, true}, {"1.0", 1, true}, {"-2.5", -2.5, true},
		{"NaN", 0, false}, {"inf", 0, false}, {"0x1p-2", 0, false}, {"1_0", 0, false}, {"", 0, false}, {"high", 0, false},
	} {
		got, err := ParseFloat(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseFloat(%q) = %g, %v; want %g, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
