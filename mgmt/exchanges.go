package mgmt

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// defaultExchangePath is how the API's paths name the default exchange.
const defaultExchangePath = "amq.default"

func exchangeVar(q *request, name string) string {
	if v := q.Var(name); v != defaultExchangePath {
		return v
	}
	return ""
}

// The exchange and binding endpoints.
func (s *Server) registerExchanges() {
	s.handle("GET", "/api/exchanges", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		var items []obj
		for _, v := range vs {
			items = append(items, s.exchangeObjs(v.Name)...)
		}
		return q.list(items)
	})
	s.handle("GET", "/api/exchanges/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.exchangeObjs(v))
	})
	s.handle("GET", "/api/exchanges/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		x, err := s.exchange(v, exchangeVar(q, "name"))
		if err != nil {
			return err
		}
		return q.reply(s.exchangeObj(x))
	})
	s.handle("PUT", "/api/exchanges/{vhost}/{name}", accessManagement, s.putExchange)
	s.handle("DELETE", "/api/exchanges/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		name := exchangeVar(q, "name")
		if _, err := s.exchange(v, name); err != nil {
			return err
		}
		if err := q.checkPerm(v, queues.PermConfigure, name); err != nil {
			return err
		}
		if err := s.b.DeleteExchange(v, name, q.r.URL.Query().Get("if-unused") == "true"); err != nil {
			return badOr(err)
		}
		return q.noContent(false)
	})
	s.handle("POST", "/api/exchanges/{vhost}/{name}/publish", accessManagement, s.publish)
	s.handle("GET", "/api/exchanges/{vhost}/{name}/bindings/source", accessManagement, func(q *request) error {
		return s.exchangeBindings(q, func(b queues.BindingDef, x string) bool { return b.Source == x })
	})
	s.handle("GET", "/api/exchanges/{vhost}/{name}/bindings/destination", accessManagement, func(q *request) error {
		return s.exchangeBindings(q, func(b queues.BindingDef, x string) bool {
			return b.DestKind == queues.DestExchange && b.Dest == x
		})
	})

	s.handle("GET", "/api/bindings", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		var items []obj
		for _, v := range vs {
			items = append(items, s.bindingObjs(v.Name, func(queues.BindingDef) bool { return true })...)
		}
		return q.list(items)
	})
	s.handle("GET", "/api/bindings/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.bindingObjs(v, func(queues.BindingDef) bool { return true }))
	})
	for _, k := range []struct {
		seg  string
		kind queues.DestKind
	}{{"q", queues.DestQueue}, {"e", queues.DestExchange}} {
		base := "/api/bindings/{vhost}/e/{source}/" + k.seg + "/{dest}"
		s.handle("GET", base, accessManagement, func(q *request) error {
			v, src, dst, err := s.bindingEnds(q, k.kind)
			if err != nil {
				return err
			}
			return q.list(s.bindingObjs(v, func(b queues.BindingDef) bool {
				return b.Source == src && b.DestKind == k.kind && b.Dest == dst
			}))
		})
		s.handle("POST", base, accessManagement, func(q *request) error { return s.postBinding(q, k.kind) })
		s.handle("GET", base+"/{props}", accessManagement, func(q *request) error {
			o, _, err := s.bindingByProps(q, k.kind)
			if err != nil {
				return err
			}
			return q.reply(o)
		})
		s.handle("DELETE", base+"/{props}", accessManagement, func(q *request) error {
			_, def, err := s.bindingByProps(q, k.kind)
			if err != nil {
				return err
			}
			if err := s.checkBindPerms(q, def); err != nil {
				return err
			}
			if err := s.b.Unbind(def); err != nil {
				return badOr(err)
			}
			return q.noContent(false)
		})
	}
}

// exchange returns an exchange; "" is the default exchange.
func (s *Server) exchange(vhost, name string) (queues.ExchangeDef, error) {
	if name == "" {
		return queues.ExchangeDef{VHost: vhost, Type: "direct", Durable: true}, nil
	}
	x, err := s.b.Exchange(vhost, name)
	if err != nil {
		return x, errNotFound()
	}
	return x, nil
}

