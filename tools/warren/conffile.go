package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/rabbitconf"
	"github.com/warren-mq/warren/queues"
)

// The configuration file is RabbitMQ's rabbitmq.conf: its syntax
// (internal/rabbitconf) and, for what Warren does, its keys with
// RabbitMQ's meaning and value forms. Settings only Warren has are
// warren.*. Every key must be one of confKeys: a key of RabbitMQ's that
// Warren does not act on is an error that says so, any other key an
// error that calls it unknown, each naming the file and the line.

// confKeys are the keys Warren reads; a $ segment matches any one
// segment.
var confKeys = []struct {
	key string
	set func(s *confState, e rabbitconf.Entry) error
}{
	{"listeners.tcp", func(s *confState, e rabbitconf.Entry) error { return s.amqp.setOff(e) }},
	{"listeners.tcp.$name", func(s *confState, e rabbitconf.Entry) error { return s.amqp.add(e) }},
	{"stream.listeners.tcp", func(s *confState, e rabbitconf.Entry) error { return s.stream.setOff(e) }},
	{"stream.listeners.tcp.$name", func(s *confState, e rabbitconf.Entry) error { return s.stream.add(e) }},
	{"stream.advertised_host", func(s *confState, e rabbitconf.Entry) error {
		s.advertiseHost = &e
		return nonEmpty(e.Value)
	}},
	{"stream.advertised_port", func(s *confState, e rabbitconf.Entry) error {
		s.advertisePort = &e
		_, err := rabbitconf.ParsePort(e.Value)
		return err
	}},
	{"stream.frame_max", func(s *confState, e rabbitconf.Entry) error {
		n, err := limit(e.Value, rabbitconf.ParseInt, 1, math.MaxUint32, "no limit")
		s.cfg.FrameMax = uint32(n)
		return err
	}},
	{"stream.heartbeat", func(s *confState, e rabbitconf.Entry) error {
		n, err := limit(e.Value, rabbitconf.ParseInt, 1, math.MaxUint32, "no heartbeats")
		s.cfg.Heartbeat = uint32(n)
		return err
	}},
	{"heartbeat", func(s *confState, e rabbitconf.Entry) error {
		n, err := limit(e.Value, rabbitconf.ParseInt, 1, math.MaxUint16, "no heartbeats")
		s.cfg.AMQPHeartbeat = uint16(n)
		return err
	}},
	{"frame_max", func(s *confState, e rabbitconf.Entry) error {
		n, err := limit(e.Value, rabbitconf.ParseBytesize, wire.FrameMinSize, math.MaxUint32, "no limit")
		s.cfg.AMQPFrameMax = uint32(n)
		return err
	}},
	{"channel_max", setChannelMax},
	{"max_channels_per_connection", setChannelMax},
	{"initial_frame_max", func(s *confState, e rabbitconf.Entry) error {
		n, err := limit(e.Value, rabbitconf.ParseBytesize, 4096, math.MaxUint32, "no limit")
		s.cfg.AMQPInitialFrameMax = uint32(n)
		return err
	}},
	{"stream.initial_frame_max", func(s *confState, e rabbitconf.Entry) error {
		n, err := limit(e.Value, rabbitconf.ParseInt, 4096, math.MaxUint32, "no limit")
		s.cfg.StreamInitialFrameMax = uint32(n)
		return err
	}},
	{"max_message_size", func(s *confState, e rabbitconf.Entry) error {
		// An integer, not a size, between 1 and 512 MiB, as RabbitMQ's
		// schema validates it.
		n, err := rabbitconf.ParseInt(e.Value)
		if err == nil && (n <= 0 || n > amqp.MaxMessageSizeLimit) {
			err = fmt.Errorf("%d: max message size should be between 0 and 512MB", n)
		}
		s.cfg.MaxMessageSize = uint64(n)
		return err
	}},
	{"consumer_max_per_channel", func(s *confState, e rabbitconf.Entry) error {
		if e.Value == "infinity" {
			s.cfg.ConsumerMaxPerChannel = 0
			return nil
		}
		n, err := limit(e.Value, rabbitconf.ParseInt, 1, math.MaxInt32, "")
		if err != nil {
			return fmt.Errorf("%q should be positive integer or 'infinity'", e.Value)
		}
		s.cfg.ConsumerMaxPerChannel = int(n)
		return nil
	}},
	{"handshake_timeout", func(s *confState, e rabbitconf.Entry) error {
		if e.Value == "infinity" {
			return errors.New("infinity (RabbitMQ: no timeout) is not supported by Warren: a handshake is always bounded")
		}
		n, err := limit(e.Value, rabbitconf.ParseInt, 1, math.MaxInt32, "a timeout at once")
		s.cfg.HandshakeTimeout = time.Duration(n) * time.Millisecond
		return err
	}},
	{"deprecated_features.permit.transient_nonexcl_queues", func(s *confState, e rabbitconf.Entry) error {
		permit, err := rabbitconf.ParseBool(e.Value)
		s.cfg.DenyTransientNonExclusive = !permit
		return err
	}},
	{"default_vhost", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.Bootstrap.VHost = e.Value
		return nonEmpty(e.Value)
	}},
	{"default_user", func(s *confState, e rabbitconf.Entry) error {
		s.defaultUser = &e
		s.cfg.Bootstrap.User = e.Value
		return nonEmpty(e.Value)
	}},
	{"default_pass", func(s *confState, e rabbitconf.Entry) error {
		s.defaultPass = &e
		s.cfg.Bootstrap.Password = e.Value
		if err := nonEmpty(e.Value); err != nil {
			return err
		}
		if taggedValue.MatchString(e.Value) {
			tag, _, _ := strings.Cut(e.Value, ":")
			return fmt.Errorf("RabbitMQ reads %s:… as an encrypted value, which Warren does not support yet", tag)
		}
		return nil
	}},
	{"default_user_tags.$tag", func(s *confState, e rabbitconf.Entry) error {
		on, err := rabbitconf.ParseBool(e.Value)
		if s.tags == nil {
			s.tags = []string{}
		}
		if on {
			s.tags = append(s.tags, e.Segments()[1])
		}
		return err
	}},
	{"default_permissions.configure", setPermission},
	{"default_permissions.read", setPermission},
	{"default_permissions.write", setPermission},
	{"loopback_users", func(s *confState, e rabbitconf.Entry) error {
		s.loopbackNone = &e
		return isNone(e.Value)
	}},
	{"loopback_users.$user", func(s *confState, e rabbitconf.Entry) error {
		on, err := rabbitconf.ParseBool(e.Value)
		if s.loopback == nil {
			s.loopback = []string{}
		}
		if on {
			s.loopback = append(s.loopback, e.Segments()[1])
			s.loopbackOn = append(s.loopbackOn, e)
		}
		return err
	}},
	{"management.tcp.port", func(s *confState, e rabbitconf.Entry) error {
		s.httpPort = e.Value
		_, err := rabbitconf.ParsePort(e.Value)
		return err
	}},
	{"management.tcp.ip", func(s *confState, e rabbitconf.Entry) error {
		s.httpIP = e.Value
		if _, err := netip.ParseAddr(e.Value); err != nil {
			return fmt.Errorf("%q is not an IP address", e.Value)
		}
		return nil
	}},
	{"prometheus.tcp.port", func(s *confState, e rabbitconf.Entry) error {
		s.promPort = e.Value
		_, err := rabbitconf.ParsePort(e.Value)
		return err
	}},
	{"prometheus.tcp.ip", func(s *confState, e rabbitconf.Entry) error {
		s.promIP = e.Value
		if _, err := netip.ParseAddr(e.Value); err != nil {
			return fmt.Errorf("%q is not an IP address", e.Value)
		}
		return nil
	}},
	{"load_definitions", setDefinitions},
	{"management.load_definitions", setDefinitions},
	{"log.console", func(s *confState, e rabbitconf.Entry) error {
		on, err := rabbitconf.ParseBool(e.Value)
		s.logConsole = &on
		return err
	}},
	{"log.console.level", func(s *confState, e rabbitconf.Entry) error {
		if _, ok := logLevels[e.Value]; !ok && e.Value != "none" {
			return fmt.Errorf("%q is not one of debug, info, notice, warning, error, critical, alert, emergency, none", e.Value)
		}
		s.cfg.LogLevel = e.Value
		return nil
	}},
	{"vm_memory_high_watermark.relative", func(s *confState, e rabbitconf.Entry) error {
		s.alarmKey(e)
		f, err := fraction(e.Value, 1, "the memory alarm always on, blocking every publisher")
		s.cfg.Alarms.MemoryRelative = f
		return err
	}},
	{"vm_memory_high_watermark.absolute", func(s *confState, e rabbitconf.Entry) error {
		s.alarmKey(e)
		n, err := limit(e.Value, rabbitconf.ParseInformationUnit, 1, math.MaxInt64, "the memory alarm always on, blocking every publisher")
		s.cfg.Alarms.MemoryAbsolute = uint64(n)
		return err
	}},
	{"disk_free_limit.relative", func(s *confState, e rabbitconf.Entry) error {
		s.alarmKey(e)
		f, err := fraction(e.Value, math.MaxFloat64, "no disk alarm")
		s.cfg.Alarms.DiskFreeRelative = f
		return err
	}},
	{"disk_free_limit.absolute", func(s *confState, e rabbitconf.Entry) error {
		s.alarmKey(e)
		n, err := limit(e.Value, rabbitconf.ParseInformationUnit, 1, math.MaxInt64, "no disk alarm")
		s.cfg.Alarms.DiskFreeAbsolute = uint64(n)
		return err
	}},
	{"warren.data_dir", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.DataDir = e.Value
		return nonEmpty(e.Value)
	}},
	{"warren.retention_interval", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.RetentionInterval = e.Value
		if d, err := time.ParseDuration(e.Value); err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive Go duration (such as 30s, 1m, 1h)", e.Value)
		}
		return nil
	}},
	{"warren.node_name", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.Cluster.NodeName = e.Value
		return nonEmpty(e.Value)
	}},
	{"warren.cluster.peers", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.Cluster.Peers = e.Value
		return nonEmpty(e.Value)
	}},
	{"warren.cluster.listen", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.Cluster.Listen = e.Value
		if _, _, err := net.SplitHostPort(e.Value); err != nil {
			return fmt.Errorf("%q is not a listen address (host:port)", e.Value)
		}
		return nil
	}},
	{"warren.cluster.secret", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.Cluster.Secret = e.Value
		return nonEmpty(e.Value)
	}},
	{"warren.cluster.name", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.Cluster.Name = e.Value
		return nonEmpty(e.Value)
	}},
	{"warren.cluster.join", func(s *confState, e rabbitconf.Entry) error {
		v, err := rabbitconf.ParseBool(e.Value)
		if err != nil {
			return err
		}
		s.cfg.Cluster.Join = v
		return nil
	}},
	{"warren.cluster.command_timeout", func(s *confState, e rabbitconf.Entry) error {
		d, err := time.ParseDuration(e.Value)
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive Go duration (such as 10s, 1m)", e.Value)
		}
		s.cfg.Cluster.CommandTimeout = d
		return nil
	}},
	{"warren.debug_listen", func(s *confState, e rabbitconf.Entry) error {
		s.cfg.DebugListen = e.Value
		if _, _, err := net.SplitHostPort(e.Value); err != nil {
			return fmt.Errorf("%q is not a listen address (host:port)", e.Value)
		}
		return nil
	}},
}

