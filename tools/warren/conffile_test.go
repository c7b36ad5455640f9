package main

import (
	"bufio"
	"crypto/tls"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/rabbitconf"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
)

// readConf applies conf onto the defaults, as the file w.conf.
func readConf(t *testing.T, conf string) (Config, error) {
	t.Helper()
	cfg := defaults()
	err := applyConfFile("w.conf", []byte(conf), &cfg)
	return cfg, err
}

// Ensure a file with every key Warren reads, each off its default, gives
// the Config those keys mean.
func TestConfFileEveryKey(t *testing.T) {
	conf := `
# every key, none at its default
listeners.tcp.local = 127.0.0.1:5673
listeners.ssl.default = 5671
stream.listeners.tcp.v6 = ::1:5553
stream.listeners.ssl.default = 127.0.0.1:5551
stream.advertised_tls_host = tls.example.com
stream.advertised_tls_port = 6551
ssl_options.cacertfile = /etc/warren/ca.pem
ssl_options.certfile = /etc/warren/server.pem
ssl_options.keyfile = /etc/warren/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
ssl_options.versions.1 = tlsv1.3
ssl_options.ciphers.1 = TLS_AES_256_GCM_SHA384
ssl_options.ciphers.2 = ECDHE-ECDSA-AES256-GCM-SHA384
ssl_options.depth = 2
ssl_options.password = s3cret
ssl_options.honor_cipher_order = true
ssl_options.honor_ecc_order = true
ssl_cert_login_from = subject_alternative_name
ssl_cert_login_san_type = email
ssl_cert_login_san_index = 1
auth_mechanisms.1 = AMQPLAIN
auth_mechanisms.2 = EXTERNAL
anonymous_login_user = anon
anonymous_login_pass = anonpass
connection_max = 100
stream.max_connections = 50
channel_max_per_node = 1000
management.ssl.port = 15674
management.ssl.ip = 127.0.0.1
management.ssl.cacertfile = /etc/warren/mgmt-ca.pem
management.ssl.certfile = /etc/warren/mgmt.pem
management.ssl.keyfile = /etc/warren/mgmt.key
management.ssl.verify = verify_peer
management.ssl.fail_if_no_peer_cert = false
management.ssl.versions.1 = tlsv1.2
management.ssl.versions.2 = tlsv1.3
management.ssl.ciphers.1 = TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
management.ssl.depth = 0
management.ssl.password = mgmt-pass
management.ssl.honor_cipher_order = false
management.ssl.honor_ecc_order = false
prometheus.ssl.port = 15694
prometheus.ssl.ip = 127.0.0.1
prometheus.ssl.cacertfile = /etc/warren/prom-ca.pem
prometheus.ssl.certfile = /etc/warren/prom.pem
prometheus.ssl.keyfile = /etc/warren/prom.key
prometheus.ssl.verify = verify_none
prometheus.ssl.fail_if_no_peer_cert = false
prometheus.ssl.versions.1 = tlsv1.2
prometheus.ssl.ciphers.1 = ecdhe-rsa-chacha20-poly1305
prometheus.ssl.depth = 5
prometheus.ssl.password = prom-pass
prometheus.ssl.honor_cipher_order = true
prometheus.ssl.honor_ecc_order = true
stream.advertised_host = stream.example.com
stream.advertised_port = 6552
stream.frame_max = 524288
stream.heartbeat = 30
heartbeat = 20
frame_max = 256KB
channel_max = 128
max_message_size = 1048576
initial_frame_max = 16KB
stream.initial_frame_max = 4096
consumer_max_per_channel = 16
handshake_timeout = 5000
deprecated_features.permit.transient_nonexcl_queues = false
management.tcp.port = 15673
management.tcp.ip = 127.0.0.1
prometheus.tcp.port = 15693
prometheus.tcp.ip = 127.0.0.1
load_definitions = /etc/warren/definitions.json
default_vhost = prod
default_user = alice
default_pass = 'pa#ss word'   # quoted: the # is part of it
default_user_tags.monitoring = true
default_user_tags.management = true
default_user_tags.administrator = false
default_permissions.configure = ^alice-.*
default_permissions.read = .*
default_permissions.write = ^(alice|shared)-.*
loopback_users.alice = true
loopback_users.guest = false
loopback_users.john\.doe = true
log.console = true
log.console.level = warning
vm_memory_high_watermark.relative = 0.4
disk_free_limit.absolute = 2GB
warren.data_dir = /var/lib/warren
warren.retention_interval = 30s
warren.debug_listen = 127.0.0.1:6060
warren.node_name = n1
warren.cluster.peers = n1=10.0.0.1:25672,n2=10.0.0.2:25672,n3=10.0.0.3:25672
warren.cluster.listen = 0.0.0.0:25672
warren.cluster.secret = cookie
warren.cluster.name = prod
warren.cluster.command_timeout = 10s
warren.cluster.join = true
`
	got, err := readConf(t, conf)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DataDir:                   "/var/lib/warren",
		AMQPListen:                "127.0.0.1:5673",
		StreamListen:              "[::1]:5553",
		StreamAdvertise:           "stream.example.com:6552",
		FrameMax:                  524288,
		Heartbeat:                 30,
		AMQPFrameMax:              256 << 10,
		AMQPChannelMax:            128,
		AMQPHeartbeat:             20,
		MaxMessageSize:            1 << 20,
		AMQPInitialFrameMax:       16 << 10,
		StreamInitialFrameMax:     4096,
		ConsumerMaxPerChannel:     16,
		HandshakeTimeout:          5 * time.Second,
		DenyTransientNonExclusive: true,
		RetentionInterval:         "30s",
		LogLevel:                  "warning",
		DebugListen:               "127.0.0.1:6060",
		Cluster: ClusterConfig{NodeName: "n1", Peers: "n1=10.0.0.1:25672,n2=10.0.0.2:25672,n3=10.0.0.3:25672",
			Listen: "0.0.0.0:25672", Secret: "cookie", Name: "prod", CommandTimeout: 10 * time.Second, Join: true},
		HTTPListen:       "127.0.0.1:15673",
		PrometheusListen: "127.0.0.1:15693",
		LoadDefinitions:  "/etc/warren/definitions.json",
		Bootstrap: queues.Bootstrap{
			User: "alice", Password: "pa#ss word", VHost: "prod",
			Tags:        []string{"monitoring", "management"},
			Permissions: &queues.Permissions{Configure: "^alice-.*", Write: "^(alice|shared)-.*", Read: ".*"},
		},
		LoopbackUsers: []string{"alice", "john.doe"},
		Alarms:        alarm.Limits{MemoryRelative: 0.4, DiskFreeAbsolute: 2_000_000_000},
		TLS: TLSConfig{
			AMQPListen: ":5671", StreamListen: "127.0.0.1:5551", StreamAdvertise: "tls.example.com:6551",
			HTTPSListen: "127.0.0.1:15674", PrometheusListen: "127.0.0.1:15694",
			Options: tlsconf.Options{CACertFile: "/etc/warren/ca.pem", CertFile: "/etc/warren/server.pem", KeyFile: "/etc/warren/server.key",
				VerifyPeer: true, FailIfNoPeerCert: true, Versions: []uint16{tls.VersionTLS13},
				CipherSuites: []uint16{tls.TLS_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
				Depth:        intp(2), Password: "s3cret", HonorCipherOrder: true, HonorECCOrder: true},
			HTTPS: tlsconf.Options{CACertFile: "/etc/warren/mgmt-ca.pem", CertFile: "/etc/warren/mgmt.pem", KeyFile: "/etc/warren/mgmt.key",
				VerifyPeer: true, Versions: []uint16{tls.VersionTLS12, tls.VersionTLS13},
				CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, Depth: intp(0), Password: "mgmt-pass"},
			Prometheus: tlsconf.Options{CACertFile: "/etc/warren/prom-ca.pem", CertFile: "/etc/warren/prom.pem", KeyFile: "/etc/warren/prom.key",
				Versions: []uint16{tls.VersionTLS12}, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256},
				Depth: intp(5), Password: "prom-pass", HonorCipherOrder: true, HonorECCOrder: true},
			CertLogin: tlsconf.CertLogin{From: tlsconf.LoginFromSAN, SANType: tlsconf.SANEmail, SANIndex: 1},
		},
		SASL:                sasl.Config{Mechanisms: []string{"AMQPLAIN", "EXTERNAL"}, AnonymousUser: "anon", AnonymousPass: "anonpass"},
		ConnectionMax:       100,
		StreamConnectionMax: 50,
		ChannelMaxPerNode:   1000,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// Every key Warren reads is in conf.
	entries, err := rabbitconf.Parse("w.conf", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range confKeys {
		if !hasKey(entries, k.key) && !oneOf(k.key, "listeners.tcp", "stream.listeners.tcp", "listeners.ssl", "stream.listeners.ssl", "loopback_users", "max_channels_per_connection", "max_connections", "management.load_definitions",
			// absolute or relative, not both: TestConfFileCombinations
			"vm_memory_high_watermark.absolute", "disk_free_limit.relative") {
			t.Errorf("key %s not in the test", k.key)
		}
	}
}

func intp(n int) *int { return &n }

func hasKey(entries []rabbitconf.Entry, pattern string) bool {
	for _, e := range entries {
		if rabbitconf.Match(pattern, e.Key) {
			return true
		}
	}
	return false
}

func oneOf(s string, list ...string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// Ensure the keys that turn things off, the aliases, the keys that
// combine and a key given twice mean what they mean to RabbitMQ.
func TestConfFileCombinations(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		check      func(Config) bool
	}{
		{"amqp off", "listeners.tcp = none\n", func(c Config) bool { return c.AMQPListen == "" && c.StreamListen == ":5552" }},
		{"stream off", "stream.listeners.tcp = none\n", func(c Config) bool { return c.StreamListen == "" && c.AMQPListen == ":5672" }},
		{"port only", "listeners.tcp.default = 5673\n", func(c Config) bool { return c.AMQPListen == ":5673" }},
		{"loopback none", "loopback_users = none\nloopback_users.guest = false\n", func(c Config) bool {
			return c.LoopbackUsers != nil && len(c.LoopbackUsers) == 0
		}},
		{"loopback all false", "loopback_users.guest = false\n", func(c Config) bool {
			return c.LoopbackUsers != nil && len(c.LoopbackUsers) == 0
		}},
		{"loopback default", "heartbeat = 5\n", func(c Config) bool { return c.LoopbackUsers == nil }},
		{"no tags", "default_user_tags.administrator = false\n", func(c Config) bool {
			return c.Bootstrap.Tags != nil && len(c.Bootstrap.Tags) == 0
		}},
		{"console off", "log.console.level = debug\nlog.console = false\n", func(c Config) bool { return c.LogLevel == "none" }},
		{"level none", "log.console.level = none\n", func(c Config) bool { return c.LogLevel == "none" }},
		{"newer channel_max name", "max_channels_per_connection = 64\n", func(c Config) bool { return c.AMQPChannelMax == 64 }},
		{"no consumer limit", "consumer_max_per_channel = infinity\n", func(c Config) bool { return c.ConsumerMaxPerChannel == 0 }},
		{"management load_definitions", "management.load_definitions = /d.json\n", func(c Config) bool { return c.LoadDefinitions == "/d.json" }},
		{"both load_definitions alike", "management.load_definitions = /d.json\nload_definitions = /d.json\n", func(c Config) bool { return c.LoadDefinitions == "/d.json" }},
		{"advertise host only", "stream.advertised_host = h\n", func(c Config) bool { return c.StreamAdvertise == "h:" }},
		{"advertise port only", "stream.advertised_port = 6000\n", func(c Config) bool { return c.StreamAdvertise == ":6000" }},
		{"management ip only", "management.tcp.ip = ::1\n", func(c Config) bool { return c.HTTPListen == "[::1]:15672" }},
		{"last wins", "heartbeat = 5\nheartbeat = 7\n", func(c Config) bool { return c.AMQPHeartbeat == 7 }},
		{"guest needs no pass", "default_user = guest\n", func(c Config) bool { return c.Bootstrap.User == "guest" && c.Bootstrap.Password == "" }},
		{"password with colon not tagged", "default_pass = a-b:c\n", func(c Config) bool { return c.Bootstrap.Password == "a-b:c" }},
		{"empty permission", "default_permissions.configure = ''\ndefault_permissions.read = ''\ndefault_permissions.write = ''\n", func(c Config) bool {
			return *c.Bootstrap.Permissions == queues.Permissions{}
		}},
		{"memory absolute", "vm_memory_high_watermark.absolute = 1024MiB\n", func(c Config) bool {
			return c.Alarms == alarm.Limits{MemoryAbsolute: 1 << 30}
		}},
		{"memory absolute in bytes", "vm_memory_high_watermark.absolute = 1073741824\n", func(c Config) bool {
			return c.Alarms == alarm.Limits{MemoryAbsolute: 1 << 30}
		}},
		{"memory absolute decimal unit", "vm_memory_high_watermark.absolute = 2G\n", func(c Config) bool {
			return c.Alarms == alarm.Limits{MemoryAbsolute: 2e9}
		}},
		{"memory relative 1", "vm_memory_high_watermark.relative = 1\n", func(c Config) bool {
			return c.Alarms == alarm.Limits{MemoryRelative: 1}
		}},
		{"disk relative", "disk_free_limit.relative = 1.5\n", func(c Config) bool {
			return c.Alarms == alarm.Limits{DiskFreeRelative: 1.5}
		}},
		{"disk absolute kB", "disk_free_limit.absolute = 50000kB\n", func(c Config) bool {
			return c.Alarms == alarm.Limits{DiskFreeAbsolute: 50_000_000}
		}},
		{"permit transient", "deprecated_features.permit.transient_nonexcl_queues = true\n", func(c Config) bool { return !c.DenyTransientNonExclusive }},
		{"tls off", "listeners.ssl = none\nstream.listeners.ssl = none\n", func(c Config) bool { return c.TLS.AMQPListen == "" && c.TLS.StreamListen == "" }},
		{"https ip only", "management.ssl.ip = ::1\n", func(c Config) bool { return c.TLS.HTTPSListen == "[::1]:15671" }},
		{"prometheus https port only", "prometheus.ssl.port = 15691\n", func(c Config) bool { return c.TLS.PrometheusListen == ":15691" }},
		{"ssl options without listener", "ssl_options.certfile = /c.pem\n", func(c Config) bool {
			return c.TLS.AMQPListen == "" && c.TLS.Options.CertFile == "/c.pem"
		}},
		{"advertised tls port only", "stream.advertised_tls_port = 6551\n", func(c Config) bool { return c.TLS.StreamAdvertise == ":6551" }},
		{"distinguished name", "ssl_cert_login_from = distinguished_name\n", func(c Config) bool { return c.TLS.CertLogin.From == "distinguished_name" }},
		{"common name", "ssl_cert_login_from = common_name\n", func(c Config) bool { return c.TLS.CertLogin == tlsconf.CertLogin{From: "common_name"} }},
		{"subject_alt_name alias", "ssl_cert_login_from = subject_alt_name\n", func(c Config) bool { return c.TLS.CertLogin.From == tlsconf.LoginFromSAN }},
		{"mechanisms in key order", "auth_mechanisms.10 = PLAIN\nauth_mechanisms.2 = ANONYMOUS\n", func(c Config) bool {
			return slices.Equal(c.SASL.Mechanisms, []string{"PLAIN", "ANONYMOUS"}) // RabbitMQ sorts the keys as strings
		}},
		{"anonymous off", "anonymous_login_user = none\n", func(c Config) bool { _, _, ok := c.SASL.AnonymousCredentials(); return !ok }},
		{"max_connections alias", "max_connections = 7\n", func(c Config) bool { return c.ConnectionMax == 7 }},
		{"connection_max 0 refuses all", "connection_max = 0\n", func(c Config) bool { return c.ConnectionMax == -1 }},
		{"connection_max infinity", "connection_max = infinity\nstream.max_connections = infinity\n", func(c Config) bool {
			return c.ConnectionMax == 0 && c.StreamConnectionMax == 0
		}},
		{"channel_max_per_node infinity", "channel_max_per_node = infinity\n", func(c Config) bool { return c.ChannelMaxPerNode == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := readConf(t, tc.conf)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

// Ensure each unknown key, RabbitMQ key Warren does not act on, malformed
// value, bad port and contradiction stops the start with an error that
// names the file, the line and the key.
func TestConfFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, conf, want string
	}{
		{"unknown", "heartbeat = 5\nfoo.bar = 1\n", `w.conf:2: unknown key "foo.bar"`},
		{"unknown warren key", "warren.foo = 1\n", `w.conf:1: unknown key "warren.foo"`},
		{"rabbit key", "\n\nvm_memory_calculation_strategy = rss\n", `w.conf:3: RabbitMQ's key "vm_memory_calculation_strategy" is not supported by Warren yet`},
		{"memory both", "vm_memory_high_watermark.relative = 0.5\nvm_memory_high_watermark.absolute = 1GB\n", `w.conf:2: vm_memory_high_watermark.absolute and vm_memory_high_watermark.relative (lines 2 and 1) are both set; RabbitMQ takes the absolute one: keep one`},
		{"disk both", "disk_free_limit.absolute = 1GB\ndisk_free_limit.relative = 2.0\n", `w.conf:2: disk_free_limit.absolute and disk_free_limit.relative (lines 1 and 2) are both set`},
		{"memory relative above 1", "vm_memory_high_watermark.relative = 1.5\n", `w.conf:1: vm_memory_high_watermark.relative: 1.5 is out of range (0, 1]`},
		{"memory relative 0", "vm_memory_high_watermark.relative = 0\n", `w.conf:1: vm_memory_high_watermark.relative: 0 (RabbitMQ: the memory alarm always on, blocking every publisher) is not supported by Warren`},
		{"memory relative word", "vm_memory_high_watermark.relative = high\n", `w.conf:1: vm_memory_high_watermark.relative: "high" is not a decimal number`},
		{"memory absolute unit", "vm_memory_high_watermark.absolute = 2T\n", `w.conf:1: vm_memory_high_watermark.absolute: "2T" is not an amount of information`},
		{"memory absolute fraction", "vm_memory_high_watermark.absolute = 1.5GB\n", `w.conf:1: vm_memory_high_watermark.absolute: "1.5GB" is not an amount of information`},
		{"disk absolute 0", "disk_free_limit.absolute = 0\n", `w.conf:1: disk_free_limit.absolute: 0 (RabbitMQ: no disk alarm) is not supported by Warren yet`},
		{"disk relative negative", "disk_free_limit.relative = -1\n", `w.conf:1: disk_free_limit.relative: -1 is out of range`},
		{"ssl dhfile", "ssl_options.dhfile = /dh.pem\n", `w.conf:1: RabbitMQ's key "ssl_options.dhfile" is not supported by Warren yet`},
		{"encrypted ssl password", "ssl_options.password = encrypted:abc\n", `w.conf:1: ssl_options.password: RabbitMQ reads encrypted:… as an encrypted value`},
		{"unknown cipher", "ssl_options.ciphers.1 = AES-FAST\n", `w.conf:1: ssl_options.ciphers.1: "AES-FAST" is not a cipher suite Warren offers`},
		{"DHE cipher", "management.ssl.ciphers.1 = DHE-RSA-AES256-GCM-SHA384\n", `w.conf:1: management.ssl.ciphers.1: "DHE-RSA-AES256-GCM-SHA384" is not a cipher suite Warren offers`},
		{"management ssl depth", "management.ssl.depth = 256\n", `w.conf:1: management.ssl.depth: "256" is not a depth (0-255)`},
		{"honor_cipher_order", "prometheus.ssl.honor_cipher_order = yes\n", `w.conf:1: prometheus.ssl.honor_cipher_order: "yes" is not true or false`},
		{"tls 1.1", "ssl_options.versions.1 = tlsv1.1\n", `w.conf:1: ssl_options.versions.1: tlsv1.1 is not supported: Warren speaks TLS 1.2 and 1.3 only`},
		{"bad version", "prometheus.ssl.versions.1 = tls13\n", `w.conf:1: prometheus.ssl.versions.1: "tls13" is not a TLS version`},
		{"bad verify", "ssl_options.verify = yes\n", `w.conf:1: ssl_options.verify: "yes" is not verify_peer or verify_none`},
		{"bad fail_if_no_peer_cert", "ssl_options.fail_if_no_peer_cert = 1\n", `w.conf:1: ssl_options.fail_if_no_peer_cert: "1" is not true or false`},
		{"empty certfile", "ssl_options.certfile = ''\n", `w.conf:1: ssl_options.certfile: empty`},
		{"bad login from", "ssl_cert_login_from = cn\n", `w.conf:1: ssl_cert_login_from: "cn" is not one of distinguished_name, common_name, subject_alternative_name, subject_alt_name`},
		{"bad san type", "ssl_cert_login_san_type = rfc822\n", `w.conf:1: ssl_cert_login_san_type: "rfc822" is not one of dns, ip, email, uri, other_name`},
		{"negative san index", "ssl_cert_login_san_index = -1\n", `w.conf:1: ssl_cert_login_san_index: -1 is not a non-negative integer`},
		{"unknown mechanism", "auth_mechanisms.1 = RABBIT-CR-DEMO\n", `w.conf:1: auth_mechanisms.1: "RABBIT-CR-DEMO" is not an authentication mechanism Warren has (PLAIN, AMQPLAIN, ANONYMOUS, EXTERNAL)`},
		{"encrypted anonymous pass", "anonymous_login_pass = encrypted:abc\n", `w.conf:1: anonymous_login_pass: RabbitMQ reads encrypted:… as an encrypted value`},
		{"connection_max twice", "connection_max = 5\nmax_connections = 6\n", `w.conf:2: max_connections: connection_max and max_connections are the same setting, already set on line 1; keep one`},
		{"connection_max negative", "connection_max = -1\n", `w.conf:1: connection_max: "-1" should be a non-negative integer or 'infinity'`},
		{"channel_max_per_node zero", "channel_max_per_node = 0\n", `w.conf:1: channel_max_per_node: "0" should be positive integer or 'infinity'`},
		{"bad tls port", "listeners.ssl.default = 0\n", `w.conf:1: listeners.ssl.default: port 0 is out of range 1-65535`},
		{"bad https port", "management.ssl.port = x\n", `w.conf:1: management.ssl.port: "x" is not a port`},
		{"bad https ip", "prometheus.ssl.ip = localhost\n", `w.conf:1: prometheus.ssl.ip: "localhost" is not an IP address`},
		{"ssl none and listener", "listeners.ssl = none\nlisteners.ssl.default = 5671\n",
			`w.conf:2: listeners.ssl.default sets a listener, but listeners.ssl = none (line 1) turns AMQP over TLS off`},
		{"second tls listener", "stream.listeners.ssl.a = 5551\nstream.listeners.ssl.b = 5553\n",
			`w.conf:2: stream.listeners.ssl.b is a second stream over TLS listener`},
		{"plugin key", "mqtt.listeners.tcp.default = 1883\n", `w.conf:1: key "mqtt.listeners.tcp.default" of RabbitMQ's rabbitmq_mqtt plugin is not supported by Warren yet`},
		{"cluster formation", "cluster_formation.peer_discovery_backend = classic_config\n", `w.conf:1: RabbitMQ's key "cluster_formation.peer_discovery_backend" is not supported by Warren yet`},
		{"malformed integer", "heartbeat = often\n", `w.conf:1: heartbeat: "often" is not an integer`},
		{"malformed boolean", "log.console = yes\n", `w.conf:1: log.console: "yes" is not true or false`},
		{"malformed size", "frame_max = 1.5MB\n", `w.conf:1: frame_max: "1.5MB" is not a size`},
		{"small frame", "frame_max = 4096\n", `w.conf:1: frame_max: 4096 is out of range 8192-4294967295`},
		{"zero heartbeat", "heartbeat = 0\n", `w.conf:1: heartbeat: 0 (RabbitMQ: no heartbeats) is not supported by Warren yet`},
		{"channel_max range", "channel_max = 65536\n", `w.conf:1: channel_max: 65536 is out of range 1-65535`},
		{"max_message_size range", "max_message_size = 536870913\n", `w.conf:1: max_message_size: 536870913: max message size should be between 0 and 512MB`},
		{"max_message_size size", "max_message_size = 16MB\n", `w.conf:1: max_message_size: "16MB" is not an integer`},
		{"consumer_max_per_channel zero", "consumer_max_per_channel = 0\n", `w.conf:1: consumer_max_per_channel: "0" should be positive integer or 'infinity'`},
		{"handshake_timeout infinity", "handshake_timeout = infinity\n", `w.conf:1: handshake_timeout: infinity (RabbitMQ: no timeout) is not supported by Warren: a handshake is always bounded`},
		{"bad port", "\nlisteners.tcp.default = 70000\n", `w.conf:2: listeners.tcp.default: port 70000 is out of range 1-65535`},
		{"bad stream port", "stream.listeners.tcp.default = 127.0.0.1:0\n", `w.conf:1: stream.listeners.tcp.default: "127.0.0.1:0": port 0 is out of range 1-65535`},
		{"host name listener", "listeners.tcp.default = localhost:5672\n", `w.conf:1: listeners.tcp.default: "localhost:5672" is not an IP address and port`},
		{"bad advertised port", "stream.advertised_port = x\n", `w.conf:1: stream.advertised_port: "x" is not a port`},
		{"bad management ip", "management.tcp.ip = localhost\n", `w.conf:1: management.tcp.ip: "localhost" is not an IP address`},
		{"bad log level", "log.console.level = verbose\n", `w.conf:1: log.console.level: "verbose" is not one of`},
		{"bad none", "listeners.tcp = off\n", `w.conf:1: listeners.tcp: "off": the only value is none`},
		{"tls", "listeners.ssl = 5671\n", `w.conf:1: listeners.ssl: "5671": the only value is none`},
		{"second listener", "listeners.tcp.default = 5672\nlisteners.tcp.local = 127.0.0.1:5673\n",
			`w.conf:2: listeners.tcp.local is a second AMQP listener (listeners.tcp.default is on line 1); Warren serves AMQP on one listener`},
		{"second stream listener", "stream.listeners.tcp.a = 5552\nstream.listeners.tcp.b = 5553\n",
			`w.conf:2: stream.listeners.tcp.b is a second stream listener (stream.listeners.tcp.a is on line 1); Warren serves stream on one listener`},
		{"none and listener", "listeners.tcp = none\nlisteners.tcp.default = 5672\n",
			`w.conf:2: listeners.tcp.default sets a listener, but listeners.tcp = none (line 1) turns AMQP off`},
		{"none and loopback user", "loopback_users = none\nloopback_users.alice = true\n",
			`w.conf:2: loopback_users.alice = true, but loopback_users = none (line 1) restricts nobody`},
		{"alias twice", "channel_max = 10\nmax_channels_per_connection = 20\n",
			`w.conf:2: channel_max and max_channels_per_connection (lines 1 and 2) are the same setting; keep one`},
		{"two definitions", "load_definitions = /a.json\nmanagement.load_definitions = /b.json\n",
			`w.conf:2: load_definitions and management.load_definitions (lines 1 and 2) name different files; Warren loads one`},
		{"user without pass", "default_user = alice\n", `w.conf:1: default_user "alice" has no default_pass`},
		{"encrypted pass", "default_pass = encrypted:abc\n", `w.conf:1: default_pass: RabbitMQ reads encrypted:… as an encrypted value, which Warren does not support yet`},
		{"empty user", "default_user = ''\n", `w.conf:1: default_user: empty`},
		{"partial permissions", "default_permissions.read = .*\n",
			`w.conf:1: default_permissions.read is set but default_permissions.configure and default_permissions.write are not: RabbitMQ needs all three`},
		{"bad permission", "default_permissions.configure = (\n", `w.conf:1: default_permissions.configure: "(" is not a regular expression`},
		{"bad duration", "warren.retention_interval = 1 minute\n", `w.conf:1: warren.retention_interval: "1 minute" is not a positive Go duration`},
		{"bad debug listen", "warren.debug_listen = 6060\n", `w.conf:1: warren.debug_listen: "6060" is not a listen address`},
		{"bad cluster listen", "warren.cluster.listen = 25672\n", `w.conf:1: warren.cluster.listen: "25672" is not a listen address`},
		{"bad command timeout", "warren.cluster.command_timeout = -1s\n", `w.conf:1: warren.cluster.command_timeout: "-1s" is not a positive Go duration`},
		{"syntax", "heartbeat = 5\nthis is not a setting\n", `w.conf:2: want key = value; a key is words`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readConf(t, tc.conf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// Ensure every error of a file is reported, in line order.
func TestConfFileAllErrors(t *testing.T) {
	_, err := readConf(t, "listeners.tcp.default = 5672\nfoo = 1\nlisteners.tcp.b = 5673\nheartbeat = x\n")
	want := `w.conf:2: unknown key "foo"
w.conf:3: listeners.tcp.b is a second AMQP listener (listeners.tcp.default is on line 1); Warren serves AMQP on one listener
w.conf:4: heartbeat: "x" is not an integer`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want\n%s", err, want)
	}
}

// Ensure warren.conf.example, as committed, is a valid file that gives
// Warren's defaults; that each alternative commented out in it ("# key =
// value") is valid on its own; and that it shows every key Warren reads.
func TestConfExample(t *testing.T) {
	data, err := os.ReadFile("warren.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readConf(t, string(data))
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.StreamAdvertise = "localhost:5552"
	want.FrameMax, want.Heartbeat = 1048576, 60
	want.AMQPFrameMax, want.AMQPChannelMax, want.AMQPHeartbeat = 131072, 2047, 60
	want.MaxMessageSize, want.HandshakeTimeout = 16<<20, 10*time.Second
	want.AMQPInitialFrameMax, want.StreamInitialFrameMax = 8192, 8192
	want.Bootstrap = queues.Bootstrap{User: "guest", Password: "guest", VHost: "/", Tags: []string{"administrator"},
		Permissions: &queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}}
	want.LoopbackUsers = []string{"guest"}
	want.Alarms = alarm.Limits{MemoryRelative: alarm.DefaultMemoryRelative, DiskFreeAbsolute: alarm.DefaultDiskFreeAbsolute}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	entries, _ := rabbitconf.Parse("warren.conf.example", data)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		alt, ok := strings.CutPrefix(sc.Text(), "# ")
		if !ok {
			continue
		}
		if _, err := readConf(t, alt); err != nil {
			t.Errorf("line %d, %q: %v", n, alt, err)
		}
		more, err := rabbitconf.Parse("alt", []byte(alt))
		if err != nil || len(more) != 1 {
			t.Fatalf("line %d, %q: not one setting", n, alt)
		}
		entries = append(entries, more...)
	}
	for _, k := range confKeys {
		if !hasKey(entries, k.key) {
			t.Errorf("warren.conf.example does not show %s", k.key)
		}
	}
}

// Ensure the log levels are RabbitMQ's, slog's forms also accepted.
func TestNewLogger(t *testing.T) {
	for _, level := range []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency", "none", "warn", "INFO+2"} {
		if _, err := newLogger(level); err != nil {
			t.Errorf("newLogger(%q): %v", level, err)
		}
	}
	if _, err := newLogger("verbose"); err == nil {
		t.Error("newLogger(verbose) accepted")
	}
}
