package amqp

import (
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// What the management API sees of a connection (queues.Conn): a snapshot
// taken from other goroutines, and the forced close.
//
// Info reads the handshake's results without locks: the connection is
// added to the broker's list only once they are set, and the list's lock
// orders the two. It reads the channel table under conn.chmu and each
// channel's state under channel.mu and confirms.mu, one at a time, so it
// waits only for their short critical sections, never for the client.

var _ queues.Conn = (*conn)(nil)

// Info returns a snapshot of the connection and its channels.
func (c *conn) Info() queues.ConnInfo {
	peerHost, peerPort := queues.SplitAddr(c.nc.RemoteAddr())
	host, port := queues.SplitAddr(c.nc.LocalAddr())
	ci := queues.ConnInfo{
		Name:             c.name,
		Protocol:         queues.ProtocolAMQP091,
		Type:             "network",
		User:             c.user,
		VHost:            c.vhost,
		AuthMechanism:    c.mechanism,
		PeerHost:         peerHost,
		PeerPort:         peerPort,
		Host:             host,
		Port:             port,
		ConnectedAt:      c.connectedAt,
		ClientProperties: c.clientProps,
		FrameMax:         c.frameMax,
		ChannelMax:       c.channelMax,
		Heartbeat:        uint32(time.Duration(c.heartbeat.Load()) / time.Second),
		State:            c.state(),
		SSL:              c.ssl,
		RecvOct:          c.stats.RecvOct.Load(),
		SendOct:          c.stats.SendOct.Load(),
		RecvCnt:          c.stats.RecvCnt.Load(),
		SendCnt:          c.stats.SendCnt.Load(),
	}
	if c.tls != nil {
		in := tlsconf.ConnInfo(*c.tls)
		ci.TLS = &in
	}
	ci.UserProvidedName, _ = ci.ClientProperties["connection_name"].(string)
	c.chmu.Lock()
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	c.chmu.Unlock()
	slices.SortFunc(chans, func(a, b *channel) int { return int(a.id) - int(b.id) })
	ci.Channels = len(chans)
	ci.AMQPChannels = make([]queues.ChannelInfo, 0, len(chans))
	for _, ch := range chans {
		ci.AMQPChannels = append(ci.AMQPChannels, ch.info())
	}
	return ci
}

// info returns a snapshot of the channel and its consumers.
func (ch *channel) info() queues.ChannelInfo {
	c := ch.c
	ci := queues.ChannelInfo{
		Number:     ch.id,
		Name:       c.name + " (" + strconv.Itoa(int(ch.id)) + ")",
		User:       c.user,
		VHost:      c.vhost,
		Confirm:    ch.conf.enabled(),
		Publishing: ch.publishing.Load(),
		State:      queues.StateRunning,
	}
	ch.mu.Lock()
	if ch.mu.closed {
		ci.State = queues.StateClosing
	} else if ci.Publishing && c.credit.Flow(channelFlowWindow) {
		ci.State = queues.StateFlow
	}
	ci.PrefetchCount = ch.mu.prefetch
	ci.GlobalPrefetchCount = ch.mu.globalPrefetch
	ci.Transactional = ch.mu.transactional
	ci.MessagesUnacknowledged = len(ch.mu.unacked)
	ci.ConsumerCount = len(ch.mu.consumers)
	consumers := make([]*consumer, 0, len(ch.mu.consumers))
	for _, cs := range ch.mu.consumers {
		consumers = append(consumers, cs)
	}
	ch.mu.Unlock()
	ch.conf.mu.Lock()
	ci.MessagesUnconfirmed = len(ch.conf.mu.pending)
	ch.conf.mu.Unlock()
	slices.SortFunc(consumers, func(a, b *consumer) int {
		switch {
		case a.tag < b.tag:
			return -1
		case a.tag > b.tag:
			return 1
		}
		return 0
	})
	ci.Consumers = make([]queues.ConsumerInfo, 0, len(consumers))
	for _, cs := range consumers {
		ci.Consumers = append(ci.Consumers, cs.info())
	}
	return ci
}

// info describes the consumer; only its queue's lock is taken, for a
// single-active-consumer queue.
func (cs *consumer) info() queues.ConsumerInfo {
	sac, active := false, true
	if qc, ok := cs.sub.(*queues.Consumer); ok {
		sac, active = qc.Queue().SingleActive(), qc.Active()
	}
	return queues.ConsumerInfo{
		ConsumerTag:    cs.tag,
		Queue:          queues.QueueRef{Name: cs.queue, VHost: cs.ch.c.vhost},
		AckRequired:    !cs.noAck,
		Exclusive:      cs.exclusive,
		PrefetchCount:  cs.prefetch,
		Arguments:      cs.args,
		Active:         active,
		ActivityStatus: queues.ActivityStatus(sac, active),
	}
}

// CloseForced closes the connection as RabbitMQ's rabbit_reader does on
// rabbitmqctl close_connection or the management API's DELETE: its
// channels are shut down, connection.close 320 "CONNECTION_FORCED -
// <reason>" is sent, and the socket is dropped after the client's
// close-ok or the close timeout. The reader goroutine does the work: a
// read deadline in the past wakes it from its read, and it finds forced
// set (run).
// Counters returns the connection's message counters (queues.Conn).
func (c *conn) Counters() (queues.Proto, *queues.Counters) { return queues.ProtoAMQP091, &c.ctr }

func (c *conn) CloseForced(reason string) {
	e := newError(wire.ConnectionForced, "%s", reason)
	if !c.forced.CompareAndSwap(nil, e) {
		return
	}
	c.log.Info("closing connection", "reason", reason)
	close(c.kicked)
	c.nc.SetReadDeadline(time.Now())
}

// closeForced is the reader goroutine's side of CloseForced.
func (c *conn) closeForced(e *amqpError) error {
	c.closeChannels()
	return c.hardClose(e)
}

// plainTable copies a field table into plain maps and slices (nested
// tables become map[string]any, at any depth), which is what the
// management API marshals and its callers type-assert.
func plainTable(t wire.Table) map[string]any {
	if t == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = plainValue(v)
	}
	return out
}

func plainValue(v any) any {
	switch v := v.(type) {
	case wire.Table:
		return plainTable(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = plainValue(x)
		}
		return out
	}
	return v
}

// isTLS reports whether nc is a TLS connection.
func isTLS(nc net.Conn) bool {
	_, ok := nc.(*tls.Conn)
	return ok
}