func (s *Server) exchangeObjs(vhost string) []obj {
	xs := s.b.Exchanges(vhost)
	out := make([]obj, 0, len(xs)+1)
	hasDefault := false
	for _, x := range xs {
		hasDefault = hasDefault || x.Name == ""
	}
	if !hasDefault {
		out = append(out, s.exchangeObj(queues.ExchangeDef{VHost: vhost, Type: "direct", Durable: true}))
	}
	for _, x := range xs {
		out = append(out, s.exchangeObj(x))
	}
	return out
}

func (s *Server) exchangeObj(x queues.ExchangeDef) obj {
	args := x.Args
	if args == nil {
		args = map[string]any{}
	}
	o := obj{
		"name":                      x.Name,
		"vhost":                     x.VHost,
		"type":                      x.Type,
		"durable":                   x.Durable,
		"auto_delete":               x.AutoDelete,
		"internal":                  x.Internal,
		"arguments":                 jsonArgs(args),
		"user_who_performed_action": "",
	}
	s.putPolicy(o, x.VHost, x.Name, "exchange")
	return o
}

func (s *Server) putExchange(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	var body struct {
		Type       string         `json:"type"`
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Internal   bool           `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Type == "" {
		return errBadRequest("[{key_missing,type}]")
	}
	name := exchangeVar(q, "name")
	if err := q.checkPerm(v, queues.PermConfigure, name); err != nil {
		return err
	}
	durable := true
	if body.Durable != nil {
		durable = *body.Durable
	}
	_, err = s.b.Exchange(v, name)
	existed := err == nil
	def := queues.ExchangeDef{VHost: v, Name: name, Type: body.Type, Durable: durable, AutoDelete: body.AutoDelete,
		Internal: body.Internal, Args: amqpArgs(body.Arguments)}
	if err := s.b.DeclareExchange(def); err != nil {
		return badOr(err)
	}
	return q.noContent(!existed)
}

func (s *Server) exchangeBindings(q *request, keep func(queues.BindingDef, string) bool) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	name := exchangeVar(q, "name")
	if _, err := s.exchange(v, name); err != nil {
		return err
	}
	return q.list(s.bindingObjs(v, func(b queues.BindingDef) bool { return keep(b, name) }))
}

// propertiesKey names a binding in paths, as RabbitMQ's properties_key:
// the routing key ("~" for an empty one) with "%" and "~" escaped, and,
// when there are arguments, "~" and a hash of them.
func propertiesKey(b queues.BindingDef) string {
	key := strings.NewReplacer("%", "%25", "~", "%7E").Replace(b.Key)
	if len(b.Args) == 0 {
		if key == "" {
			return "~"
		}
		return key
	}
	id := b
	id.Key = ""
	h := xxhash.Sum64String(id.Ident())
	var sum [8]byte
	for i := range sum {
		sum[i] = byte(h >> (8 * i))
	}
	return key + "~" + base64.RawURLEncoding.EncodeToString(sum[:])
}

func bindingObj(b queues.BindingDef) obj {
	kind := "queue"
	if b.DestKind == queues.DestExchange {
		kind = "exchange"
	}
	args := b.Args
	if args == nil {
		args = map[string]any{}
	}
	return obj{
		"source":           b.Source,
		"vhost":            b.VHost,
		"destination":      b.Dest,
		"destination_type": kind,
		"routing_key":      b.Key,
		"arguments":        jsonArgs(args),
		"properties_key":   propertiesKey(b),
	}
}

// bindingObjs lists vhost's bindings that keep accepts: first the
// default exchange's implicit binding to each queue and stream, as
// RabbitMQ lists them, then the explicit ones.
func (s *Server) bindingObjs(vhost string, keep func(queues.BindingDef) bool) []obj {
	var out []obj
	for _, qo := range s.queueNames(vhost) {
		b := queues.BindingDef{VHost: vhost, DestKind: queues.DestQueue, Dest: qo, Key: qo}
		if keep(b) {
			out = append(out, bindingObj(b))
		}
	}
	for _, b := range s.b.Bindings(vhost) {
		if keep(b) {
			out = append(out, bindingObj(b))
		}
	}
	return out
}

func (s *Server) queueNames(vhost string) []string {
	var names []string
	for _, q := range s.b.Queues(vhost) {
		names = append(names, q.Def().Name)
	}
	streams, _ := s.b.Streams(vhost)
	for _, d := range streams {
		names = append(names, d.Name)
	}
	sortStrings(names)
	return names
}

// bindingEnds checks a binding path's vhost, source and destination.
func (s *Server) bindingEnds(q *request, kind queues.DestKind) (vhost, src, dst string, err error) {
	if vhost, err = q.vhost(); err != nil {
		return
	}
	src, dst = exchangeVar(q, "source"), q.Var("dest")
	if _, err = s.exchange(vhost, src); err != nil {
		return
	}
	if kind == queues.DestExchange {
		_, err = s.exchange(vhost, exchangeVar(q, "dest"))
		dst = exchangeVar(q, "dest")
	} else {
		_, err = s.queueObjByName(vhost, dst)
	}
	return
}

func (s *Server) checkBindPerms(q *request, b queues.BindingDef) error {
	if err := q.checkPerm(b.VHost, queues.PermWrite, b.Dest); err != nil {
		return err
	}
	return q.checkPerm(b.VHost, queues.PermRead, b.Source)
}

func (s *Server) postBinding(q *request, kind queues.DestKind) error {
	v, src, dst, err := s.bindingEnds(q, kind)
	if err != nil {
		return err
	}
	var body struct {
		RoutingKey string         `json:"routing_key"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	def := queues.BindingDef{VHost: v, Source: src, DestKind: kind, Dest: dst, Key: body.RoutingKey, Args: amqpArgs(body.Arguments)}
	if err := s.checkBindPerms(q, def); err != nil {
		return err
	}
	if err := s.b.Bind(def); err != nil {
		return badOr(err)
	}
	q.w.Header().Set("Location", url.PathEscape(propertiesKey(def)))
	q.w.WriteHeader(http.StatusCreated)
	return nil
}

func (s *Server) bindingByProps(q *request, kind queues.DestKind) (obj, queues.BindingDef, error) {
	v, src, dst, err := s.bindingEnds(q, kind)
	if err != nil {
		return nil, queues.BindingDef{}, err
	}
	props := q.Var("props")
	for _, b := range s.b.Bindings(v) {
		if b.Source == src && b.DestKind == kind && b.Dest == dst && propertiesKey(b) == props {
			return bindingObj(b), b, nil
		}
	}
	return nil, queues.BindingDef{}, errNotFound()
}

// publish is POST /api/exchanges/{vhost}/{name}/publish: the message is
// routed and stored like one published over AMQP 0-9-1 (persistent
// messages synced where the queue would confirm them) before the answer.
func (s *Server) publish(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	var body struct {
		Properties      map[string]any `json:"properties"`
		RoutingKey      *string        `json:"routing_key"`
		Payload         *string        `json:"payload"`
		PayloadEncoding string         `json:"payload_encoding"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.RoutingKey == nil || body.Payload == nil {
		return errBadRequest("routing_key and payload are required")
	}
	var payload []byte
	switch body.PayloadEncoding {
	case "string", "":
		payload = []byte(*body.Payload)
	case "base64":
		if payload, err = base64.StdEncoding.DecodeString(*body.Payload); err != nil {
			return errBadRequest("payload is not base64")
		}
	default:
		return errBadRequest(fmt.Sprintf("payload_encoding %q: string or base64", body.PayloadEncoding))
	}
	x := exchangeVar(q, "name")
	if _, err := s.exchange(v, x); err != nil {
		return err
	}
	if err := q.checkPerm(v, queues.PermWrite, x); err != nil {
		return err
	}
	props, err := amqpProperties(body.Properties)
	if err != nil {
		return badRequestOr(err)
	}
	if props.Flags&wire.FlagUserID != 0 && props.UserID != q.user.Name {
		return errBadRequest(fmt.Sprintf("user_id property set to '%s' but authenticated user was '%s'", props.UserID, q.user.Name))
	}
	raw, err := wire.AppendProperties(nil, &props)
	if err != nil {
		return badRequestOr(err)
	}
	key := *body.RoutingKey
	rm := queues.RoutingMessage{Keys: []string{key}, Props: queues.RoutingProps{
		Timestamp: props.Timestamp, HasTimestamp: props.Flags&wire.FlagTimestamp != 0,
	}}
	if props.Flags&wire.FlagMessageID != 0 {
		rm.Props.MessageID = []byte(props.MessageID)
	}
	if props.Flags&wire.FlagCorrelationID != 0 {
		rm.Props.CorrelationID = []byte(props.CorrelationID)
	}
	if props.Headers != nil {
		rm.Headers = props.Headers
	}
	names, err := s.b.RouteMessage(v, x, &rm, nil)
	if err != nil {
		return badOr(err)
	}
	var dsts []queues.Destination
	for _, n := range names {
		if d, ok := s.b.Destination(v, n); ok {
			dsts = append(dsts, d)
		}
	}
	if len(dsts) == 0 {
		return q.reply(obj{"routed": false})
	}
	msg := queues.Message{Exchange: x, RoutingKey: key, Props: raw, Body: payload, Persistent: props.DeliveryMode == 2}
	pub := queues.Publishing{
		Record: queues.EncodeRecord(nil, &msg), Persistent: msg.Persistent,
		Stream: amqp.StreamMessage(x, key, raw, payload), SizeHint: len(raw) + len(payload),
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	wg.Add(len(dsts))
	queues.Publish(dsts, &pub, func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		wg.Done()
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return q.reply(obj{"routed": true})
}

// amqpProperties reads RabbitMQ's JSON form of AMQP 0-9-1 properties.
func amqpProperties(in map[string]any) (wire.Properties, error) {
	var p wire.Properties
	str := func(k string, flag uint16, dst *string) error {
		v, ok := in[k]
		if !ok {
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("property %s must be a string", k)
		}
		*dst = s
		p.Flags |= flag
		return nil
	}
	num := func(k string, flag uint16, max int64) (int64, error) {
		v, ok := in[k]
		if !ok {
			return 0, nil
		}
		n, ok := amqpValue(v).(int64)
		if !ok || n < 0 || n > max {
			return 0, fmt.Errorf("property %s must be an integer from 0 to %d", k, max)
		}
		p.Flags |= flag
		return n, nil
	}
	for _, f := range []struct {
		k    string
		flag uint16
		dst  *string
	}{
		{"content_type", wire.FlagContentType, &p.ContentType},
		{"content_encoding", wire.FlagContentEncoding, &p.ContentEncoding},
		{"correlation_id", wire.FlagCorrelationID, &p.CorrelationID},
		{"reply_to", wire.FlagReplyTo, &p.ReplyTo},
		{"expiration", wire.FlagExpiration, &p.Expiration},
		{"message_id", wire.FlagMessageID, &p.MessageID},
		{"type", wire.FlagType, &p.Type},
		{"user_id", wire.FlagUserID, &p.UserID},
		{"app_id", wire.FlagAppID, &p.AppID},
		{"cluster_id", wire.FlagClusterID, &p.ClusterID},
	} {
		if err := str(f.k, f.flag, f.dst); err != nil {
			return p, err
		}
	}
	dm, err := num("delivery_mode", wire.FlagDeliveryMode, 2)
	if err != nil {
		return p, err
	}
	p.DeliveryMode = uint8(dm)
	prio, err := num("priority", wire.FlagPriority, 255)
	if err != nil {
		return p, err
	}
	p.Priority = uint8(prio)
	ts, err := num("timestamp", wire.FlagTimestamp, 1<<62)
	if err != nil {
		return p, err
	}
	p.Timestamp = uint64(ts)
	if h, ok := in["headers"]; ok {
		m, ok := h.(map[string]any)
		if !ok {
			return p, errors.New("property headers must be an object")
		}
		p.Headers = wire.Table(amqpArgs(m))
		p.Flags |= wire.FlagHeaders
	}
	for k := range in {
		switch k {
		case "content_type", "content_encoding", "correlation_id", "reply_to", "expiration", "message_id", "type",
			"user_id", "app_id", "cluster_id", "delivery_mode", "priority", "timestamp", "headers":
		default:
			return p, fmt.Errorf("unknown property %q", k)
		}
	}
	return p, nil
}
