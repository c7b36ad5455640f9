package main

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/rabbitconf"
	"github.com/warren-mq/warren/internal/tlsconf"
)

// TLS in the configuration file, with RabbitMQ's keys: the AMQPS and
// stream TLS listeners (listeners.ssl.*, stream.listeners.ssl.*) share
// ssl_options.*; the management API's HTTPS listener has
// management.ssl.*, the Prometheus endpoint's prometheus.ssl.*. Each
// option set takes cacertfile, certfile, keyfile, password, verify,
// fail_if_no_peer_cert, depth, versions.<n>, ciphers.<n>,
// honor_cipher_order and honor_ecc_order; any other ssl key of
// RabbitMQ's (crl_sources, dhfile, ...) stays refused as not supported.

// TLSConfig is the daemon's TLS: listen addresses (empty: off) and the
// certificates each listener serves.
type TLSConfig struct {
	AMQPListen   string // AMQP 0-9-1 over TLS (amqps, 5671)
	StreamListen string // the stream protocol over TLS (5551)
	// StreamAdvertise is the host:port stream clients connected over TLS
	// are told to connect to; an empty host or port takes the plain
	// advertised host and the TLS listener's port.
	StreamAdvertise  string
	HTTPSListen      string // the management API over HTTPS (15671)
	PrometheusListen string // the Prometheus endpoint over HTTPS (15691)
	// Options are ssl_options (AMQPS and stream), HTTPS management.ssl,
	// Prometheus prometheus.ssl.
	Options, HTTPS, Prometheus tlsconf.Options
	// CertLogin is ssl_cert_login_from, ssl_cert_login_san_type and
	// ssl_cert_login_san_index: where SASL EXTERNAL takes the user name
	// from (default distinguished_name, as RabbitMQ; confauth.go).
	CertLogin tlsconf.CertLogin
}

// The ssl option sets, by key prefix.
const (
	sslOptions    = "ssl_options"
	sslManagement = "management.ssl"
	sslPrometheus = "prometheus.ssl"
)

func init() {
	set := func(f func(t *tlsKeys, e rabbitconf.Entry) error) func(s *confState, e rabbitconf.Entry) error {
		return func(s *confState, e rabbitconf.Entry) error { return f(&s.tls, e) }
	}
	confKeys = append(confKeys,
		confKey{"listeners.ssl", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.amqpKeys().setOff(e) })},
		confKey{"listeners.ssl.$name", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.amqpKeys().add(e) })},
		confKey{"stream.listeners.ssl", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.streamKeys().setOff(e) })},
		confKey{"stream.listeners.ssl.$name", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.streamKeys().add(e) })},
		confKey{"stream.advertised_tls_host", set(func(t *tlsKeys, e rabbitconf.Entry) error {
			t.advertiseHost = e.Value
			return nonEmpty(e.Value)
		})},
		confKey{"stream.advertised_tls_port", set(func(t *tlsKeys, e rabbitconf.Entry) error {
			t.advertisePort = e.Value
			_, err := rabbitconf.ParsePort(e.Value)
			return err
		})},
		confKey{"management.ssl.port", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.setPort(sslManagement, e) })},
		confKey{"management.ssl.ip", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.setIP(sslManagement, e) })},
		confKey{"prometheus.ssl.port", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.setPort(sslPrometheus, e) })},
		confKey{"prometheus.ssl.ip", set(func(t *tlsKeys, e rabbitconf.Entry) error { return t.setIP(sslPrometheus, e) })},
	)
	for _, prefix := range []string{sslOptions, sslManagement, sslPrometheus} {
		for _, opt := range []string{"cacertfile", "certfile", "keyfile", "verify", "fail_if_no_peer_cert", "versions.$n",
			"ciphers.$n", "depth", "password", "honor_cipher_order", "honor_ecc_order"} {
			confKeys = append(confKeys, confKey{prefix + "." + opt, set(func(t *tlsKeys, e rabbitconf.Entry) error {
				return t.option(prefix, e)
			})})
		}
	}
}

// confKey is an entry of confKeys.
type confKey = struct {
	key string
	set func(s *confState, e rabbitconf.Entry) error
}

// tlsKeys are the TLS keys of a file being applied (confState.tls).
type tlsKeys struct {
	amqps, streams               *listenerKeys
	advertiseHost, advertisePort string
	sets                         map[string]*sslKeys // by prefix
}

// sslKeys are one option set's keys.
type sslKeys struct {
	opts     tlsconf.Options
	ip, port string
	listen   bool              // port or ip given: the HTTPS listener is on
	versions map[string]uint16 // versions.<n>
	ciphers  map[string]uint16 // ciphers.<n>
}

func (t *tlsKeys) amqpKeys() *listenerKeys {
	if t.amqps == nil {
		t.amqps = &listenerKeys{protocol: "AMQP over TLS", key: "listeners.ssl"}
	}
	return t.amqps
}

