package queues

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync"
)

// Direct reply-to, shared by the front ends as RabbitMQ 4.2's volatile
// queues (rabbit_volatile_queue) are: a requester gets a name
// amq.rabbitmq.reply-to.<token>.<key> (an AMQP 0-9-1 consumer of
// amq.rabbitmq.reply-to, or an AMQP 1.0 receiver attached with a dynamic
// source and the rabbitmq:volatile-queue capability), and a reply sent
// to the default exchange with that name as routing key, whichever
// protocol sends it, goes straight to the requester: no queue, no
// buffer, at most once. A reply counts as routed even when the requester
// is gone, as RabbitMQ 4.2 counts it.

// ReplyToName is the pseudo-queue an AMQP 0-9-1 requester consumes from,
// and the prefix of every reply name.
const ReplyToName = "amq.rabbitmq.reply-to"

// A ReplySink is a requester's end of direct reply-to.
type ReplySink interface {
	// DeliverReply hands a reply to the requester, as the AMQP 0-9-1
	// content it is (properties and body), with the exchange and routing
	// key it was published with. It may drop the reply (the requester
	// has no room for it) and must not wait long: the publisher's
	// reader is the caller.
	DeliverReply(exchange, key string, props, body []byte)
}

// ReplyRegistry maps reply names to their requesters.
type ReplyRegistry struct {
	m sync.Map // name → replyEntry
}

type replyEntry struct {
	vhost string
	sink  ReplySink
}

// Replies returns the broker's direct reply-to registry.
func (b *Broker) Replies() *ReplyRegistry { return &b.replies }

// IsReplyName reports whether a queue name (a default-exchange routing
// key) is a direct reply-to name, amq.rabbitmq.reply-to.<something>.
func IsReplyName(name string) bool {
	return strings.HasPrefix(name, ReplyToName+".")
}

// Register gives sink a fresh reply name in vhost; Unregister it when the
// requester goes.
func (r *ReplyRegistry) Register(vhost string, sink ReplySink) string {
	name := ReplyToName + "." + randomToken() + "." + randomToken()
	r.m.Store(name, replyEntry{vhost: vhost, sink: sink})
	return name
}

// Unregister forgets a reply name.
func (r *ReplyRegistry) Unregister(name string) { r.m.Delete(name) }

// Lookup returns the requester of a reply name in vhost.
func (r *ReplyRegistry) Lookup(vhost, name string) (ReplySink, bool) {
	v, ok := r.m.Load(name)
	if !ok || v.(replyEntry).vhost != vhost {
		return nil, false
	}
	return v.(replyEntry).sink, true
}

// randomToken is 128 random bits, URL-safe base64 without padding (no
// dots: a reply name splits on them).
func randomToken() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
