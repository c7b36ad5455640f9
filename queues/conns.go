package queues

import (
	"net"
	"strconv"
	"sync"

	"github.com/warren-mq/warren/internal/tlsconf"
)

// The broker's registry of client connections, for the management API:
// each protocol front end adds a connection once it is open (the user and
// vhost known; sockets still in their handshake are not listed, as in
// RabbitMQ) and removes it when it ends. Deleting a vhost or a user closes
// their connections, as RabbitMQ's connection tracking does.

// Protocol names, as RabbitMQ's management API shows them.
const (
	ProtocolAMQP091 = "AMQP 0-9-1"
	ProtocolStream  = "stream"
	ProtocolAMQP10  = "AMQP 1-0"
)

// Connection and channel states, as RabbitMQ reports them.
const (
	StateRunning  = "running"
	StateBlocked  = "blocked"  // a publisher no longer read: a resource alarm is on
	StateBlocking = "blocking" // an AMQP connection during an alarm, until it publishes
	StateClosing  = "closing"  // a channel that sent channel.close and awaits close-ok
	// StateFlow is a publisher held by flow control: its reader waits for
	// the log writers (internal/flow), now or a moment ago.
	StateFlow = "flow"
)

// Conn is a client connection as operators see it.
type Conn interface {
	// Info returns a snapshot of the connection. It is safe to call from
	// any goroutine and does not wait behind the client: it takes the
	// connection's locks only briefly.
	Info() ConnInfo
	// CloseForced closes the connection on an operator's or the broker's
	// behalf: AMQP 0-9-1 sends connection.close 320 "CONNECTION_FORCED -
	// <reason>", waits (bounded) for close-ok and drops the socket; the
	// stream protocol drops the socket, as RabbitMQ's stream reader does.
	// It returns at once; the connection ends on its own goroutines. It is
	// safe to call from any goroutine, more than once.
	CloseForced(reason string)
	// Counters returns the connection's protocol and its message
	// counters (metrics.go); nil counters count nothing.
	Counters() (Proto, *Counters)
}

// ConnInfo is what RabbitMQ's /api/connections shows of a connection;
// the JSON names are RabbitMQ's. The slices after the socket counters are
// the details the API shows on their own endpoints, so they are not
// marshalled.
type ConnInfo struct {
	Name             string         `json:"name"`     // "127.0.0.1:54321 -> 127.0.0.1:5672"
	Protocol         string         `json:"protocol"` // ProtocolAMQP091 or ProtocolStream
	Type             string         `json:"type"`     // "network"
	User             string         `json:"user"`
	VHost            string         `json:"vhost"`
	AuthMechanism    string         `json:"auth_mechanism"` // "PLAIN", "AMQPLAIN"
	PeerHost         string         `json:"peer_host"`      // the client's address
	PeerPort         int            `json:"peer_port"`
	Host             string         `json:"host"` // the broker's address the client reached
	Port             int            `json:"port"`
	ConnectedAt      int64          `json:"connected_at"` // Unix ms, when the socket was accepted
	ClientProperties map[string]any `json:"client_properties"`
	// UserProvidedName is the client's connection_name property.
	UserProvidedName string `json:"user_provided_name,omitempty"`
	FrameMax         uint32 `json:"frame_max"`   // negotiated, bytes
	ChannelMax       uint16 `json:"channel_max"` // negotiated; 0 for the stream protocol
	Heartbeat        uint32 `json:"timeout"`     // negotiated heartbeat, seconds
	State            string `json:"state"`       // StateRunning, StateFlow, StateBlocking, StateBlocked
	SSL              bool   `json:"ssl"`
	// TLS is the TLS session of an SSL connection (nil otherwise): the
	// API's ssl_* and peer_cert_* fields.
	TLS      *TLSInfo `json:"-"`
	Channels int      `json:"channels"` // open AMQP channels; 0 for the stream protocol

	// Socket counters since the connection was accepted: bytes, and reads
	// and writes that moved bytes (RabbitMQ's recv_cnt and send_cnt count
	// the socket's packets, as here, not frames). Stream deliveries sent
	// with sendfile count in SendOct and SendCnt too.
	RecvOct uint64 `json:"recv_oct"`
	SendOct uint64 `json:"send_oct"`
	RecvCnt uint64 `json:"recv_cnt"`
	SendCnt uint64 `json:"send_cnt"`

	AMQPChannels     []ChannelInfo         `json:"-"` // AMQP 0-9-1, by channel number
	AMQP10Sessions   []SessionInfo         `json:"-"` // AMQP 1.0, by channel number
	StreamPublishers []StreamPublisherInfo `json:"-"` // stream protocol, by publisher id
	StreamConsumers  []StreamConsumerInfo  `json:"-"` // stream protocol, by subscription id
}