func (t *tlsKeys) streamKeys() *listenerKeys {
	if t.streams == nil {
		t.streams = &listenerKeys{protocol: "stream over TLS", key: "stream.listeners.ssl"}
	}
	return t.streams
}

func (t *tlsKeys) options(prefix string) *sslKeys {
	if t.sets == nil {
		t.sets = map[string]*sslKeys{}
	}
	if t.sets[prefix] == nil {
		t.sets[prefix] = &sslKeys{}
	}
	return t.sets[prefix]
}

func (t *tlsKeys) setPort(prefix string, e rabbitconf.Entry) error {
	k := t.options(prefix)
	k.port, k.listen = e.Value, true
	_, err := rabbitconf.ParsePort(e.Value)
	return err
}

func (t *tlsKeys) setIP(prefix string, e rabbitconf.Entry) error {
	k := t.options(prefix)
	k.ip, k.listen = e.Value, true
	if _, err := netip.ParseAddr(e.Value); err != nil {
		return fmt.Errorf("%q is not an IP address", e.Value)
	}
	return nil
}

// option applies <prefix>.<option>.
func (t *tlsKeys) option(prefix string, e rabbitconf.Entry) error {
	k := t.options(prefix)
	switch opt := e.Segments()[strings.Count(prefix, ".")+1]; opt {
	case "cacertfile":
		k.opts.CACertFile = e.Value
		return nonEmpty(e.Value)
	case "certfile":
		k.opts.CertFile = e.Value
		return nonEmpty(e.Value)
	case "keyfile":
		k.opts.KeyFile = e.Value
		return nonEmpty(e.Value)
	case "verify":
		switch e.Value {
		case "verify_peer":
			k.opts.VerifyPeer = true
		case "verify_none":
			k.opts.VerifyPeer = false
		default:
			return fmt.Errorf("%q is not verify_peer or verify_none", e.Value)
		}
	case "fail_if_no_peer_cert":
		on, err := rabbitconf.ParseBool(e.Value)
		k.opts.FailIfNoPeerCert = on
		return err
	case "password":
		k.opts.Password = e.Value
		if err := nonEmpty(e.Value); err != nil {
			return err
		}
		if taggedValue.MatchString(e.Value) {
			tag, _, _ := strings.Cut(e.Value, ":")
			return fmt.Errorf("RabbitMQ reads %s:… as an encrypted value, which Warren does not support yet", tag)
		}
	case "depth":
		n, err := rabbitconf.ParseInt(e.Value)
		if err != nil || n < 0 || n > 255 {
			return fmt.Errorf("%q is not a depth (0-255)", e.Value)
		}
		d := int(n)
		k.opts.Depth = &d
	case "honor_cipher_order", "honor_ecc_order":
		on, err := rabbitconf.ParseBool(e.Value)
		if opt == "honor_cipher_order" {
			k.opts.HonorCipherOrder = on
		} else {
			k.opts.HonorECCOrder = on
		}
		return err
	case "ciphers":
		id, err := tlsconf.ParseCipher(e.Value)
		if err != nil {
			return err
		}
		if k.ciphers == nil {
			k.ciphers = map[string]uint16{}
		}
		k.ciphers[e.Key] = id
	case "versions":
		v, err := tlsconf.ParseVersion(e.Value)
		if err != nil {
			return err
		}
		if k.versions == nil {
			k.versions = map[string]uint16{}
		}
		k.versions[e.Key] = v
	}
	return nil
}

// finish puts the TLS keys into cfg, once all are read.
func (t *tlsKeys) finish(s *confState) {
	cfg := &s.cfg.TLS
	// Checks across keys (a listener without a certificate, verify_peer
	// without a CA) are made when the certificates load at start, so
	// each key is valid on its own (warren.conf.example shows them so).
	for prefix, k := range t.sets {
		for _, key := range slices.Sorted(maps.Keys(k.versions)) {
			k.opts.Versions = append(k.opts.Versions, k.versions[key])
		}
		for _, key := range slices.Sorted(maps.Keys(k.ciphers)) {
			k.opts.CipherSuites = append(k.opts.CipherSuites, k.ciphers[key])
		}
		switch prefix {
		case sslOptions:
			cfg.Options = k.opts
		case sslManagement:
			cfg.HTTPS = k.opts
			if k.listen {
				cfg.HTTPSListen = net.JoinHostPort(k.ip, cmp.Or(k.port, "15671"))
			}
		case sslPrometheus:
			cfg.Prometheus = k.opts
			if k.listen {
				cfg.PrometheusListen = net.JoinHostPort(k.ip, cmp.Or(k.port, "15691"))
			}
		}
	}
	if t.amqps != nil {
		if addr, ok := t.amqps.finish(s); ok {
			cfg.AMQPListen = addr
		}
	}
	if t.streams != nil {
		if addr, ok := t.streams.finish(s); ok {
			cfg.StreamListen = addr
		}
	}
	if t.advertiseHost != "" || t.advertisePort != "" {
		cfg.StreamAdvertise = net.JoinHostPort(t.advertiseHost, t.advertisePort)
	}
}
