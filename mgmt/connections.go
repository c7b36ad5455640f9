package mgmt

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/warren-mq/warren/queues"
)

// The connection, channel and consumer endpoints of RabbitMQ's management
// API, and rabbitmq_stream_management's stream connections, publishers
// and consumers, read from the broker's list of open connections
// (queues.Conn). As RabbitMQ: administrators and monitoring users see
// every connection; other management users only their own (and their
// channels and consumers), and may close only their own.
func (s *Server) registerConnections() {
	s.handle("GET", "/api/connections", accessManagement, func(q *request) error {
		return q.list(s.connObjs(s.visibleConns(q, "", "")))
	})
	s.handle("GET", "/api/vhosts/{vhost}/connections", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.connObjs(s.visibleConns(q, v, "")))
	})
	s.handle("GET", "/api/connections/{name}", accessManagement, func(q *request) error {
		ci, err := s.connFor(q, q.Var("name"), "")
		if err != nil {
			return err
		}
		return q.reply(s.connObj(ci))
	})
	s.handle("DELETE", "/api/connections/{name}", accessManagement, func(q *request) error {
		return s.closeConn(q, q.Var("name"), "")
	})
	s.handle("GET", "/api/connections/{name}/channels", accessManagement, func(q *request) error {
		ci, err := s.connFor(q, q.Var("name"), "")
		if err != nil {
			return err
		}
		items := make([]obj, 0, len(ci.AMQPChannels))
		for _, ch := range ci.AMQPChannels {
			items = append(items, s.channelObj(ci, ch))
		}
		return q.list(items)
	})
	s.handle("GET", "/api/connections/{name}/sessions", accessManagement, func(q *request) error {
		// RabbitMQ 4.x's: an AMQP 1.0 connection's sessions and links.
		ci, err := s.connFor(q, q.Var("name"), "")
		if err != nil {
			return err
		}
		if ci.Protocol != queues.ProtocolAMQP10 {
			return errBadRequest("connection does not use AMQP 1.0")
		}
		items := make([]obj, 0, len(ci.AMQP10Sessions))
		for _, si := range ci.AMQP10Sessions {
			o, err := jsonObj(si)
			if err != nil {
				return err
			}
			items = append(items, o)
		}
		return q.list(items)
	})

	s.handle("GET", "/api/channels", accessManagement, func(q *request) error {
		return q.list(s.channelObjs(s.visibleConns(q, "", "")))
	})
	s.handle("GET", "/api/vhosts/{vhost}/channels", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.channelObjs(s.visibleConns(q, v, "")))
	})
	s.handle("GET", "/api/channels/{name}", accessManagement, func(q *request) error {
		ci, ch, ok := s.findChannel(q.Var("name"))
		if !ok {
			return errNotFound()
		}
		if !q.ownsOrMonitors(ci) {
			return errNotAuthorised("User not authorised to access object")
		}
		o := s.channelObj(ci, ch)
		details := make([]obj, 0, len(ch.Consumers))
		for _, cs := range ch.Consumers {
			details = append(details, s.consumerObj(ci, ch, cs))
		}
		o["consumer_details"] = details
		return q.reply(o)
	})

	s.handle("GET", "/api/consumers", accessManagement, func(q *request) error {
		return q.list(s.consumerObjs(s.visibleConns(q, "", "")))
	})
	s.handle("GET", "/api/consumers/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.consumerObjs(s.visibleConns(q, v, "")))
	})

	stream := queues.ProtocolStream
	s.handle("GET", "/api/stream/connections", accessManagement, func(q *request) error {
		return q.list(s.connObjs(s.visibleConns(q, "", stream)))
	})
	s.handle("GET", "/api/stream/connections/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.connObjs(s.visibleConns(q, v, stream)))
	})
	s.handle("GET", "/api/stream/connections/{vhost}/{name}", accessManagement, func(q *request) error {
		ci, err := s.streamConnFor(q)
		if err != nil {
			return err
		}
		return q.reply(s.connObj(ci))
	})
	s.handle("DELETE", "/api/stream/connections/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return s.closeConn(q, q.Var("name"), v)
	})
	s.handle("GET", "/api/stream/connections/{vhost}/{name}/publishers", accessManagement, func(q *request) error {
		ci, err := s.streamConnFor(q)
		if err != nil {
			return err
		}
		return q.list(s.streamPublisherObjs([]queues.ConnInfo{ci}, ""))
	})
	s.handle("GET", "/api/stream/connections/{vhost}/{name}/consumers", accessManagement, func(q *request) error {
		ci, err := s.streamConnFor(q)
		if err != nil {
			return err
		}
		return q.list(s.streamConsumerObjs([]queues.ConnInfo{ci}))
	})
	s.handle("GET", "/api/stream/publishers", accessManagement, func(q *request) error {
		return q.list(s.streamPublisherObjs(s.visibleConns(q, "", stream), ""))
	})
	s.handle("GET", "/api/stream/publishers/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.streamPublisherObjs(s.visibleConns(q, v, stream), ""))
	})
	s.handle("GET", "/api/stream/publishers/{vhost}/{stream}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		if _, ok := s.b.LookupStream(v, q.Var("stream")); !ok {
			return errNotFound()
		}
		return q.list(s.streamPublisherObjs(s.visibleConns(q, v, stream), q.Var("stream")))
	})
	s.handle("GET", "/api/stream/consumers", accessManagement, func(q *request) error {
		return q.list(s.streamConsumerObjs(s.visibleConns(q, "", stream)))
	})
	s.handle("GET", "/api/stream/consumers/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.streamConsumerObjs(s.visibleConns(q, v, stream)))
	})
}

