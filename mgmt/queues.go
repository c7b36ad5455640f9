package mgmt

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/qerr"
)

// The queue endpoints. Streams are queues of type "stream" here, as in
// RabbitMQ.
func (s *Server) registerQueues() {
	s.handle("GET", "/api/queues", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		var items []obj
		for _, v := range vs {
			items = append(items, s.queueObjs(v.Name)...)
		}
		return q.list(items)
	})
	s.handle("GET", "/api/queues/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.queueObjs(v))
	})
	s.handle("GET", "/api/queues/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		o, err := s.queueObjByName(v, q.Var("name"))
		if err != nil {
			return err
		}
		return q.reply(o)
	})
	s.handle("PUT", "/api/queues/{vhost}/{name}", accessManagement, s.putQueue)
	s.handle("DELETE", "/api/queues/{vhost}/{name}", accessManagement, s.deleteQueue)
	s.handle("DELETE", "/api/queues/{vhost}/{name}/contents", accessManagement, s.purgeQueue)
	s.handle("POST", "/api/queues/{vhost}/{name}/get", accessManagement, s.getMessages)
	s.handle("GET", "/api/queues/{vhost}/{name}/bindings", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		name := q.Var("name")
		if _, err := s.queueObjByName(v, name); err != nil {
			return err
		}
		return q.list(s.bindingObjs(v, func(b queues.BindingDef) bool {
			return b.DestKind == queues.DestQueue && b.Dest == name
		}))
	})
}

// queueObjs returns the objects of vhost's queues and streams, by name.
func (s *Server) queueObjs(vhost string) []obj {
	qs := s.b.Queues(vhost)
	slices.SortFunc(qs, func(a, b *queues.Queue) int { return strings.Compare(a.Def().Name, b.Def().Name) })
	streams, _ := s.b.Streams(vhost)
	out := make([]obj, 0, len(qs)+len(streams))
	for _, q := range qs {
		out = append(out, s.queueObj(q))
	}
	for _, d := range streams {
		if st, ok := s.b.LookupStream(d.VHost, d.Name); ok {
			out = append(out, s.streamObj(d, st))
		} else if o, ok := s.remoteStreamObj(d); ok {
			out = append(out, o)
		}
	}
	for _, name := range s.b.PlacedQueueNames(vhost) {
		if q, _ := s.b.LookupDestination(vhost, name); q == nil {
			if o, ok := s.remoteQueueObj(vhost, name); ok {
				out = append(out, o)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b obj) int { return strings.Compare(a["name"].(string), b["name"].(string)) })
	return out
}

func (s *Server) queueObjByName(vhost, name string) (obj, error) {
	q, st := s.b.LookupDestination(vhost, name)
	switch {
	case q != nil:
		return s.queueObj(q), nil
	case st != nil:
		defs, err := s.b.Streams(vhost)
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			if d.Name == name {
				return s.streamObj(d, st), nil
			}
		}
	}
	if o, ok := s.remoteQueueObj(vhost, name); ok {
		return o, nil
	}
	if d, ok := s.b.StreamPlacement(vhost, name); ok {
		if o, ok := s.remoteStreamObj(d); ok {
			return o, nil
		}
	}
	return nil, errNotFound()
}

// remoteStreamObj is a replicated stream of which this node holds no
// copy (not a member): its definition and placement; its counts are on
// its members.
func (s *Server) remoteStreamObj(d queues.StreamDef) (obj, bool) {
	p, ok := s.b.PlacementOf(d.VHost, d.Name)
	if !ok {
		return nil, false
	}
	o := obj{
		"name":        d.Name,
		"vhost":       d.VHost,
		"type":        queues.QueueStream,
		"durable":     true,
		"auto_delete": false,
		"exclusive":   false,
		"arguments":   jsonArgs(queues.StreamQueueArgs(d.Args)),
		"state":       "running",
	}
	s.putPolicy(o, d.VHost, d.Name, queues.QueueStream)
	s.putPlacement(o, p)
	return o, true
}