// taggedValue is cuttlefish's tagged_binary form, which RabbitMQ's
// default_pass takes as an encrypted value whatever the tag.
var taggedValue = regexp.MustCompile(`^[a-zA-Z0-9_]+:.`)

// confState is a file being applied: the Config and what the keys that
// combine with others said, for the checks at the end.
type confState struct {
	cfg  *Config
	errs []confError

	amqp, stream                 listenerKeys
	advertiseHost, advertisePort *rabbitconf.Entry
	httpIP, httpPort             string
	promIP, promPort             string
	defaultUser, defaultPass     *rabbitconf.Entry
	tags                         []string                     // nil: no default_user_tags key
	perms                        map[string]*rabbitconf.Entry // default_permissions.<kind>
	loopbackNone                 *rabbitconf.Entry
	loopback                     []string           // nil: no loopback_users.<user> key
	loopbackOn                   []rabbitconf.Entry // the loopback_users.<user> = true
	logConsole                   *bool
	channelMax                   map[string]rabbitconf.Entry // channel_max and its alias
	definitions                  map[string]rabbitconf.Entry // load_definitions, management.load_definitions
	alarms                       map[string]rabbitconf.Entry // vm_memory_high_watermark.*, disk_free_limit.*
	tls                          tlsKeys                     // conftls.go
	mechanisms                   map[string]string           // auth_mechanisms.<n> (confauth.go)
	connectionMax                *rabbitconf.Entry           // connection_max or max_connections
}

