package amqp1

import (
	"cmp"
	"slices"
	"time"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"

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
	for _, s := range c.mu.sessions {
		ci.AMQP10Sessions = append(ci.AMQP10Sessions, s.infoLocked())
	}
	c.mu.Unlock()
	slices.SortFunc(ci.AMQP10Sessions, func(a, b queues.SessionInfo) int { return cmp.Compare(a.ChannelNumber, b.ChannelNumber) })
	return ci
}

// infoLocked is the session as RabbitMQ 4.x's
// /api/connections/{name}/sessions shows it, links by handle.
// REQUIRES: c.mu held.
func (s *session) infoLocked() queues.SessionInfo {
	si := queues.SessionInfo{
		ChannelNumber:        s.channel,
		HandleMax:            s.handleMax,
		NextIncomingID:       s.nextIncomingID,
		IncomingWindow:       s.incomingWindow,
		NextOutgoingID:       s.nextOutgoingID,
		RemoteIncomingWindow: s.remoteIncomingWind,
		RemoteOutgoingWindow: s.remoteOutgoingWind,
		OutgoingUnsettled:    len(s.unsettled),
		IncomingLinks:        []queues.IncomingLinkInfo{},
		OutgoingLinks:        []queues.OutgoingLinkInfo{},
	}
	// The management node's links, as RabbitMQ lists them.
	for _, l := range s.mgmtIn {
		si.IncomingLinks = append(si.IncomingLinks, queues.IncomingLinkInfo{Handle: l.handle, LinkName: l.name,
			SndSettleMode: "settled", TargetAddress: mgmtAddress, MaxMessageSize: s.c.cfg.MaxMessageSize,
			DeliveryCount: l.deliveryCount, Credit: l.credit})
	}
	for _, l := range s.mgmtOut {
		si.OutgoingLinks = append(si.OutgoingLinks, queues.OutgoingLinkInfo{Handle: l.handle, LinkName: l.name,
			SourceAddress: mgmtAddress, SendSettled: true, Filter: []map[string]any{},
			DeliveryCount: l.deliveryCount, Credit: l.credit})
	}
	for _, l := range s.in {
		si.IncomingLinks = append(si.IncomingLinks, queues.IncomingLinkInfo{
			Handle:              l.handle,
			LinkName:            l.name,
			SndSettleMode:       sndModeName(l.sndMode),
			TargetAddress:       l.addr,
			MaxMessageSize:      s.c.cfg.MaxMessageSize,
			DeliveryCount:       l.deliveryCount,
			Credit:              l.credit,
			UnconfirmedMessages: int(l.unconfirmed.Load()),
		})
	}
	for _, l := range s.outs {
		si.OutgoingLinks = append(si.OutgoingLinks, queues.OutgoingLinkInfo{
			Handle:         l.handle,
			LinkName:       l.name,
			SourceAddress:  l.addr,
			QueueName:      l.queue,
			SendSettled:    l.noAck,
			MaxMessageSize: l.maxMsg,
			Filter:         filterInfo(l.filter),
			DeliveryCount:  l.deliveryCount,
			Credit:         l.credit,
		})
	}
	slices.SortFunc(si.IncomingLinks, func(a, b queues.IncomingLinkInfo) int { return cmp.Compare(a.Handle, b.Handle) })
	slices.SortFunc(si.OutgoingLinks, func(a, b queues.OutgoingLinkInfo) int { return cmp.Compare(a.Handle, b.Handle) })
	return si
}

// sndModeName is RabbitMQ's name of a sender settle mode.
func sndModeName(m frame.SenderSettleMode) string {
	switch m {
	case frame.SndSettled:
		return "settled"
	case frame.SndMixed:
		return "mixed"
	}
	return "unsettled"
}

// filterInfo lists source filters as RabbitMQ's API does: name,
// descriptor, value (a map as a list of key and value).
func filterInfo(m amqp10.Map) []map[string]any {
	out := []map[string]any{}
	for _, e := range m {
		name, _ := e.Key.(amqp10.Symbol)
		d, ok := e.Value.(amqp10.Described)
		if !ok {
			continue
		}
		out = append(out, map[string]any{"name": string(name), "descriptor": filterJSON(d.Descriptor), "value": filterJSON(d.Value)})
	}
	return out
}

// filterJSON turns an AMQP 1.0 value into what encoding/json can write.
func filterJSON(v any) any {
	switch v := v.(type) {
	case amqp10.Symbol:
		return string(v)
	case amqp10.Map:
		out := []map[string]any{}
		for _, e := range v {
			out = append(out, map[string]any{"key": filterJSON(e.Key), "value": filterJSON(e.Value)})
		}
		return out
	case amqp10.Array:
		return filterJSON([]any(v))
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = filterJSON(x)
		}
		return out
	case amqp10.Described:
		return filterJSON(v.Value)
	case []byte:
		return string(v)
	}
	return v
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