func (s *Server) queueObj(q *queues.Queue) obj {
	def := q.Def()
	t, st := s.rates.queueTotals(q)
	args := def.Args
	if args == nil {
		args = map[string]any{}
	}
	o := obj{
		"name":                         def.Name,
		"vhost":                        def.VHost,
		"type":                         def.Type,
		"durable":                      def.Durable,
		"auto_delete":                  def.AutoDelete,
		"exclusive":                    def.Exclusive,
		"arguments":                    jsonArgs(args),
		"node":                         s.cfg.Node,
		"state":                        "running",
		"consumers":                    st.Consumers,
		"message_bytes":                st.ReadyBytes + st.UnackedBytes,
		"message_bytes_ready":          st.ReadyBytes,
		"message_bytes_unacknowledged": st.UnackedBytes,
	}
	t.put(o)
	s.putPolicy(o, def.VHost, def.Name, def.Type)
	if _, p, ok := s.b.PlacedQueue(def.VHost, def.Name); ok {
		s.putPlacement(o, p)
	}
	if st.ActiveConsumer != "" {
		o["single_active_consumer_tag"] = st.ActiveConsumer
	}
	if st.IdleSince > 0 && st.Consumers == 0 {
		o["idle_since"] = time.UnixMilli(st.IdleSince).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if h, ok := q.History(); ok {
		o["history"] = historyObj(h)
	}
	return o
}

// remoteQueueObj is a replicated queue that another node leads: its
// definition and placement; its counts are on its leader.
func (s *Server) remoteQueueObj(vhost, name string) (obj, bool) {
	def, p, ok := s.b.PlacedQueue(vhost, name)
	if !ok {
		return nil, false
	}
	args := def.Args
	if args == nil {
		args = map[string]any{}
	}
	o := obj{
		"name":        def.Name,
		"vhost":       def.VHost,
		"type":        def.Type,
		"durable":     true,
		"auto_delete": def.AutoDelete,
		"exclusive":   false,
		"arguments":   jsonArgs(args),
		"state":       "running",
	}
	s.putPolicy(o, def.VHost, def.Name, def.Type)
	s.putPlacement(o, p)
	return o, true
}

// putPlacement adds a replicated queue's node (its leader), leader,
// members and the members this node reaches (online), as RabbitMQ shows
// a quorum queue's.
func (s *Server) putPlacement(o obj, p queues.Placement) {
	online := []string{}
	for _, m := range p.Members {
		if s.b.NodeUp(m) {
			online = append(online, m)
		}
	}
	o["node"], o["leader"], o["members"], o["online"] = p.Leader, p.Leader, p.Members, online
	if !s.b.NodeUp(p.Leader) {
		o["state"] = "minority"
	}
}

// historyObj is a queue's history (Warren's queue history, a queue with
// x-history-max-age or x-history-max-length-bytes): what its log holds,
// settled or not, and the limits in effect. Offsets are what
// x-stream-offset takes; first_offset, last_offset and first_timestamp
// (Unix ms) are null when the log is empty.
func historyObj(h queues.HistoryStats) obj {
	o := obj{
		"messages":         h.Messages,
		"bytes":            h.Bytes,
		"segments":         h.Segments,
		"first_offset":     nil,
		"last_offset":      nil,
		"first_timestamp":  nil,
		"max_age_seconds":  nil,
		"max_length_bytes": nil,
		"readers":          h.Readers,
	}
	if h.Messages > 0 {
		o["first_offset"], o["last_offset"], o["first_timestamp"] = h.FirstOffset, h.LastOffset, h.FirstTimestamp
	}
	if h.MaxAge > 0 {
		o["max_age_seconds"] = int64(h.MaxAge / time.Second)
	}
	if h.MaxBytes > 0 {
		o["max_length_bytes"] = h.MaxBytes
	}
	return o
}

// streamObj is a stream as a queue of type stream, with Warren's stream
// facts under "stream".
func (s *Server) streamObj(d queues.StreamDef, st *osiris.Stream) obj {
	stats := st.Stats()
	t := s.rates.streamTotals(d.VHost, d.Name, stats)
	o := obj{
		"name":        d.Name,
		"vhost":       d.VHost,
		"type":        queues.QueueStream,
		"durable":     true,
		"auto_delete": false,
		"exclusive":   false,
		"arguments":   jsonArgs(queues.StreamQueueArgs(d.Args)),
		"node":        s.cfg.Node,
		"leader":      s.cfg.Node,
		"members":     []string{s.cfg.Node},
		"online":      []string{s.cfg.Node},
		"state":       "running",
		"consumers":   0,
		"segments":    stats.Segments,
		"stream":      s.streamFacts(st, stats),
	}
	t.put(o)
	s.putPolicy(o, d.VHost, d.Name, queues.QueueStream)
	if p, ok := s.b.PlacementOf(d.VHost, d.Name); ok {
		s.putPlacement(o, p) // a replicated stream: its leader and members
	}
	return o
}

func (s *Server) streamFacts(st *osiris.Stream, stats osiris.Stats) obj {
	f := obj{
		"first_offset":     stats.FirstOffset,
		"next_offset":      stats.NextOffset,
		"committed_offset": nil,
		"first_timestamp":  stats.FirstTimestamp,
		"segments":         stats.Segments,
		"size_bytes":       stats.Bytes,
		"duplicates":       stats.Duplicates,
		"producers":        len(st.Producers()),
		"tracked_offsets":  len(st.Offsets()),
	}
	if stats.NextOffset > stats.FirstOffset {
		f["last_offset"] = stats.NextOffset - 1
		f["committed_offset"] = stats.NextOffset - 1
	} else {
		f["last_offset"] = nil
	}
	return f
}

func (s *Server) putPolicy(o obj, vhost, name, kind string) {
	o["policy"] = ""
	o["operator_policy"] = nil
	o["effective_policy_definition"] = obj{}
	if p, ok := s.b.EffectivePolicy(vhost, name, kind); ok {
		o["policy"] = p.Name
		o["effective_policy_definition"] = p.Definition
	}
}

// jsonArgs makes AMQP arguments JSON-friendly (byte arrays as strings,
// decimals as numbers), as RabbitMQ's management API shows them.
func jsonArgs(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case map[string]any:
		return jsonArgs(x)
	case wire.Table:
		return jsonArgs(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case time.Time:
		return x.Unix()
	}
	return v
}

// amqpArgs converts JSON-decoded arguments (json.Number) to the typed
// values AMQP arguments carry: integers as int64, other numbers as
// float64, objects as tables.
func amqpArgs(in map[string]any) map[string]any {
	if in == nil {
		return nil
	}
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = amqpValue(v)
	}
	return out
}

func amqpValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return amqpArgs(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amqpValue(e)
		}
		return out
	}
	return v
}

func (s *Server) putQueue(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	var body struct {
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
		Node       string         `json:"node"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	name := q.Var("name")
	if err := q.checkPerm(v, queues.PermConfigure, name); err != nil {
		return err
	}
	durable := true
	if body.Durable != nil {
		durable = *body.Durable
	}
	qq, st := s.b.LookupDestination(v, name)
	existed := qq != nil || st != nil
	_, _, _, err = s.b.DeclareQueue(queues.DeclareOptions{
		Def:   queues.QueueDef{VHost: v, Name: name, Durable: durable, AutoDelete: body.AutoDelete, Args: amqpArgs(body.Arguments)},
		Owner: s,
	})
	if err != nil {
		return badOr(err)
	}
	return q.noContent(!existed)
}

// badOr turns a model error with an AMQP reply code into RabbitMQ's
// answer: 404 stays 404, 403 is 401 "Access refused.", the others are 400
// with the reply text without its code name ("inequivalent arg ...").
func badOr(err error) error {
	var qe *qerr.Error
	if !errors.As(err, &qe) {
		return err
	}
	switch qe.Code {
	case qerr.CodeNotFound:
		return errNotFound()
	case qerr.CodeAccessRefused:
		return errNotAuthorised("Access refused.")
	}
	text := qe.Text
	if _, rest, ok := strings.Cut(text, " - "); ok && strings.ToUpper(text[:len(text)-len(rest)-3]) == text[:len(text)-len(rest)-3] {
		text = rest
	}
	return errBadRequest(text)
}

func (s *Server) deleteQueue(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	name := q.Var("name")
	if _, err := s.queueObjByName(v, name); err != nil {
		return err
	}
	if err := q.checkPerm(v, queues.PermConfigure, name); err != nil {
		return err
	}
	qs := q.r.URL.Query()
	if _, err := s.b.DeleteQueue(v, name, s.ownerOf(v, name), qs.Get("if-unused") == "true", qs.Get("if-empty") == "true"); err != nil {
		return badOr(err)
	}
	return q.noContent(false)
}

// ownerOf is who the API acts as on a queue it deletes: the owning
// connection of an exclusive queue (an operator may delete one, as in
// RabbitMQ), else the API itself.
func (s *Server) ownerOf(vhost, name string) any {
	if qq, _ := s.b.LookupDestination(vhost, name); qq != nil && qq.Owner() != nil {
		return qq.Owner()
	}
	return s
}

// readableQueue returns the classic or quorum queue of the path that the
// user may read; a stream is a 400 saying what cannot be done to it.
func (s *Server) readableQueue(q *request, v, streamReason string) (*queues.Queue, error) {
	name := q.Var("name")
	if err := q.checkPerm(v, queues.PermRead, name); err != nil {
		return nil, err
	}
	qq, st := s.b.LookupDestination(v, name)
	switch {
	case st != nil:
		return nil, errBadRequest(fmt.Sprintf(streamReason, name, v))
	case qq == nil:
		return nil, errNotFound()
	}
	return qq, nil
}

func (s *Server) purgeQueue(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	qq, err := s.readableQueue(q, v, "purge not supported by queue '%s' in vhost '%s' of type stream")
	if err != nil {
		return err
	}
	if _, err := qq.Purge(); err != nil {
		return badOr(err)
	}
	return q.noContent(false)
}

// getMessages is the management UI's "Get messages": basic.get count
// times, then requeue or settle them all, as RabbitMQ does.
func (s *Server) getMessages(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	var body struct {
		Count    json.Number `json:"count"`
		AckMode  string      `json:"ackmode"`
		Encoding string      `json:"encoding"`
		Truncate json.Number `json:"truncate"`
		Requeue  *bool       `json:"requeue"` // before 3.7
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	count, err := body.Count.Int64()
	if err != nil || count < 1 {
		return errBadRequest("count must be a positive integer")
	}
	truncate := int64(-1)
	if body.Truncate != "" {
		if truncate, err = body.Truncate.Int64(); err != nil || truncate < 0 {
			return errBadRequest("truncate must be a non-negative integer")
		}
	}
	if body.AckMode == "" && body.Requeue != nil {
		body.AckMode = "ack_requeue_false"
		if *body.Requeue {
			body.AckMode = "ack_requeue_true"
		}
	}
	requeue, reject := false, false
	switch body.AckMode {
	case "ack_requeue_true":
		requeue = true
	case "ack_requeue_false":
	case "reject_requeue_true":
		requeue, reject = true, true
	case "reject_requeue_false":
		reject = true
	default:
		return errBadRequest(fmt.Sprintf("unknown ackmode %q: one of ack_requeue_true, ack_requeue_false, reject_requeue_true, reject_requeue_false", body.AckMode))
	}
	switch body.Encoding {
	case "", "auto", "base64":
	default:
		return errBadRequest(fmt.Sprintf("unknown encoding %q: auto or base64", body.Encoding))
	}
	qq, err := s.readableQueue(q, v, "queue '%s' in vhost '%s' is a stream: read it with a consumer")
	if err != nil {
		return err
	}
	out := []obj{}
	var ids []uint64
	for range count {
		var msg obj
		ok, err := qq.Get(s, false, func(d *queues.Delivery) {
			ids = append(ids, d.ID)
			msg = messageObj(d, body.Encoding == "base64", truncate)
		})
		if err != nil {
			return badOr(err)
		}
		if !ok {
			break
		}
		out = append(out, msg)
	}
	switch {
	case requeue:
		qq.Requeue(ids...)
	case reject:
		qq.Discard(ids...)
	default:
		qq.Ack(ids...)
	}
	return q.reply(out)
}

func messageObj(d *queues.Delivery, b64 bool, truncate int64) obj {
	payload := d.Body
	if truncate >= 0 && int64(len(payload)) > truncate {
		payload = payload[:truncate]
	}
	o := obj{
		"payload_bytes": len(d.Body),
		"redelivered":   d.Redelivered,
		"exchange":      d.Exchange,
		"routing_key":   d.RoutingKey,
		"message_count": d.MessageCount,
		"properties":    propertiesObj(d.Props),
	}
	if !b64 && utf8.Valid(payload) {
		o["payload"], o["payload_encoding"] = string(payload), "string"
	} else {
		o["payload"], o["payload_encoding"] = base64.StdEncoding.EncodeToString(payload), "base64"
	}
	return o
}

// propertiesObj shows AMQP 0-9-1 properties with RabbitMQ's names.
func propertiesObj(raw []byte) obj {
	o := obj{}
	p, err := wire.ParseProperties(raw)
	if err != nil {
		return o
	}
	f := p.Flags
	set := func(flag uint16, k string, v any) {
		if f&flag != 0 {
			o[k] = v
		}
	}
	set(wire.FlagContentType, "content_type", p.ContentType)
	set(wire.FlagContentEncoding, "content_encoding", p.ContentEncoding)
	if f&wire.FlagHeaders != 0 {
		o["headers"] = jsonArgs(p.Headers)
	}
	set(wire.FlagDeliveryMode, "delivery_mode", p.DeliveryMode)
	set(wire.FlagPriority, "priority", p.Priority)
	set(wire.FlagCorrelationID, "correlation_id", p.CorrelationID)
	set(wire.FlagReplyTo, "reply_to", p.ReplyTo)
	set(wire.FlagExpiration, "expiration", p.Expiration)
	set(wire.FlagMessageID, "message_id", p.MessageID)
	set(wire.FlagTimestamp, "timestamp", p.Timestamp)
	set(wire.FlagType, "type", p.Type)
	set(wire.FlagUserID, "user_id", p.UserID)
	set(wire.FlagAppID, "app_id", p.AppID)
	set(wire.FlagClusterID, "cluster_id", p.ClusterID)
	return o
}

var _ = http.StatusOK
