package amqp1

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/msgconv"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/route"
)

// The management node's operations, as rabbit_amqp_management's
// handle_http_req clauses (paths are percent-encoded segments; :q is a
// queue, :x an exchange):
//
//	GET    /queues/:q           200 queue info; 404
//	PUT    /queues/:q           declare: 201 created, 200 existed (queue info); 409 inequivalent
//	DELETE /queues/:q           200 {message_count}; a missing queue is 200 with 0
//	DELETE /queues/:q/messages  purge: 200 {message_count}; 404
//	PUT    /exchanges/:x        declare: 204; 409 inequivalent
//	DELETE /exchanges/:x        204 (a missing exchange too)
//	POST   /bindings            bind: 204
//	DELETE /bindings/src=..;dstq=..;key=..;args=..   unbind (dste= for an exchange): 204
//	GET    /bindings?src=..&dstq=..&key=..           200 [binding] (dste= for an exchange)
//
// The operations are package queues' own, as AMQP 0-9-1's queue.declare
// and the others use them, with RabbitMQ's management checks and texts
// around them: names with CR or LF are 400, "amq." names and the
// default exchange 403, permissions as rabbit_amqp_management checks
// them (configure to declare and delete, read to purge, write on the
// destination and read on the source to bind, any to get a queue, and
// for a new queue's x-dead-letter-exchange or a new exchange's
// alternate-exchange read on it and write on the exchange named). An
// exclusive queue belongs to the connection, deleted when it closes.
//
// A binding's "args" in its path is a hash of its arguments, URL-safe
// base64 without padding, empty for none, as RabbitMQ's; RabbitMQ hashes
// with erlang:phash2, Warren with FNV-1a over the arguments' canonical
// encoding, so a client must take a binding with arguments' path from
// GET /bindings ("location"), not compute it (without arguments both
// are "args=").

// mgmtServe runs one request. The error is a *mgmtError (the response),
// an *amqpError (the session ends) or a model error (400, its text).
func (c *conn) mgmtServe(method string, segs []string, query map[string]string, body any) (mgmtResponse, error) {
	null := body == nil
	path := strings.Join(segs, "/")
	switch {
	case len(segs) == 2 && segs[0] == "queues":
		switch {
		case method == "GET" && null:
			return c.mgmtGetQueue(segs[1])
		case method == "PUT":
			return c.mgmtDeclareQueue(segs[1], body)
		case method == "DELETE" && null:
			return c.mgmtDeleteQueue(segs[1])
		}
	case len(segs) == 3 && segs[0] == "queues" && segs[2] == "messages" && method == "DELETE" && null:
		return c.mgmtPurgeQueue(segs[1])
	case len(segs) == 2 && segs[0] == "exchanges":
		switch {
		case method == "PUT":
			return c.mgmtDeclareExchange(segs[1], body)
		case method == "DELETE" && null:
			return c.mgmtDeleteExchange(segs[1])
		}
	case len(segs) == 1 && segs[0] == "bindings":
		switch {
		case method == "POST":
			return c.mgmtBind(body)
		case method == "GET" && null:
			return c.mgmtListBindings(query)
		}
	case len(segs) == 2 && segs[0] == "bindings" && method == "DELETE" && null:
		return c.mgmtUnbind(segs[1])
	}
	return mgmtResponse{}, errNoOperation(method, "/"+path)
}

// unescape decodes a path segment (cow_uri:urldecode); parseMgmtURI
// has checked its percent-encodings.
func unescape(seg string) string {
	s, err := url.PathUnescape(seg)
	if err != nil {
		return seg
	}
	return s
}

// mgmtCheck checks a permission as rabbit_amqp_session's
// check_resource_access: a refusal ends the session.
func (c *conn) mgmtCheck(kind queues.Perm, resKind, name string) error {
	if err := c.broker.CheckPermission(c.user, c.vhost, kind, name); err != nil {
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("%s access to %s '%s' in vhost '%s' refused for user '%s'", kind, resKind, name, c.vhost, c.user)}
	}
	return nil
}

