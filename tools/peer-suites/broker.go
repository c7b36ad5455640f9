package main

import (
	"log/slog"
	"net"
	"os"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/mgmt"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
	"github.com/warren-mq/warren/superstream"
)

// The suites' broker: Warren in this process, with its defaults, on the
// ports the suites expect (AMQP 5672, stream 5552 advertised as
// localhost:5552, the management HTTP API 15672; every address, IPv6
// too, as the daemon's defaults), inside the private network namespace
// main set up. The stream front end and the management API share one
// super stream manager, as in the daemon.

type suiteBroker struct {
	b     *queues.Broker
	super *superstream.Manager
	dir   string
	stops []func() // in start order; close runs them backwards
}

// server is what each front end has: Serve until Close.
type server interface {
	Serve(net.Listener) error
	Close() error
}

func startBroker(logger *slog.Logger) (*suiteBroker, error) {
	dir, err := os.MkdirTemp("", "warren-peer-suites-")
	if err != nil {
		return nil, err
	}
	b, err := queues.Open(dir, queues.Options{Logger: logger})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sb := &suiteBroker{b: b, super: superstream.NewManager(b), dir: dir}
	var lns []net.Listener
	for _, addr := range []string{":5672", ":5552", ":15672"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			sb.close()
			return nil, err
		}
		lns = append(lns, ln)
	}
	as := amqp.NewServer(amqp.Config{Broker: b, Logger: logger})
	ss, err := streamproto.NewServer(streamproto.Config{Broker: b, Logger: logger, Advertise: "localhost:5552", SuperStreams: sb.super})
	if err != nil {
		for _, l := range lns {
			l.Close()
		}
		sb.close()
		return nil, err
	}
	// The node's host is the advertised stream host, as in RabbitMQ
	// (rabbit@<host> advertises <host>): the stream-js suite checks that
	// a publisher connects to the host in its stream's "node".
	api := mgmt.New(mgmt.Config{
		Broker: b, SuperStreams: sb.super, ConsumerGroups: ss.ConsumerGroups, Logger: logger, Node: "warren@localhost",
		Listeners: []mgmt.Listener{{Protocol: "amqp", Addr: lns[0].Addr()}, {Protocol: "stream", Addr: lns[1].Addr()}, {Protocol: "http", Addr: lns[2].Addr()}},
	})
	for i, srv := range []server{as, ss, api} {
		done := make(chan struct{})
		go func() { srv.Serve(lns[i]); close(done) }()
		sb.stops = append(sb.stops, func() { srv.Close(); <-done })
	}
	return sb, nil
}

// The stream-js suite's user and super stream (see the package doc).
const (
	streamJSUser     = "rabbit"
	streamJSPassword = "rabbit"
)

// setup gives Warren what a suite's own CI sets up in RabbitMQ before it
// runs.
func (sb *suiteBroker) setup(suite string) error {
	switch suite {
	case "stream-js":
		// RabbitMQ's default user as the suite's docker-compose.yaml
		// sets it (RABBITMQ_DEFAULT_USER), and the super stream its CI
		// adds (rabbitmq-streams add_super_stream super-stream-test
		// --partitions 2).
		if err := sb.b.AddUser(streamJSUser, streamJSPassword, "administrator"); err != nil {
			return err
		}
		all := queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}
		if err := sb.b.SetPermissions(streamJSUser, queues.DefaultVHost, all); err != nil {
			return err
		}
		const ss = "super-stream-test"
		return sb.super.Create(streamJSUser, queues.DefaultVHost, ss, []string{ss + "-0", ss + "-1"}, []string{"0", "1"}, nil)
	}
	return nil
}

func (sb *suiteBroker) close() {
	for i := len(sb.stops) - 1; i >= 0; i-- {
		sb.stops[i]()
	}
	sb.b.Close()
	os.RemoveAll(sb.dir)
}
