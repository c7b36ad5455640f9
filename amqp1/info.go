package amqp1

import (
	"time"

	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

var _ queues.Conn = (*conn)(nil)

// Info returns a snapshot of the connection as the management API shows
// it: protocol "AMQP 1-0", as RabbitMQ's; sessions count as channels.
func (c *conn) Info() queues.ConnInfo {
	peerHost, peerPort := queues.SplitAddr(c.nc.RemoteAddr())
	host, port := queues.SplitAddr(c.nc.LocalAddr())
	ci := queues.ConnInfo{
		Name:          c.name,
		Protocol:      queues.ProtocolAMQP10,
		Type:          "network",
		User:          c.user,
		VHost:         c.vhost,
		AuthMechanism: c.mechanism,
		PeerHost:      peerHost,
		PeerPort:      peerPort,
		Host:          host,
		Port:          port,
		ConnectedAt:   c.connectedAt,
		ClientProperties: map[string]any{
			"container_id": c.containerID,
		},
		FrameMax:   c.cfg.MaxFrameSize,
		ChannelMax: c.channelMax,
		Heartbeat:  uint32(time.Duration(c.heartbeat.Load()) * 2 / time.Second),
		State:      c.state(),
		SSL:        c.tls != nil,
		RecvOct:    c.stats.RecvOct.Load(),
		SendOct:    c.stats.SendOct.Load(),
		RecvCnt:    c.stats.RecvCnt.Load(),
		SendCnt:    c.stats.SendCnt.Load(),
	}
	if c.tls != nil {
		in := tlsconf.ConnInfo(*c.tls)
		ci.TLS = &in
	}
	c.mu.Lock()
	ci.Channels = len(c.mu.sessions)
	c.mu.Unlock()
	return ci
}

// Counters returns the connection's message counters (queues.Conn).
func (c *conn) Counters() (queues.Proto, *queues.Counters) { return queues.ProtoAMQP10, &c.ctr }

// state is the connection's state as RabbitMQ's API shows it: "flow"
// while publisher flow control holds the reader and for 5 s after, as
// RabbitMQ's reader shows it (and package amqp does).
func (c *conn) state() string {
	if c.credit.Flow(5 * time.Second) {
		return queues.StateFlow
	}
	return queues.StateRunning
}