// prohibitCRLF is RabbitMQ's prohibit_cr_lf.
func prohibitCRLF(name string) error {
	if strings.ContainsAny(name, "\r\n") {
		return mgmtErrorf("400", "Bad name '%s': line feed and carriage return characters not allowed", name)
	}
	return nil
}

// prohibitAmq is RabbitMQ's prohibit_reserved_amq.
func (c *conn) prohibitAmq(kind, name string) error {
	if strings.HasPrefix(name, "amq.") {
		return mgmtErrorf("403", "%s starts with reserved prefix 'amq.'", c.rs(kind, name))
	}
	return nil
}

// rs names a resource of the connection's vhost as rabbit_misc:rs does.
func (c *conn) rs(kind, name string) string {
	return fmt.Sprintf("%s '%s' in vhost '%s'", kind, name, c.vhost)
}

var errDefaultExchange = &mgmtError{status: "403", text: "operation not permitted on the default exchange"}

// checkRoutingArg is RabbitMQ's check_routing_arg: when args name an
// exchange under key (x-dead-letter-exchange, alternate-exchange), read
// on the declared entity and write on that exchange.
func (c *conn) checkRoutingArg(kind, name string, args map[string]any, key string) error {
	v, ok := args[key]
	if !ok {
		return nil
	}
	x, isStr := v.(string)
	if !isStr {
		return mgmtErrorf("400", "invalid type '%s' for arg '%s'", fieldTypeName(v), key)
	}
	if err := c.mgmtCheck(queues.PermRead, kind, name); err != nil {
		return err
	}
	if x == "" {
		x = "amq.default"
	}
	return c.mgmtCheck(queues.PermWrite, "exchange", x)
}

// fieldTypeName names a field-table value's type as RabbitMQ does.
func fieldTypeName(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int8, uint8:
		return "byte"
	case int16, uint16:
		return "short"
	case int32, uint32:
		return "signedint"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case []byte:
		return "binary"
	case []any:
		return "array"
	case wire.Table, map[string]any:
		return "table"
	case nil:
		return "void"
	case time.Time:
		return "timestamp"
	}
	return fmt.Sprintf("%T", v)
}

