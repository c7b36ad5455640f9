package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/rabbitconf"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
)

// Authentication and node-wide limits in the configuration file, with
// RabbitMQ's keys: auth_mechanisms.<n>, anonymous_login_user and
// anonymous_login_pass (sasl.Config), ssl_cert_login_from and its SAN
// keys (tlsconf.CertLogin), connection_max (alias max_connections),
// stream.max_connections and channel_max_per_node.

func init() {
	confKeys = append(confKeys,
		confKey{"auth_mechanisms.$name", func(s *confState, e rabbitconf.Entry) error {
			if s.mechanisms == nil {
				s.mechanisms = map[string]string{}
			}
			s.mechanisms[e.Key] = e.Value
			return sasl.ParseMechanism(e.Value)
		}},
		confKey{"anonymous_login_user", func(s *confState, e rabbitconf.Entry) error {
			s.cfg.SASL.AnonymousUser = e.Value
			return nonEmpty(e.Value)
		}},
		confKey{"anonymous_login_pass", func(s *confState, e rabbitconf.Entry) error {
			s.cfg.SASL.AnonymousPass = e.Value
			if err := nonEmpty(e.Value); err != nil {
				return err
			}
			if taggedValue.MatchString(e.Value) {
				tag, _, _ := strings.Cut(e.Value, ":")
				return fmt.Errorf("RabbitMQ reads %s:… as an encrypted value, which Warren does not support yet", tag)
			}
			return nil
		}},
		confKey{"ssl_cert_login_from", func(s *confState, e rabbitconf.Entry) error {
			from, err := tlsconf.ParseLoginFrom(e.Value)
			s.cfg.TLS.CertLogin.From = from
			return err
		}},
		confKey{"ssl_cert_login_san_type", func(s *confState, e rabbitconf.Entry) error {
			typ, err := tlsconf.ParseSANType(e.Value)
			s.cfg.TLS.CertLogin.SANType = typ
			return err
		}},
		confKey{"ssl_cert_login_san_index", func(s *confState, e rabbitconf.Entry) error {
			n, err := rabbitconf.ParseInt(e.Value)
			if err == nil && (n < 0 || n > math.MaxInt32) {
				err = fmt.Errorf("%d is not a non-negative integer", n)
			}
			s.cfg.TLS.CertLogin.SANIndex = int(n)
			return err
		}},
		confKey{"connection_max", setConnectionMax},
		confKey{"max_connections", setConnectionMax},
		confKey{"stream.max_connections", func(s *confState, e rabbitconf.Entry) error {
			n, err := parseConnectionMax(e.Value)
			s.cfg.StreamConnectionMax = n
			return err
		}},
		confKey{"channel_max_per_node", func(s *confState, e rabbitconf.Entry) error {
			if e.Value == "infinity" {
				s.cfg.ChannelMaxPerNode = 0
				return nil
			}
			n, err := rabbitconf.ParseInt(e.Value)
			if err != nil || n <= 0 || n > math.MaxInt32 {
				return fmt.Errorf("%q should be positive integer or 'infinity'", e.Value)
			}
			s.cfg.ChannelMaxPerNode = int(n)
			return nil
		}},
	)
}

// setConnectionMax applies connection_max or its alias max_connections.
func setConnectionMax(s *confState, e rabbitconf.Entry) error {
	if s.connectionMax != nil {
		return fmt.Errorf("connection_max and max_connections are the same setting, already set on line %d; keep one", s.connectionMax.Line)
	}
	s.connectionMax = &e
	n, err := parseConnectionMax(e.Value)
	s.cfg.ConnectionMax = n
	return err
}

// parseConnectionMax reads a connection limit: infinity (0: none) or a
// non-negative integer, whose 0 refuses every connection (-1).
func parseConnectionMax(v string) (int, error) {
	if v == "infinity" {
		return 0, nil
	}
	n, err := rabbitconf.ParseInt(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%q should be a non-negative integer or 'infinity'", v)
	}
	if n == 0 {
		return -1, nil
	}
	return int(n), nil
}

// finishAuth puts auth_mechanisms in order: by key, as RabbitMQ sorts
// them (auth_mechanisms.10 before auth_mechanisms.2).
func (s *confState) finishAuth() {
	if s.mechanisms == nil {
		return
	}
	s.cfg.SASL.Mechanisms = []string{}
	for _, k := range slices.Sorted(maps.Keys(s.mechanisms)) {
		s.cfg.SASL.Mechanisms = append(s.cfg.SASL.Mechanisms, s.mechanisms[k])
	}
}