// confError is an error at a line of the file.
type confError struct {
	line int
	msg  string
}

func (s *confState) errorf(line int, format string, args ...any) {
	s.errs = append(s.errs, confError{line, fmt.Sprintf(format, args...)})
}

// applyConfFile applies data, the file at path in rabbitmq.conf syntax,
// onto cfg. The error names each line that is wrong, in line order.
func applyConfFile(path string, data []byte, cfg *Config) error {
	entries, err := rabbitconf.Parse(path, data)
	if err != nil {
		return err
	}
	s := &confState{cfg: cfg, amqp: listenerKeys{protocol: "AMQP", key: "listeners.tcp"},
		stream: listenerKeys{protocol: "stream", key: "stream.listeners.tcp"}}
	for _, e := range entries {
		s.apply(e)
	}
	s.finish()
	if len(s.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(s.errs, func(a, b confError) int { return cmp.Compare(a.line, b.line) })
	errs := make([]error, len(s.errs))
	for i, e := range s.errs {
		errs[i] = fmt.Errorf("%s:%d: %s", path, e.line, e.msg)
	}
	return errors.Join(errs...)
}

// apply applies one entry, or records why not.
func (s *confState) apply(e rabbitconf.Entry) {
	for _, k := range confKeys {
		if rabbitconf.Match(k.key, e.Key) {
			if err := k.set(s, e); err != nil {
				s.errorf(e.Line, "%s: %v", e.Key, err)
			}
			return
		}
	}
	switch app, ok := rabbitconf.Schema(e.Key); {
	case !ok:
		s.errorf(e.Line, "unknown key %q", e.Key)
	case app == "rabbit":
		s.errorf(e.Line, "RabbitMQ's key %q is not supported by Warren yet", e.Key)
	default:
		s.errorf(e.Line, "key %q of RabbitMQ's %s plugin is not supported by Warren yet", e.Key, app)
	}
}

// finish applies the keys that combine, once all are read.
func (s *confState) finish() {
	if addr, ok := s.amqp.finish(s); ok {
		s.cfg.AMQPListen = addr
	}
	if addr, ok := s.stream.finish(s); ok {
		s.cfg.StreamListen = addr
	}
	if s.advertiseHost != nil || s.advertisePort != nil {
		var host, port string
		if s.advertiseHost != nil {
			host = s.advertiseHost.Value
		}
		if s.advertisePort != nil {
			port = s.advertisePort.Value
		}
		s.cfg.StreamAdvertise = net.JoinHostPort(host, port)
	}
	if s.httpIP != "" || s.httpPort != "" {
		s.cfg.HTTPListen = net.JoinHostPort(s.httpIP, cmp.Or(s.httpPort, "15672"))
	}
	if s.promIP != "" || s.promPort != "" {
		s.cfg.PrometheusListen = net.JoinHostPort(s.promIP, cmp.Or(s.promPort, "15692"))
	}
	s.tls.finish(s)
	s.finishAuth()
	s.finishBootstrap()
	switch {
	case s.loopbackNone != nil:
		for _, e := range s.loopbackOn {
			s.errorf(e.Line, "%s = true, but loopback_users = none (line %d) restricts nobody", e.Key, s.loopbackNone.Line)
		}
		s.cfg.LoopbackUsers = []string{}
	case s.loopback != nil:
		s.cfg.LoopbackUsers = s.loopback
	}
	if s.logConsole != nil && !*s.logConsole {
		s.cfg.LogLevel = "none"
	}
	if len(s.channelMax) > 1 {
		a, b := s.channelMax["channel_max"], s.channelMax["max_channels_per_connection"]
		s.errorf(max(a.Line, b.Line), "channel_max and max_channels_per_connection (lines %d and %d) are the same setting; keep one", a.Line, b.Line)
	}
	for _, k := range []string{"vm_memory_high_watermark", "disk_free_limit"} {
		a, okA := s.alarms[k+".absolute"]
		r, okR := s.alarms[k+".relative"]
		if okA && okR {
			s.errorf(max(a.Line, r.Line), "%s and %s (lines %d and %d) are both set; RabbitMQ takes the absolute one: keep one", a.Key, r.Key, a.Line, r.Line)
		}
	}
	if len(s.definitions) > 1 {
		a, b := s.definitions["load_definitions"], s.definitions["management.load_definitions"]
		if a.Value != b.Value {
			s.errorf(max(a.Line, b.Line), "load_definitions and management.load_definitions (lines %d and %d) name different files; Warren loads one", a.Line, b.Line)
		}
	}
}

// finishBootstrap checks the default identity's keys together.
func (s *confState) finishBootstrap() {
	if u := s.defaultUser; u != nil && u.Value != queues.DefaultUser && s.defaultPass == nil {
		s.errorf(u.Line, "default_user %q has no default_pass (RabbitMQ would give it the password guest); set one", u.Value)
	}
	if s.tags != nil {
		s.cfg.Bootstrap.Tags = s.tags
	}
	if len(s.perms) == 0 {
		return
	}
	var first *rabbitconf.Entry
	var missing []string
	for _, kind := range []string{"configure", "write", "read"} {
		if e := s.perms[kind]; e == nil {
			missing = append(missing, "default_permissions."+kind)
		} else if first == nil || e.Line < first.Line {
			first = e
		}
	}
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		s.errorf(first.Line, "%s is set but %s %s not: RabbitMQ needs all three", first.Key, strings.Join(missing, " and "), verb)
		return
	}
	s.cfg.Bootstrap.Permissions = &queues.Permissions{
		Configure: s.perms["configure"].Value, Write: s.perms["write"].Value, Read: s.perms["read"].Value,
	}
}

