package streamproto

import (
	"errors"
	"slices"
	"time"

	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// What the management API sees of a connection (queues.Conn): a snapshot
// taken from other goroutines, and the forced close.
//
// Info reads the handshake's results without locks: the connection is
// added to the broker's list only once they are set (handleOpen), and the
// list's lock orders the two. Publishers and subscriptions are read under
// conn.mu, their counters are atomics: Info never waits for the client.

var _ queues.Conn = (*conn)(nil)

// errForced ends the read loop after CloseForced.
var errForced = errors.New("streamproto: connection closed by the broker")

// Info returns a snapshot of the connection, its publishers and its
// subscriptions.
func (c *conn) Info() queues.ConnInfo {
	peerHost, peerPort := queues.SplitAddr(c.nc.RemoteAddr())
	host, port := queues.SplitAddr(c.nc.LocalAddr())
	props := make(map[string]any, len(c.peerProps))
	for k, v := range c.peerProps {
		props[k] = v
	}
	ci := queues.ConnInfo{
		Name:             c.name,
		Protocol:         queues.ProtocolStream,
		Type:             "network",
		User:             c.user,
		AuthMechanism:    c.mechanism,
		PeerHost:         peerHost,
		PeerPort:         peerPort,
		Host:             host,
		Port:             port,
		ConnectedAt:      c.connectedAt,
		ClientProperties: props,
		UserProvidedName: c.peerProps["connection_name"],
		FrameMax:         c.frameMax,
		Heartbeat:        uint32(time.Duration(c.heartbeat.Load()) / time.Second),
		State:            c.apiState(),
		RecvOct:          c.stats.RecvOct.Load(),
		SendOct:          c.stats.SendOct.Load(),
		RecvCnt:          c.stats.RecvCnt.Load(),
		SendCnt:          c.stats.SendCnt.Load(),
	}
	if c.tls != nil {
		in := tlsconf.ConnInfo(*c.tls)
		ci.SSL, ci.TLS = true, &in
	}
	c.mu.Lock()
	ci.VHost = c.mu.vhost
	pubs := make([]*publisher, 0, len(c.mu.publishers))
	for _, p := range c.mu.publishers {
		pubs = append(pubs, p)
	}
	subs := make([]*subscription, 0, len(c.mu.subs))
	for _, s := range c.mu.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	slices.SortFunc(pubs, func(a, b *publisher) int { return int(a.id) - int(b.id) })
	slices.SortFunc(subs, func(a, b *subscription) int { return int(a.id) - int(b.id) })
	ci.StreamPublishers = make([]queues.StreamPublisherInfo, 0, len(pubs))
	for _, p := range pubs {
		ci.StreamPublishers = append(ci.StreamPublishers, queues.StreamPublisherInfo{
			PublisherID: p.id,
			Queue:       queues.QueueRef{Name: p.stream, VHost: ci.VHost},
			Reference:   p.reference,
			Published:   p.published.Load(),
			Confirmed:   p.confirmed.Load(),
			Errored:     p.errored.Load(),
		})
	}
	ci.StreamConsumers = make([]queues.StreamConsumerInfo, 0, len(subs))
	for _, s := range subs {
		ci.StreamConsumers = append(ci.StreamConsumers, s.info(ci.VHost))
	}
	return ci
}

// info describes the subscription. Offset and OffsetLag follow
// RabbitMQ's stream reader: the offset is the last one delivered (before
// the first delivery, where reading starts), the lag the committed
// records not delivered yet, 0 for a single active consumer that is not
// active.
func (s *subscription) info(vhost string) queues.StreamConsumerInfo {
	props := s.props
	if props == nil {
		props = map[string]string{}
	}
	active := s.sac == nil || s.active.Load()
	next, consumed := s.next.Load(), s.consumed.Load()
	offset := next
	if consumed > 0 && next > 0 {
		offset = next - 1
	}
	var lag uint64
	if end := s.s.CommittedOffset() + 1; active && end > 0 && uint64(end) > next {
		lag = uint64(end) - next
	}
	return queues.StreamConsumerInfo{
		SubscriptionID: s.id,
		Queue:          queues.QueueRef{Name: s.stream, VHost: vhost},
		Offset:         offset,
		OffsetLag:      lag,
		Credits:        int64(s.credit.Load()),
		Consumed:       consumed,
		Properties:     props,
		Active:         active,
		ActivityStatus: queues.ActivityStatus(s.sac != nil, active),
	}
}

// CloseForced closes the connection on the broker's behalf. RabbitMQ's
// stream reader sends no Close then (its {shutdown, Explanation} stops
// the reader, which closes the socket), nor does this: the reader
// goroutine, woken by a read deadline in the past (or from waiting for
// publish credits), stops the subscriptions, lets the writer send what is
// queued and closes the socket.
// Counters returns the connection's message counters (queues.Conn).
func (c *conn) Counters() (queues.Proto, *queues.Counters) { return queues.ProtoStream, &c.ctr }

func (c *conn) CloseForced(reason string) {
	c.forceOnce.Do(func() {
		c.log.Info("closing stream connection", "reason", reason)
		close(c.forced)
		c.nc.SetReadDeadline(time.Now())
	})
}

// isForced reports whether CloseForced was called.
func (c *conn) isForced() bool {
	select {
	case <-c.forced:
		return true
	default:
		return false
	}
}
