package rabbitconf

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ParseBool reads cuttlefish's boolean: exactly "true" or "false" (not
// "on", "yes", "1" or "True").
func ParseBool(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", v)
}

// ParseInt reads cuttlefish's integer (Erlang's list_to_integer): decimal
// digits with an optional sign.
func ParseInt(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", v)
	}
	return n, nil
}

// ParseBytesize reads cuttlefish's bytesize: an integer number of bytes,
// or of KB, MB or GB (powers of 1024; the suffix in upper or lower case,
// not mixed). Cuttlefish also takes fractions ("1.5MB"), which RabbitMQ's
// integer settings then refuse; ParseBytesize refuses them.
func ParseBytesize(v string) (int64, error) {
	num, mult := v, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KB", 1 << 10}, {"kb", 1 << 10}, {"MB", 1 << 20}, {"mb", 1 << 20}, {"GB", 1 << 30}, {"gb", 1 << 30}} {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = s, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<63-1)/mult || n < -(1<<63-1)/mult {
		return 0, fmt.Errorf("%q is not a size (an integer number of bytes, or with KB, MB or GB)", v)
	}
	return n * mult, nil
}

// ParsePort reads a TCP port: an integer from 1 to 65535.
func ParsePort(v string) (int, error) {
	n, err := ParseInt(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a port (1-65535)", v)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d is out of range 1-65535", n)
	}
	return int(n), nil
}

// ParseIPPort reads cuttlefish's ip datatype: an IP address and a port,
// split at the last colon, the address without brackets ("127.0.0.1:5672",
// "::1:5672", ":::5672" for every IPv6 address). Host names are not
// addresses.
func ParseIPPort(v string) (netip.Addr, int, error) {
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return netip.Addr{}, 0, fmt.Errorf("%q is not an IP address and port (as 127.0.0.1:5672 or ::1:5672)", v)
	}
	ip, err := netip.ParseAddr(v[:i])
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q is not an IP address and port (as 127.0.0.1:5672 or ::1:5672, no brackets, no host name)", v)
	}
	port, err := ParsePort(v[i+1:])
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q: %w", v, err)
	}
	return ip, port, nil
}

// ParseListener reads the value of a RabbitMQ listener key
// (listeners.tcp.<name>, stream.listeners.tcp.<name>): a port, to listen
// on every interface, or an IP address and port (ParseIPPort). It
// returns the address to give net.Listen (":5672", "127.0.0.1:5672",
// "[::1]:5672"). A Unix domain socket ("unix:/path:0", "local:/path:0"),
// which RabbitMQ's AMQP listeners also take, is an error.
func ParseListener(v string) (string, error) {
	if strings.HasPrefix(v, "unix:") || strings.HasPrefix(v, "local:") {
		return "", fmt.Errorf("%q: Unix domain sockets are not supported by Warren yet", v)
	}
	if !strings.Contains(v, ":") {
		port, err := ParsePort(v)
		if err != nil {
			return "", err
		}
		return ":" + strconv.Itoa(port), nil
	}
	ip, port, err := ParseIPPort(v)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
}

// informationUnits are the suffixes of RabbitMQ's information units
// (rabbit_resource_monitor_misc:parse_information_unit, the memory and
// disk limits' form): binary for ki, Mi, ... and kiB, MiB, ...; decimal,
// as Kubernetes reads them, for k, M, G, P and kB, MB, GB, TB, PB.
// Exactly RabbitMQ's spellings: "500mi" or "2T" are not among them.
var informationUnits = map[string]int64{}

func init() {
	bin := map[string]int64{"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
	for _, u := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "ki",
		"kiB", "KiB", "MiB", "GiB", "TiB", "PiB", "kib", "mib", "gib", "tib", "pib", "KIB", "MIB", "GIB", "TIB", "PIB"} {
		informationUnits[u] = bin[strings.ToLower(u[:1])]
	}
	dec := map[string]int64{"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
	for _, u := range []string{"kB", "KB", "MB", "GB", "TB", "PB", "kb", "mb", "gb", "tb", "pb", "Kb", "Mb", "Gb", "Tb", "Pb",
		"k", "K", "m", "M", "g", "G", "p", "P"} {
		informationUnits[u] = dec[strings.ToLower(u[:1])]
	}
}

// ParseInformationUnit reads RabbitMQ's information unit, the form of
// vm_memory_high_watermark.absolute and disk_free_limit.absolute: a
// non-negative integer number of bytes, optionally with one of
// RabbitMQ's unit suffixes ("50MB" is 50,000,000 bytes, "1024MiB"
// 1,073,741,824). RabbitMQ reads PiB as 1024⁴×2014 bytes, a typo; Warren
// as 1024⁵.
func ParseInformationUnit(v string) (int64, error) {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	mult := int64(1)
	if unit := v[i:]; unit != "" {
		m, ok := informationUnits[unit]
		if !ok {
			i = 0 // not a size
		}
		mult = m
	}
	n, err := strconv.ParseInt(v[:i], 10, 64)
	if i == 0 || err != nil || n > (1<<63-1)/mult {
		return 0, fmt.Errorf("%q is not an amount of information (as 50000000, 500MB, 500MiB, 10GB, 10GiB, 2TB, 2TiB)", v)
	}
	return n * mult, nil
}

// ParseFloat reads cuttlefish's float: a decimal number such as 0.4 (or
// an integer).
func ParseFloat(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || strings.ContainsAny(v, "xXnNpP_") || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a decimal number", v)
	}
	return f, nil
}