// defaultCloseReason is RabbitMQ's when a DELETE carries no X-Reason.
const defaultCloseReason = "Closed via management plugin"

// ownsOrMonitors reports whether the user may see the connection:
// administrators and monitoring users see all, others their own.
func (q *request) ownsOrMonitors(ci queues.ConnInfo) bool {
	return q.seesAllVHosts() || ci.User == q.user.Name
}

// visibleConns snapshots the connections the user may see, of vhost and
// protocol when not "", in name order.
func (s *Server) visibleConns(q *request, vhost, protocol string) []queues.ConnInfo {
	var out []queues.ConnInfo
	for _, c := range s.b.Conns() {
		ci := c.Info()
		if (vhost != "" && ci.VHost != vhost) || (protocol != "" && ci.Protocol != protocol) || !q.ownsOrMonitors(ci) {
			continue
		}
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b queues.ConnInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// findConn returns the open connection called name.
func (s *Server) findConn(name string) (queues.Conn, queues.ConnInfo, bool) {
	for _, c := range s.b.Conns() {
		if ci := c.Info(); ci.Name == name {
			return c, ci, true
		}
	}
	return nil, queues.ConnInfo{}, false
}

// connFor returns connection name (in vhost when not "") if the user may
// see it: 404 when there is none, 401 when it is another user's.
func (s *Server) connFor(q *request, name, vhost string) (queues.ConnInfo, error) {
	_, ci, ok := s.findConn(name)
	if !ok || (vhost != "" && ci.VHost != vhost) {
		return ci, errNotFound()
	}
	if !q.ownsOrMonitors(ci) {
		return ci, errNotAuthorised("User not authorised to access object")
	}
	return ci, nil
}

// streamConnFor is connFor for /api/stream/connections/{vhost}/{name}:
// only stream connections of that vhost.
func (s *Server) streamConnFor(q *request) (queues.ConnInfo, error) {
	v, err := q.vhost()
	if err != nil {
		return queues.ConnInfo{}, err
	}
	ci, err := s.connFor(q, q.Var("name"), v)
	if err == nil && ci.Protocol != queues.ProtocolStream {
		return ci, errNotFound()
	}
	return ci, err
}

// closeConn force-closes connection name (in vhost when not ""), with the
// X-Reason header as the reason. As RabbitMQ, administrators may close
// any connection and other users their own.
func (s *Server) closeConn(q *request, name, vhost string) error {
	c, ci, ok := s.findConn(name)
	if !ok || (vhost != "" && (ci.VHost != vhost || ci.Protocol != queues.ProtocolStream)) {
		return errNotFound()
	}
	if !q.user.HasTag("administrator") && ci.User != q.user.Name {
		return errNotAuthorised("User not authorised to access object")
	}
	reason := q.r.Header.Get("X-Reason")
	if reason == "" {
		reason = defaultCloseReason
	}
	c.CloseForced(reason)
	return q.noContent(false)
}

// connObjs builds /api/connections' objects.
func (s *Server) connObjs(cis []queues.ConnInfo) []obj {
	items := make([]obj, 0, len(cis))
	for _, ci := range cis {
		items = append(items, s.connObj(ci))
	}
	return items
}

// connObj is a connection as RabbitMQ's /api/connections shows it
// (without rates and garbage collection).
func (s *Server) connObj(ci queues.ConnInfo) obj {
	o := obj{
		"name":                      ci.Name,
		"node":                      s.cfg.Node,
		"type":                      ci.Type,
		"protocol":                  ci.Protocol,
		"user":                      ci.User,
		"user_who_performed_action": ci.User,
		"vhost":                     ci.VHost,
		"auth_mechanism":            ci.AuthMechanism,
		"host":                      ci.Host,
		"port":                      ci.Port,
		"peer_host":                 ci.PeerHost,
		"peer_port":                 ci.PeerPort,
		"connected_at":              ci.ConnectedAt,
		"client_properties":         jsonArgs(ci.ClientProperties),
		"frame_max":                 ci.FrameMax,
		"channel_max":               ci.ChannelMax,
		"timeout":                   ci.Heartbeat,
		"state":                     ci.State,
		"ssl":                       ci.SSL,
		"channels":                  ci.Channels,
		"recv_oct":                  ci.RecvOct,
		"recv_cnt":                  ci.RecvCnt,
		"send_oct":                  ci.SendOct,
		"send_cnt":                  ci.SendCnt,
		"send_pend":                 0,
		"peer_cert_issuer":          nil,
		"peer_cert_subject":         nil,
		"peer_cert_validity":        nil,
		"ssl_protocol":              nil,
		"ssl_key_exchange":          nil,
		"ssl_cipher":                nil,
		"ssl_hash":                  nil,
	}
	if t := ci.TLS; t != nil {
		o["ssl_protocol"], o["ssl_key_exchange"], o["ssl_cipher"], o["ssl_hash"] = t.Protocol, t.KeyExchange, t.Cipher, t.Hash
		if t.PeerCertSubject != "" {
			o["peer_cert_subject"], o["peer_cert_issuer"], o["peer_cert_validity"] = t.PeerCertSubject, t.PeerCertIssuer, t.PeerCertValidity
		}
	}
	if ci.UserProvidedName != "" {
		o["user_provided_name"] = ci.UserProvidedName
	}
	if ci.Protocol == queues.ProtocolStream {
		o["subscriptions"] = len(ci.StreamConsumers)
	}
	return o
}

// connDetails is the connection_details of a stream publisher or
// consumer.
func (s *Server) connDetails(ci queues.ConnInfo) obj {
	return obj{"name": ci.Name, "user": ci.User, "node": s.cfg.Node, "peer_host": ci.PeerHost, "peer_port": ci.PeerPort}
}

// channelObjs builds /api/channels' objects.
func (s *Server) channelObjs(cis []queues.ConnInfo) []obj {
	var items []obj
	for _, ci := range cis {
		for _, ch := range ci.AMQPChannels {
			items = append(items, s.channelObj(ci, ch))
		}
	}
	return items
}

// channelObj is a channel as RabbitMQ's /api/channels shows it (without
// rates and garbage collection).
func (s *Server) channelObj(ci queues.ConnInfo, ch queues.ChannelInfo) obj {
	return obj{
		"name":                      ch.Name,
		"number":                    ch.Number,
		"node":                      s.cfg.Node,
		"user":                      ch.User,
		"user_who_performed_action": ch.User,
		"vhost":                     ch.VHost,
		"connection_details":        obj{"name": ci.Name, "peer_host": ci.PeerHost, "peer_port": ci.PeerPort},
		"prefetch_count":            ch.PrefetchCount,
		"global_prefetch_count":     ch.GlobalPrefetchCount,
		"confirm":                   ch.Confirm,
		"transactional":             ch.Transactional,
		"messages_unacknowledged":   ch.MessagesUnacknowledged,
		"messages_unconfirmed":      ch.MessagesUnconfirmed,
		"messages_uncommitted":      0,
		"acks_uncommitted":          0,
		"consumer_count":            ch.ConsumerCount,
		"pending_raft_commands":     0,
		"state":                     ch.State,
	}
}

// findChannel returns the channel called name ("<connection> (<n>)").
func (s *Server) findChannel(name string) (queues.ConnInfo, queues.ChannelInfo, bool) {
	i := strings.LastIndex(name, " (")
	if i < 0 || !strings.HasSuffix(name, ")") {
		return queues.ConnInfo{}, queues.ChannelInfo{}, false
	}
	n, err := strconv.ParseUint(name[i+2:len(name)-1], 10, 16)
	if err != nil {
		return queues.ConnInfo{}, queues.ChannelInfo{}, false
	}
	_, ci, ok := s.findConn(name[:i])
	if !ok {
		return ci, queues.ChannelInfo{}, false
	}
	for _, ch := range ci.AMQPChannels {
		if ch.Number == uint16(n) {
			return ci, ch, true
		}
	}
	return ci, queues.ChannelInfo{}, false
}

// consumerObjs builds /api/consumers' objects: every AMQP consumer, and
// every stream subscription as RabbitMQ lists it there (consumer tag
// "stream.subid-<id>", its properties as arguments).
func (s *Server) consumerObjs(cis []queues.ConnInfo) []obj {
	var items []obj
	for _, ci := range cis {
		for _, ch := range ci.AMQPChannels {
			for _, cs := range ch.Consumers {
				items = append(items, s.consumerObj(ci, ch, cs))
			}
		}
		for _, sc := range ci.StreamConsumers {
			args := make(map[string]any, len(sc.Properties))
			for k, v := range sc.Properties {
				args[k] = v
			}
			items = append(items, obj{
				"consumer_tag":    "stream.subid-" + strconv.Itoa(int(sc.SubscriptionID)),
				"queue":           obj{"name": sc.Queue.Name, "vhost": sc.Queue.VHost},
				"ack_required":    false,
				"exclusive":       false,
				"prefetch_count":  0,
				"arguments":       args,
				"active":          sc.Active,
				"activity_status": sc.ActivityStatus,
				"channel_details": obj{
					"name": ci.Name, "connection_name": ci.Name, "number": 0, "node": s.cfg.Node,
					"peer_host": ci.PeerHost, "peer_port": ci.PeerPort, "user": ci.User,
				},
			})
		}
	}
	return items
}

// consumerObj is an AMQP consumer as RabbitMQ's /api/consumers shows it.
func (s *Server) consumerObj(ci queues.ConnInfo, ch queues.ChannelInfo, cs queues.ConsumerInfo) obj {
	return obj{
		"consumer_tag":    cs.ConsumerTag,
		"queue":           obj{"name": cs.Queue.Name, "vhost": cs.Queue.VHost},
		"ack_required":    cs.AckRequired,
		"exclusive":       cs.Exclusive,
		"prefetch_count":  cs.PrefetchCount,
		"arguments":       jsonArgs(cs.Arguments),
		"active":          cs.Active,
		"activity_status": cs.ActivityStatus,
		"channel_details": obj{
			"name": ch.Name, "connection_name": ci.Name, "number": ch.Number, "node": s.cfg.Node,
			"peer_host": ci.PeerHost, "peer_port": ci.PeerPort, "user": ch.User,
		},
	}
}

// streamPublisherObjs builds /api/stream/publishers' objects, of stream
// only when not "".
func (s *Server) streamPublisherObjs(cis []queues.ConnInfo, stream string) []obj {
	var items []obj
	for _, ci := range cis {
		for _, p := range ci.StreamPublishers {
			if stream != "" && p.Queue.Name != stream {
				continue
			}
			items = append(items, obj{
				"publisher_id":       p.PublisherID,
				"reference":          p.Reference,
				"published":          p.Published,
				"confirmed":          p.Confirmed,
				"errored":            p.Errored,
				"queue":              obj{"name": p.Queue.Name, "vhost": p.Queue.VHost},
				"connection_details": s.connDetails(ci),
			})
		}
	}
	return items
}

// streamConsumerObjs builds /api/stream/consumers' objects.
func (s *Server) streamConsumerObjs(cis []queues.ConnInfo) []obj {
	var items []obj
	for _, ci := range cis {
		for _, c := range ci.StreamConsumers {
			props := make(map[string]any, len(c.Properties))
			for k, v := range c.Properties {
				props[k] = v
			}
			items = append(items, obj{
				"subscription_id":    c.SubscriptionID,
				"credits":            c.Credits,
				"consumed":           c.Consumed,
				"offset":             c.Offset,
				"offset_lag":         c.OffsetLag,
				"active":             c.Active,
				"activity_status":    c.ActivityStatus,
				"properties":         props,
				"queue":              obj{"name": c.Queue.Name, "vhost": c.Queue.VHost},
				"connection_details": s.connDetails(ci),
			})
		}
	}
	return items
}

// connectionCounts counts the connections and channels the user may see,
// for the overview's object_totals.
// streamConsumerCount counts the consumers of streams in vhosts, of
// every connection: stream protocol subscriptions and AMQP consumers
// of stream queues. (A classic or quorum queue counts its own.) As in
// RabbitMQ, whose object_totals.consumers counts every consumer.
func (s *Server) streamConsumerCount(vhosts []string) int {
	in := make(map[string]bool, len(vhosts))
	for _, v := range vhosts {
		in[v] = true
	}
	n := 0
	for _, c := range s.b.Conns() {
		ci := c.Info()
		for _, sc := range ci.StreamConsumers {
			if in[sc.Queue.VHost] {
				n++
			}
		}
		for _, ch := range ci.AMQPChannels {
			for _, cs := range ch.Consumers {
				if !in[cs.Queue.VHost] {
					continue
				}
				if _, ok := s.b.LookupStream(cs.Queue.VHost, cs.Queue.Name); ok {
					n++
				}
			}
		}
	}
	return n
}

func (s *Server) connectionCounts(q *request) (connections, channels int) {
	for _, ci := range s.visibleConns(q, "", "") {
		connections++
		channels += ci.Channels
	}
	return connections, channels
}

// jsonObj is v as the object its JSON encoding is, for list (which
// sorts and filters objects by field).
func jsonObj(v any) (obj, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var o obj
	err = json.Unmarshal(b, &o)
	return o, err
}