// TLSInfo is what RabbitMQ's /api/connections shows of a TLS session
// (ssl_protocol, ssl_cipher, peer_cert_subject, ...).
type TLSInfo = tlsconf.Info

// ChannelInfo is an AMQP 0-9-1 channel as RabbitMQ's /api/channels shows
// it. Consumers is /api/channels/{name}'s consumer_details, without each
// consumer's channel_details.
type ChannelInfo struct {
	Number uint16 `json:"number"`
	Name   string `json:"name"` // "<connection name> (<number>)"
	User   string `json:"user"`
	VHost  string `json:"vhost"`
	// PrefetchCount is basic.qos global=false: each new consumer's limit.
	PrefetchCount int `json:"prefetch_count"`
	// GlobalPrefetchCount is basic.qos global=true: the channel's limit.
	GlobalPrefetchCount    int  `json:"global_prefetch_count"`
	Confirm                bool `json:"confirm"`
	Transactional          bool `json:"transactional"`
	MessagesUnacknowledged int  `json:"messages_unacknowledged"`
	MessagesUnconfirmed    int  `json:"messages_unconfirmed"`
	ConsumerCount          int  `json:"consumer_count"`
	// Publishing is whether the channel has published (RabbitMQ's
	// publishing_mode; the publishers gauge counts such channels).
	Publishing bool   `json:"-"`
	State      string `json:"state"` // StateRunning, StateFlow or StateClosing

	Consumers []ConsumerInfo `json:"-"` // by tag
}

// SessionInfo is an AMQP 1.0 session as RabbitMQ 4.x's
// /api/connections/{name}/sessions shows it; the JSON names are
// RabbitMQ's.
type SessionInfo struct {
	ChannelNumber        uint16 `json:"channel_number"`
	HandleMax            uint32 `json:"handle_max"`
	NextIncomingID       uint32 `json:"next_incoming_id"`
	IncomingWindow       uint32 `json:"incoming_window"`
	NextOutgoingID       uint32 `json:"next_outgoing_id"`
	RemoteIncomingWindow uint32 `json:"remote_incoming_window"`
	RemoteOutgoingWindow uint32 `json:"remote_outgoing_window"`
	// OutgoingUnsettled counts deliveries sent and not yet settled by
	// the client.
	OutgoingUnsettled int                `json:"outgoing_unsettled_deliveries"`
	IncomingLinks     []IncomingLinkInfo `json:"incoming_links"`
	OutgoingLinks     []OutgoingLinkInfo `json:"outgoing_links"`
}

// IncomingLinkInfo is a link the client sends on (its sender).
type IncomingLinkInfo struct {
	Handle        uint32 `json:"handle"`
	LinkName      string `json:"link_name"`
	SndSettleMode string `json:"snd_settle_mode"` // "settled", "unsettled" or "mixed"
	TargetAddress string `json:"target_address"`  // "" for the null target
	// MaxMessageSize is what Warren accepts, bytes.
	MaxMessageSize uint64 `json:"max_message_size"`
	DeliveryCount  uint32 `json:"delivery_count"`
	Credit         uint32 `json:"credit"`
	// UnconfirmedMessages are unsettled messages not yet stored.
	UnconfirmedMessages int `json:"unconfirmed_messages"`
}

