package rabbitconf

import (
	"fmt"
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
