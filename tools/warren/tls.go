package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/mgmt"
)

// certs are the TLS certificates of the listeners that use TLS (nil:
// none does): ssl_options for AMQPS and the stream protocol over TLS,
// management.ssl for HTTPS, prometheus.ssl for the Prometheus endpoint.
type certs struct {
	broker, https, prometheus *tlsconf.Reloader
}

// loadCerts reads the certificates of the TLS listeners cfg turns on.
func loadCerts(cfg TLSConfig) (*certs, error) {
	var c certs
	var err error
	if cfg.AMQPListen != "" || cfg.StreamListen != "" {
		if c.broker, err = tlsconf.Load(cfg.Options); err != nil {
			return nil, fmt.Errorf("AMQPS or stream TLS listener: ssl_options: %w", err)
		}
	}
	if cfg.HTTPSListen != "" {
		if c.https, err = tlsconf.Load(cfg.HTTPS); err != nil {
			return nil, fmt.Errorf("management HTTPS listener: management.ssl: %w", err)
		}
	}
	if cfg.PrometheusListen != "" {
		if c.prometheus, err = tlsconf.Load(cfg.Prometheus); err != nil {
			return nil, fmt.Errorf("prometheus.ssl (the Prometheus HTTPS listener): %w", err)
		}
	}
	return &c, nil
}

// reload reads every certificate again; one that fails to load keeps
// its old certificates, and the error says why. Open connections keep
// their sessions.
func (c *certs) reload(logger *slog.Logger) error {
	var errs []error
	for _, r := range []struct {
		name string
		r    *tlsconf.Reloader
	}{{"ssl_options", c.broker}, {"management.ssl", c.https}, {"prometheus.ssl", c.prometheus}} {
		if r.r == nil {
			continue
		}
		if err := r.r.Reload(); err != nil {
			logger.Error("TLS certificates not reloaded; the old ones stay in use", "options", r.name, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
			continue
		}
		logger.Info("TLS certificates reloaded", "options", r.name, "subject", r.r.Leaf().Subject.String(), "not_after", r.r.Leaf().NotAfter)
	}
	if len(errs) > 0 {
		return fmt.Errorf("reload: %v", errs)
	}
	return nil
}

// reloadOnSIGHUP reloads the certificates at every SIGHUP until ctx
// ends.
func (c *certs) reloadOnSIGHUP(ctx context.Context, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				c.reload(logger)
			case <-ctx.Done():
				return
			}
		}
	}()
}

// listenSpec is one listener of a protocol, plain or TLS.
type listenSpec struct {
	addr     string            // listen address; "" for none
	certs    *tlsconf.Reloader // nil: plain TCP
	protocol string            // as the management API lists it: "amqp", "amqp/ssl", ...
	bound    *net.Addr         // set to the bound address
}

// listenEach listens on each spec that has an address. On error it
// closes the listeners it opened.
func listenEach(specs ...listenSpec) ([]net.Listener, []mgmt.Listener, error) {
	var lns []net.Listener
	var listed []mgmt.Listener
	for _, s := range specs {
		if s.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return nil, nil, err
		}
		*s.bound = ln.Addr()
		if s.certs != nil {
			ln = tls.NewListener(ln, s.certs.Config())
		}
		lns = append(lns, ln)
		listed = append(listed, mgmt.Listener{Protocol: s.protocol, Addr: ln.Addr()})
	}
	return lns, listed, nil
}

// advertiseTLSAddr is the host:port stream clients connected over TLS
// are told, as RabbitMQ's stream.advertised_tls_host and _port:
// advertiseTLS's host, else the plain advertised host; its port, else
// the TLS listener's. "" without a TLS listener.
func advertiseTLSAddr(advertiseTLS, advertise string, ln net.Addr) (string, error) {
	if ln == nil {
		return "", nil
	}
	host, port := "", ""
	if advertiseTLS != "" {
		var err error
		if host, port, err = net.SplitHostPort(advertiseTLS); err != nil {
			return "", fmt.Errorf("stream TLS advertise address: %w", err)
		}
	}
	if host == "" {
		host, _, _ = net.SplitHostPort(advertise)
	}
	return advertiseAddr(net.JoinHostPort(host, port), ln)
}