// listenerKeys are the listener keys of one protocol:
// <key> = none and <key>.<name> = port or ip:port.
type listenerKeys struct {
	protocol, key string
	off           *rabbitconf.Entry
	listeners     []rabbitconf.Entry
	addrs         []string
}

func (l *listenerKeys) setOff(e rabbitconf.Entry) error {
	l.off = &e
	return isNone(e.Value)
}

func (l *listenerKeys) add(e rabbitconf.Entry) error {
	addr, err := rabbitconf.ParseListener(e.Value)
	if err != nil {
		return err
	}
	l.listeners = append(l.listeners, e)
	l.addrs = append(l.addrs, addr)
	return nil
}

// finish returns the listen address the keys give, if they give one
// ("" for off); Warren serves each protocol on one listener.
func (l *listenerKeys) finish(s *confState) (string, bool) {
	switch {
	case l.off != nil:
		for _, e := range l.listeners {
			s.errorf(e.Line, "%s sets a listener, but %s = none (line %d) turns %s off", e.Key, l.key, l.off.Line, l.protocol)
		}
		return "", true
	case len(l.listeners) > 1:
		for _, e := range l.listeners[1:] {
			s.errorf(e.Line, "%s is a second %s listener (%s is on line %d); Warren serves %s on one listener", e.Key, l.protocol, l.listeners[0].Key, l.listeners[0].Line, l.protocol)
		}
		return "", false
	case len(l.listeners) == 1:
		return l.addrs[0], true
	}
	return "", false
}