// OutgoingLinkInfo is a link the client receives on (its receiver).
type OutgoingLinkInfo struct {
	Handle         uint32 `json:"handle"`
	LinkName       string `json:"link_name"`
	SourceAddress  string `json:"source_address"`
	QueueName      string `json:"queue_name"`
	SendSettled    bool   `json:"send_settled"`
	MaxMessageSize uint64 `json:"max_message_size"` // the client's; 0: none
	// Filter lists the source's filters Warren applies, as RabbitMQ
	// shows them: name, descriptor and value.
	Filter        []map[string]any `json:"filter"`
	DeliveryCount uint32           `json:"delivery_count"`
	Credit        uint32           `json:"credit"`
}

// ConsumerInfo is an AMQP 0-9-1 consumer as RabbitMQ's /api/consumers
// shows it, without its channel_details.
type ConsumerInfo struct {
	ConsumerTag   string         `json:"consumer_tag"`
	Queue         QueueRef       `json:"queue"`
	AckRequired   bool           `json:"ack_required"`
	Exclusive     bool           `json:"exclusive"`
	PrefetchCount int            `json:"prefetch_count"`
	Arguments     map[string]any `json:"arguments"`
	// Active is false for a waiting consumer of a single-active-consumer
	// queue; ActivityStatus is then "waiting" ("single_active" for the
	// active one, "up" for a consumer of any other queue).
	Active         bool   `json:"active"`
	ActivityStatus string `json:"activity_status"`
}

// QueueRef names a queue or stream, as RabbitMQ's management API nests
// it.
type QueueRef struct {
	Name  string `json:"name"`
	VHost string `json:"vhost"`
}

// StreamPublisherInfo is a stream protocol publisher as RabbitMQ's
// /api/stream/publishers shows it, without its connection_details.
type StreamPublisherInfo struct {
	PublisherID uint8    `json:"publisher_id"`
	Queue       QueueRef `json:"queue"`     // the stream
	Reference   string   `json:"reference"` // "" when the publisher has none
	Published   uint64   `json:"published"` // messages received
	Confirmed   uint64   `json:"confirmed"` // messages confirmed
	Errored     uint64   `json:"errored"`   // messages answered with PublishError
}

// StreamConsumerInfo is a stream protocol subscription as RabbitMQ's
// /api/stream/consumers shows it, without its connection_details.
type StreamConsumerInfo struct {
	SubscriptionID uint8    `json:"subscription_id"`
	Queue          QueueRef `json:"queue"` // the stream
	// Offset is RabbitMQ's: the last offset delivered, or where the
	// subscription starts reading before its first delivery.
	Offset uint64 `json:"offset"`
	// OffsetLag is how many committed records the subscription has not
	// been sent yet; 0 for an inactive single active consumer.
	OffsetLag uint64 `json:"offset_lag"`
	Credits   int64  `json:"credits"`  // chunks the client allows
	Consumed  uint64 `json:"consumed"` // records delivered
	// Properties are the Subscribe properties (single-active-consumer,
	// name, filter.*, ...).
	Properties map[string]string `json:"properties"`
	// Active is false for a waiting single active consumer;
	// ActivityStatus is "up", "single_active" or "waiting".
	Active         bool   `json:"active"`
	ActivityStatus string `json:"activity_status"`
}

// ActivityStatus is RabbitMQ's activity_status of a consumer: "up" when
// it is not a single active consumer, else "single_active" or "waiting".
func ActivityStatus(singleActive, active bool) string {
	switch {
	case !singleActive:
		return "up"
	case active:
		return "single_active"
	}
	return "waiting"
}

