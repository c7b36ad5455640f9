package streamproto

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/warren-mq/warren/queues"
)

// Server serves the stream protocol on listeners handed to Serve.
type Server struct {
	// Static after NewServer.
	broker        *queues.Broker
	log           *slog.Logger
	advertiseHost string
	advertisePort string
	frameMax      uint32
	heartbeat     uint32
	handshakeWait time.Duration

	sac sacCoordinator // single active consumer groups of all connections

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
		closed    bool
	}
	wg sync.WaitGroup
}

// Config configures a Server.
type Config struct {
	Broker *queues.Broker
	Logger *slog.Logger
	// Advertise is the host:port that Open and Metadata tell clients to
	// connect to.
	Advertise string
	// FrameMax and Heartbeat (seconds) are offered in Tune; zero means
	// DefaultFrameMax and DefaultHeartbeat.
	FrameMax  uint32
	Heartbeat uint32
	// HandshakeTimeout bounds each step before the connection is open;
	// zero means 30 seconds.
	HandshakeTimeout time.Duration
}

// NewServer returns a server for cfg.
func NewServer(cfg Config) (*Server, error) {
	host, port, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("streamproto: advertise %q: %w", cfg.Advertise, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("streamproto: advertise port %q: %w", port, err)
	}
	s := &Server{
		broker:        cfg.Broker,
		log:           cfg.Logger,
		advertiseHost: host,
		advertisePort: port,
		frameMax:      cfg.FrameMax,
		heartbeat:     cfg.Heartbeat,
		handshakeWait: cfg.HandshakeTimeout,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.frameMax == 0 {
		s.frameMax = DefaultFrameMax
	}
	if s.heartbeat == 0 {
		s.heartbeat = DefaultHeartbeat
	}
	if s.handshakeWait == 0 {
		s.handshakeWait = 30 * time.Second
	}
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*conn]struct{}{}
	return s, nil
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("streamproto: server closed")

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go pprof.Do(context.Background(), pprof.Labels("stream-conn", nc.RemoteAddr().String()), func(context.Context) {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.mu.conns, c)
			s.mu.Unlock()
		})
	}
}

// Close stops the listeners, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown()
	}
	s.wg.Wait()
	return nil
}