func setChannelMax(s *confState, e rabbitconf.Entry) error {
	if s.channelMax == nil {
		s.channelMax = map[string]rabbitconf.Entry{}
	}
	s.channelMax[e.Key] = e
	n, err := limit(e.Value, rabbitconf.ParseInt, 1, math.MaxUint16, "no limit")
	s.cfg.AMQPChannelMax = uint16(n)
	return err
}

func setPermission(s *confState, e rabbitconf.Entry) error {
	if s.perms == nil {
		s.perms = map[string]*rabbitconf.Entry{}
	}
	s.perms[e.Segments()[1]] = &e
	if _, err := regexp.Compile(e.Value); err != nil {
		return fmt.Errorf("%q is not a regular expression: %v", e.Value, err)
	}
	return nil
}

// alarmKey notes a memory or disk limit key, for the check that
// absolute and relative are not both given.
func (s *confState) alarmKey(e rabbitconf.Entry) {
	if s.alarms == nil {
		s.alarms = map[string]rabbitconf.Entry{}
	}
	s.alarms[e.Key] = e
}

// fraction reads a relative limit: a number above 0 and at most hi. 0,
// which RabbitMQ reads as zeroMeans, is not supported.
func fraction(v string, hi float64, zeroMeans string) (float64, error) {
	f, err := rabbitconf.ParseFloat(v)
	switch {
	case err != nil:
		return 0, err
	case f == 0:
		return 0, fmt.Errorf("0 (RabbitMQ: %s) is not supported by Warren", zeroMeans)
	case f < 0 || f > hi:
		return 0, fmt.Errorf("%s is out of range (0, %g]", v, hi)
	}
	return f, nil
}

func setDefinitions(s *confState, e rabbitconf.Entry) error {
	if s.definitions == nil {
		s.definitions = map[string]rabbitconf.Entry{}
	}
	s.definitions[e.Key] = e
	s.cfg.LoadDefinitions = e.Value
	return nonEmpty(e.Value)
}

func isNone(v string) error {
	if v != "none" {
		return fmt.Errorf("%q: the only value is none", v)
	}
	return nil
}

func nonEmpty(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	return nil
}

// limit reads an integer with parse and checks it is within [lo, hi].
// 0, which RabbitMQ reads as zeroMeans, is not supported (Warren's 0 is
// the default).
func limit(v string, parse func(string) (int64, error), lo, hi int64, zeroMeans string) (int64, error) {
	n, err := parse(v)
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, fmt.Errorf("0 (RabbitMQ: %s) is not supported by Warren yet", zeroMeans)
	case n < lo || n > hi:
		return 0, fmt.Errorf("%d is out of range %d-%d", n, lo, hi)
	}
	return n, nil
}