// SplitAddr returns the host (without brackets) and port of a TCP
// address, for ConnInfo; other addresses give their string and 0.
func SplitAddr(a net.Addr) (host string, port int) {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String(), ta.Port
	}
	if a == nil {
		return "", 0
	}
	return a.String(), 0
}

// ConnName is RabbitMQ's connection name: "peer -> local", IPv6
// addresses in brackets ("127.0.0.1:54321 -> 127.0.0.1:5672").
func ConnName(peer, local net.Addr) string {
	ph, pp := SplitAddr(peer)
	lh, lp := SplitAddr(local)
	return net.JoinHostPort(ph, strconv.Itoa(pp)) + " -> " + net.JoinHostPort(lh, strconv.Itoa(lp))
}

// connRegistry is the broker's set of open connections.
type connRegistry struct {
	mu struct {
		sync.Mutex
		conns   map[*connEntry]struct{}
		retired retiredCounters // counters of removed entries (metrics.go)
		// perVHost and perUser count the entries by vhost and user, for
		// max-connections; userChannels counts each user's channels, for
		// max-channels (limits.go).
		perVHost, perUser map[string]int
		userChannels      map[string]int
		channels          int // all users' channels, for channel_max_per_node
	}
}

// connEntry is one registration: a connection added twice is listed
// twice, and each remove drops only its own entry.
type connEntry struct {
	c           Conn
	proto       Proto
	ctr         *Counters
	user, vhost string // "" when added by AddConn: not counted for limits
}

// AddConn lists c among the broker's connections until remove is called
// (remove is idempotent). It counts against no limit: front ends use
// OpenConn (limits.go).
func (b *Broker) AddConn(c Conn) (remove func()) {
	e := &connEntry{c: c}
	e.proto, e.ctr = c.Counters()
	remove, _ = b.addConn(e, nil)
	return remove
}

// addConn lists e unless check, called with the registry locked, refuses.
func (b *Broker) addConn(e *connEntry, check func() error) (remove func(), err error) {
	r := &b.conns
	r.mu.Lock()
	if check != nil {
		if err := check(); err != nil {
			r.mu.Unlock()
			return nil, err
		}
	}
	if r.mu.conns == nil {
		r.mu.conns = map[*connEntry]struct{}{}
		r.mu.perVHost = map[string]int{}
		r.mu.perUser = map[string]int{}
	}
	r.mu.conns[e] = struct{}{}
	if e.user != "" {
		r.mu.perVHost[e.vhost]++
		r.mu.perUser[e.user]++
	}
	r.mu.Unlock()
	b.churn.ConnectionsOpened.Add(1)
	return func() {
		r.mu.Lock()
		_, listed := r.mu.conns[e]
		if listed {
			delete(r.mu.conns, e)
			if e.user != "" {
				decr(r.mu.perVHost, e.vhost)
				decr(r.mu.perUser, e.user)
			}
			if e.ctr != nil {
				// Counts the connection makes after this are not kept:
				// it has ended, bar settlements in flight.
				e.ctr.addTo(&r.mu.retired[e.proto])
			}
		}
		r.mu.Unlock()
		if listed {
			b.churn.ConnectionsClosed.Add(1)
		}
	}, nil
}

// decr decrements m[k], dropping it at zero.
func decr(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// Conns returns the connections open now, in no order.
func (b *Broker) Conns() []Conn {
	r := &b.conns
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Conn, 0, len(r.mu.conns))
	for e := range r.mu.conns {
		out = append(out, e.c)
	}
	return out
}

// CloseConns force-closes every connection whose Info matches, with
// reason (see Conn.CloseForced), and returns how many it closed. It does
// not wait for them to end.
func (b *Broker) CloseConns(match func(ConnInfo) bool, reason string) int {
	n := 0
	for _, c := range b.Conns() {
		if match(c.Info()) {
			c.CloseForced(reason)
			n++
		}
	}
	return n
}