// decodeArgs converts a request's arguments (a map with string or
// symbol keys) to the model's field-table values (args_amqp_to_amqpl).
func decodeArgs(v any) (map[string]any, error) {
	m, ok := v.(amqp10.Map)
	if !ok {
		return nil, mgmtErrorf("400", "unsupported argument %s", erlTerm(v))
	}
	out := make(map[string]any, len(m))
	for _, e := range m {
		var k string
		switch key := e.Key.(type) {
		case string:
			k = key
		case amqp10.Symbol:
			k = string(key)
		default:
			return nil, mgmtErrorf("400", "unsupported argument {%s,%s}", erlTerm(e.Key), erlTerm(e.Value))
		}
		val, ok := msgconv.ValueTo091(e.Value)
		if !ok {
			return nil, mgmtErrorf("400", "unsupported argument {%s,%s}", erlTerm(e.Key), erlTerm(e.Value))
		}
		out[k] = val
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// queueProps is a PUT /queues body, with RabbitMQ's defaults.
type queueProps struct {
	durable, exclusive, autoDelete bool
	args                           map[string]any
}

// decodeQueueBody is RabbitMQ's decode_queue.
func decodeQueueBody(method, to string, body any) (queueProps, error) {
	p := queueProps{durable: true}
	m, ok := body.(amqp10.Map)
	if !ok {
		return p, errNoOperation(method, to)
	}
	for _, e := range m {
		k, _ := e.Key.(string)
		b, isBool := e.Value.(bool)
		var err error
		switch {
		case k == "durable" && isBool:
			p.durable = b
		case k == "exclusive" && isBool:
			p.exclusive = b
		case k == "auto_delete" && isBool:
			p.autoDelete = b
		case k == "arguments":
			p.args, err = decodeArgs(e.Value)
		default:
			err = mgmtErrorf("400", "bad queue property {%s,%s}", erlTerm(e.Key), erlTerm(e.Value))
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

func (c *conn) mgmtDeclareQueue(seg string, body any) (mgmtResponse, error) {
	p, err := decodeQueueBody("PUT", "/queues/"+seg, body)
	if err != nil {
		return mgmtResponse{}, err
	}
	name := unescape(seg)
	if name == "" {
		return mgmtResponse{}, mgmtErrorf("400", "declare queue with empty name not allowed")
	}
	if err := prohibitCRLF(name); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.prohibitAmq("queue", name); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.mgmtCheck(queues.PermConfigure, "queue", name); err != nil {
		return mgmtResponse{}, err
	}
	q, st := c.broker.LookupDestination(c.vhost, name)
	existed := q != nil || st != nil
	if !existed {
		if err := c.checkRoutingArg("queue", name, p.args, "x-dead-letter-exchange"); err != nil {
			return mgmtResponse{}, err
		}
	}
	_, messages, consumers, err := c.broker.DeclareQueue(queues.DeclareOptions{
		Def: queues.QueueDef{
			VHost:      c.vhost,
			Name:       name,
			Type:       queues.QueueClassic,
			Durable:    p.durable,
			Exclusive:  p.exclusive,
			AutoDelete: p.autoDelete,
			Args:       p.args,
		},
		Owner: c,
	})
	if err != nil {
		return mgmtResponse{}, declareQueueError(err)
	}
	status := "200"
	if !existed {
		status, messages, consumers = "201", 0, 0
	}
	info, ok := c.encodeQueue(name, messages, consumers)
	if !ok {
		return mgmtResponse{}, mgmtErrorf("400", "%s was deleted while it was declared", c.rs("queue", name))
	}
	return mgmtResponse{status: status, body: info}, nil
}

// declareQueueError answers a refused declare as RabbitMQ's management
// does: an inequivalent or invalid argument is 409 (precondition_failed
// raised by rabbit_amqqueue), a queue type's refused property 400 (its
// protocol_error), the vhost's queue limit 403, another connection's
// exclusive queue 400.
func declareQueueError(err error) error {
	qe := queues.AsError(err)
	if qe == nil {
		return err
	}
	text := errText(err)
	switch qe.Code {
	case queues.CodePreconditionFailed:
		switch {
		case errors.Is(err, queues.ErrQueueLimit):
			return &mgmtError{status: "403", text: text}
		case errors.Is(err, queues.ErrTypeProperty):
			return &mgmtError{status: "400", text: text}
		}
		return &mgmtError{status: "409", text: text}
	case queues.CodeAccessRefused:
		return &mgmtError{status: "403", text: text}
	}
	return &mgmtError{status: "400", text: text}
}

// encodeQueue encodes a queue's info as RabbitMQ's encode_queue: leader,
// message_count (ulong), consumer_count (uint), name, vhost, durable,
// auto_delete, exclusive, type, arguments, replicas. ok is false when
// there is no such queue.
func (c *conn) encodeQueue(name string, messages, consumers int) ([]byte, bool) {
	q, st := c.broker.LookupDestination(c.vhost, name)
	var def queues.QueueDef
	switch {
	case q != nil:
		def = q.Def()
	case st != nil:
		def = queues.QueueDef{VHost: c.vhost, Name: name, Type: queues.QueueStream, Durable: true}
		defs, _ := c.broker.Streams(c.vhost)
		for _, d := range defs {
			if d.Name == name {
				def.Args = queues.StreamQueueArgs(d.Args)
				break
			}
		}
	default:
		return nil, false
	}
	node := c.cfg.Node
	b, m := amqp10.BeginMap(nil)
	n := 0
	put := func(k string, v any) {
		b = amqp10.AppendString(b, k)
		b, _ = amqp10.AppendValue(b, v)
		n += 2
	}
	put("leader", node)
	put("message_count", uint64(max(messages, 0)))
	put("consumer_count", uint32(max(consumers, 0)))
	put("name", def.Name)
	put("vhost", def.VHost)
	put("durable", def.Durable)
	put("auto_delete", def.AutoDelete)
	put("exclusive", def.Exclusive)
	put("type", def.Type)
	b = appendArgs(amqp10.AppendString(b, "arguments"), def.Args)
	n += 2
	put("replicas", amqp10.Array{node})
	return m.End(b, n), true
}

// appendArgs appends field-table arguments as an AMQP map with string
// keys (args_amqpl_to_amqp), in key order; a value RabbitMQ cannot
// convert (a decimal) is left out.
func appendArgs(dst []byte, args map[string]any) []byte {
	dst, m := amqp10.BeginMap(dst)
	n := 0
	for _, k := range slices.Sorted(maps.Keys(args)) {
		at := len(dst)
		dst = amqp10.AppendString(dst, k)
		v := args[k]
		if t, ok := v.(map[string]any); ok {
			v = wire.Table(t)
		}
		var ok bool
		if dst, ok = msgconv.AppendValueFrom091(dst, v); !ok {
			dst = dst[:at]
			continue
		}
		n += 2
	}
	return m.End(dst, n)
}

// messageCount encodes {message_count: ulong n}.
func messageCount(n int) []byte {
	b, m := amqp10.BeginMap(nil)
	b = amqp10.AppendUlong(amqp10.AppendString(b, "message_count"), uint64(max(n, 0)))
	return m.End(b, 2)
}

func (c *conn) mgmtGetQueue(seg string) (mgmtResponse, error) {
	name := unescape(seg)
	// Any permission, as queue.declare passive (check_resource_any_access).
	var err error
	for _, k := range [...]queues.Perm{queues.PermRead, queues.PermWrite, queues.PermConfigure} {
		if err = c.mgmtCheck(k, "queue", name); err == nil {
			break
		}
	}
	if err != nil {
		return mgmtResponse{}, err
	}
	var messages, consumers int
	q, st := c.broker.LookupDestination(c.vhost, name)
	switch {
	case q != nil:
		messages, consumers = q.Declared()
	case st != nil:
		messages = queues.StreamMessageCount(st)
	}
	info, ok := c.encodeQueue(name, messages, consumers)
	if !ok {
		return mgmtResponse{}, mgmtErrorf("404", "%s not found", c.rs("queue", name))
	}
	return mgmtResponse{status: "200", body: info}, nil
}

func (c *conn) mgmtDeleteQueue(seg string) (mgmtResponse, error) {
	name := unescape(seg)
	if err := prohibitCRLF(name); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.mgmtCheck(queues.PermConfigure, "queue", name); err != nil {
		return mgmtResponse{}, err
	}
	n, err := c.broker.DeleteQueue(c.vhost, name, c, false, false)
	if err != nil {
		return mgmtResponse{}, &mgmtError{status: "400", text: errText(err)}
	}
	return mgmtResponse{status: "200", body: messageCount(n)}, nil
}

func (c *conn) mgmtPurgeQueue(seg string) (mgmtResponse, error) {
	name := unescape(seg)
	if err := c.mgmtCheck(queues.PermRead, "queue", name); err != nil {
		return mgmtResponse{}, err
	}
	q, err := c.broker.Queue(c.vhost, name)
	if err != nil {
		if _, ok := c.broker.LookupStream(c.vhost, name); ok {
			return mgmtResponse{}, mgmtErrorf("400", "purge not supported by %s", c.rs("queue", name))
		}
		return mgmtResponse{}, mgmtErrorf("404", "no %s", c.rs("queue", name))
	}
	if err := q.CheckOwner(c); err != nil {
		return mgmtResponse{}, &mgmtError{status: "400", text: errText(err)}
	}
	n, err := q.Purge()
	if err != nil {
		return mgmtResponse{}, mgmtErrorf("404", "no %s", c.rs("queue", name))
	}
	return mgmtResponse{status: "200", body: messageCount(n)}, nil
}

// decodeExchangeBody is RabbitMQ's decode_exchange.
func decodeExchangeBody(to string, body any) (queues.ExchangeDef, error) {
	def := queues.ExchangeDef{Type: "direct", Durable: true}
	m, ok := body.(amqp10.Map)
	if !ok {
		return def, errNoOperation("PUT", to)
	}
	for _, e := range m {
		k, _ := e.Key.(string)
		b, isBool := e.Value.(bool)
		s, isStr := e.Value.(string)
		var err error
		switch {
		case k == "durable" && isBool:
			def.Durable = b
		case k == "auto_delete" && isBool:
			def.AutoDelete = b
		case k == "internal" && isBool:
			def.Internal = b
		case k == "type" && isStr:
			def.Type = s
		case k == "arguments":
			def.Args, err = decodeArgs(e.Value)
		default:
			err = mgmtErrorf("400", "bad exchange property {%s,%s}", erlTerm(e.Key), erlTerm(e.Value))
		}
		if err != nil {
			return def, err
		}
	}
	return def, nil
}

func (c *conn) mgmtDeclareExchange(seg string, body any) (mgmtResponse, error) {
	name := unescape(seg)
	def, err := decodeExchangeBody("/exchanges/"+seg, body)
	if err != nil {
		return mgmtResponse{}, err
	}
	def.VHost, def.Name = c.vhost, name
	if !route.KnownType(def.Type) {
		return mgmtResponse{}, mgmtErrorf("400", "unknown exchange type '%s'", def.Type)
	}
	if name == "" {
		return mgmtResponse{}, errDefaultExchange
	}
	if err := c.mgmtCheck(queues.PermConfigure, "exchange", name); err != nil {
		return mgmtResponse{}, err
	}
	_, lookupErr := c.broker.Exchange(c.vhost, name)
	existed := lookupErr == nil
	if !existed {
		if err := prohibitCRLF(name); err != nil {
			return mgmtResponse{}, err
		}
		if err := c.prohibitAmq("exchange", name); err != nil {
			return mgmtResponse{}, err
		}
		if err := c.checkRoutingArg("exchange", name, def.Args, "alternate-exchange"); err != nil {
			return mgmtResponse{}, err
		}
	}
	if err := c.broker.DeclareExchange(def); err != nil {
		status := "400"
		if qe := queues.AsError(err); qe != nil && qe.Code == queues.CodePreconditionFailed && existed {
			status = "409"
		}
		return mgmtResponse{}, &mgmtError{status: status, text: errText(err)}
	}
	return mgmtResponse{status: "204"}, nil
}

func (c *conn) mgmtDeleteExchange(seg string) (mgmtResponse, error) {
	name := unescape(seg)
	if err := prohibitCRLF(name); err != nil {
		return mgmtResponse{}, err
	}
	if name == "" {
		return mgmtResponse{}, errDefaultExchange
	}
	if err := c.prohibitAmq("exchange", name); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.mgmtCheck(queues.PermConfigure, "exchange", name); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.broker.DeleteExchange(c.vhost, name, false); err != nil {
		return mgmtResponse{}, &mgmtError{status: "400", text: errText(err)}
	}
	return mgmtResponse{status: "204"}, nil
}

// bindingChecks is RabbitMQ's binding_checks: neither end the default
// exchange, no CR or LF in their names, write on the destination, read
// on the source, and the topic read permission for the key.
func (c *conn) bindingChecks(def queues.BindingDef) error {
	dstKind := "queue"
	if def.DestKind == queues.DestExchange {
		dstKind = "exchange"
	}
	for _, e := range [...]struct {
		exchange bool
		name     string
	}{{true, def.Source}, {def.DestKind == queues.DestExchange, def.Dest}} {
		if e.exchange && e.name == "" {
			return errDefaultExchange
		}
		if err := prohibitCRLF(e.name); err != nil {
			return err
		}
	}
	if err := c.mgmtCheck(queues.PermWrite, dstKind, def.Dest); err != nil {
		return err
	}
	if err := c.mgmtCheck(queues.PermRead, "exchange", def.Source); err != nil {
		return err
	}
	if err := c.broker.CheckTopicPermission(c.user, c.vhost, def.Source, queues.PermRead, def.Key); err != nil {
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: errText(err)}
	}
	return nil
}

// checkExclusiveDest refuses a binding to another connection's
// exclusive queue, as rabbit_channel:binding_action does.
func (c *conn) checkExclusiveDest(def queues.BindingDef) error {
	if def.DestKind != queues.DestQueue {
		return nil
	}
	q, err := c.broker.Queue(c.vhost, def.Dest)
	if err != nil {
		return nil // the binding itself reports a missing queue
	}
	if err := q.CheckOwner(c); err != nil {
		return &mgmtError{status: "400", text: errText(err)}
	}
	return nil
}

func (c *conn) mgmtBind(body any) (mgmtResponse, error) {
	m, ok := body.(amqp10.Map)
	if !ok {
		return mgmtResponse{}, errNoOperation("POST", "/bindings")
	}
	def := queues.BindingDef{VHost: c.vhost}
	var hasSource, hasKey, hasArgs, hasDest bool
	for _, e := range m {
		k, _ := e.Key.(string)
		s, isStr := e.Value.(string)
		var err error
		switch {
		case k == "source" && isStr:
			def.Source, hasSource = s, true
		case k == "destination_queue" && isStr:
			def.DestKind, def.Dest, hasDest = queues.DestQueue, s, true
		case k == "destination_exchange" && isStr:
			if !hasDest || def.DestKind != queues.DestQueue { // destination_queue wins, as RabbitMQ's map match
				def.DestKind, def.Dest, hasDest = queues.DestExchange, s, true
			}
		case k == "binding_key" && isStr:
			def.Key, hasKey = s, true
		case k == "arguments":
			def.Args, err = decodeArgs(e.Value)
			hasArgs = true
		default:
			err = mgmtErrorf("400", "bad binding field {%s,%s}", erlTerm(e.Key), erlTerm(e.Value))
		}
		if err != nil {
			return mgmtResponse{}, err
		}
	}
	if !hasSource || !hasKey || !hasArgs || !hasDest {
		// RabbitMQ's match of the decoded map fails: its session ends.
		return mgmtResponse{}, &amqpError{cond: frame.CondInternalError, desc: "binding needs source, binding_key, arguments and destination_queue or destination_exchange"}
	}
	if err := c.bindingChecks(def); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.checkExclusiveDest(def); err != nil {
		return mgmtResponse{}, err
	}
	if err := c.broker.Bind(def); err != nil {
		return mgmtResponse{}, &mgmtError{status: "400", text: errText(err)}
	}
	return mgmtResponse{status: "204"}, nil
}

// bindingSegment is RabbitMQ's binding path segment: percent-encoded
// source, destination and key, and the arguments' hash in URL-safe
// base64.
var bindingSegment = regexp.MustCompile(`^src=([0-9A-Za-z\-._~%]+);dst([eq])=([0-9A-Za-z\-._~%]+);key=([0-9A-Za-z\-._~%]*);args=([0-9A-Za-z\-_]*)$`)

func (c *conn) mgmtUnbind(seg string) (mgmtResponse, error) {
	m := bindingSegment.FindStringSubmatch(seg)
	if m == nil {
		return mgmtResponse{}, mgmtErrorf("400", "bad binding path segment '%s'", seg)
	}
	def := queues.BindingDef{VHost: c.vhost, Source: unescape(m[1]), DestKind: queues.DestQueue, Dest: unescape(m[3]), Key: unescape(m[4])}
	if m[2] == "e" {
		def.DestKind = queues.DestExchange
	}
	if err := c.bindingChecks(def); err != nil {
		return mgmtResponse{}, err
	}
	for _, b := range c.bindingsBetween(def) {
		if b.Key == def.Key && argsHash(b.Args) == m[5] {
			if err := c.checkExclusiveDest(b); err != nil {
				return mgmtResponse{}, err
			}
			if err := c.broker.Unbind(b); err != nil {
				return mgmtResponse{}, &mgmtError{status: "400", text: errText(err)}
			}
			break
		}
	}
	return mgmtResponse{status: "204"}, nil
}

// bindingsBetween lists the bindings from def's source to its
// destination.
func (c *conn) bindingsBetween(def queues.BindingDef) []queues.BindingDef {
	var out []queues.BindingDef
	for _, b := range c.broker.BindingsFrom(c.vhost, def.Source) {
		if b.DestKind == def.DestKind && b.Dest == def.Dest {
			out = append(out, b)
		}
	}
	return out
}

func (c *conn) mgmtListBindings(query map[string]string) (mgmtResponse, error) {
	src, hasSrc := query["src"]
	key, hasKey := query["key"]
	if !hasSrc || !hasKey {
		return mgmtResponse{}, errNoOperation("GET", "/bindings")
	}
	def := queues.BindingDef{VHost: c.vhost, Source: src, Key: key}
	if x, ok := query["dste"]; ok {
		def.DestKind, def.Dest = queues.DestExchange, x
	} else if q, ok := query["dstq"]; ok {
		def.DestKind, def.Dest = queues.DestQueue, q
	} else {
		return mgmtResponse{}, mgmtErrorf("400", "missing 'dste' or 'dstq' in query: %s", erlQueryMap(query))
	}
	if err := c.bindingChecks(def); err != nil {
		return mgmtResponse{}, err
	}
	b, l := amqp10.BeginList(nil)
	n := 0
	for _, bd := range c.bindingsBetween(def) {
		if bd.Key != key {
			continue
		}
		dst := "destination_queue"
		if bd.DestKind == queues.DestExchange {
			dst = "destination_exchange"
		}
		var m amqp10.Compound
		b, m = amqp10.BeginMap(b)
		b = amqp10.AppendString(amqp10.AppendString(b, "source"), bd.Source)
		b = amqp10.AppendString(amqp10.AppendString(b, dst), bd.Dest)
		b = amqp10.AppendString(amqp10.AppendString(b, "binding_key"), bd.Key)
		b = appendArgs(amqp10.AppendString(b, "arguments"), bd.Args)
		b = amqp10.AppendString(amqp10.AppendString(b, "location"), bindingLocation(bd))
		b = m.End(b, 10)
		n++
	}
	return mgmtResponse{status: "200", body: l.End(b, n)}, nil
}

// bindingLocation is a binding's path (compose_binding_uri).
func bindingLocation(b queues.BindingDef) string {
	kind := "q"
	if b.DestKind == queues.DestExchange {
		kind = "e"
	}
	return "/bindings/src=" + quoteUnreserved(b.Source) + ";dst" + kind + "=" + quoteUnreserved(b.Dest) +
		";key=" + quoteUnreserved(b.Key) + ";args=" + argsHash(b.Args)
}

// quoteUnreserved percent-encodes all but RFC 3986's unreserved
// characters (uri_string:quote).
func quoteUnreserved(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || strings.IndexByte("-._~", ch) >= 0 {
			sb.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&sb, "%%%02X", ch)
	}
	return sb.String()
}

// argsHash is a binding's arguments in its path: "" for none, else a
// 32-bit FNV-1a hash of their canonical encoding (the arguments part of
// BindingDef.Ident), URL-safe base64 without padding.
func argsHash(args map[string]any) string {
	if len(args) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(queues.BindingDef{Args: args}.Ident()))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// erlTerm renders an AMQP value roughly as RabbitMQ's ~tp renders its
// decoded term, for error texts: {utf8,<<"x">>}, true, {ulong,1}.
func erlTerm(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case string:
		return "{utf8," + erlBinary(x) + "}"
	case amqp10.Symbol:
		return "{symbol," + erlBinary(string(x)) + "}"
	case []byte:
		return "{binary," + erlBinary(string(x)) + "}"
	case uint64:
		return fmt.Sprintf("{ulong,%d}", x)
	case int64:
		return fmt.Sprintf("{long,%d}", x)
	case uint32:
		return fmt.Sprintf("{uint,%d}", x)
	case int32:
		return fmt.Sprintf("{int,%d}", x)
	case amqp10.Map:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = "{" + erlTerm(e.Key) + "," + erlTerm(e.Value) + "}"
		}
		return "{map,[" + strings.Join(parts, ",") + "]}"
	}
	return fmt.Sprintf("%v", v)
}

// erlBinary renders a binary as ~tp does: <<"ab">>, and <<"🥳"/utf8>>
// when it is not ASCII.
func erlBinary(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return `<<"` + s + `"/utf8>>`
		}
	}
	return `<<"` + s + `">>`
}

// erlQueryMap renders a dissected query as Erlang's ~tp renders its map.
func erlQueryMap(q map[string]string) string {
	parts := make([]string, 0, len(q))
	for _, k := range slices.Sorted(maps.Keys(q)) {
		parts = append(parts, erlBinary(k)+" => "+erlBinary(q[k]))
	}
	return "#{" + strings.Join(parts, ",") + "}"
}
