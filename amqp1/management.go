package amqp1

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
)

// The management node, "HTTP over AMQP 1.0" at address /management, as
// RabbitMQ 4.x's rabbit_amqp_management and the management-link parts
// of rabbit_amqp_session serve it.
//
// A client attaches a link pair (OASIS Link Pair CS 01): a sender with
// target /management and snd-settle-mode settled, and a receiver with
// source /management, both with one link name and the link property
// paired = true (else the attach is refused with amqp:invalid-field); the
// sender's source address must equal the receiver's target address. A
// sender with another snd-settle-mode is an ordinary sender, whose
// target "/management" is refused as a bad address, as RabbitMQ's is.
// The halves attach in either order; a session may hold several pairs.
// Warren grants the sender 8 credits (MAX_MANAGEMENT_LINK_CREDIT) and
// tops them up at half; the receiver sends pre-settled.
//
// A request is one settled transfer: properties message-id, to (the
// path, with its query), subject (the HTTP method) and reply-to "$me",
// and an amqp-value body (null or a map). The response goes on the
// pair's receiver: properties subject = the status code ("200", "201",
// "204", "400", "403", "404", "409") and correlation-id = the request's
// message-id, application-properties http:response = "1.1", and an
// amqp-value body (a map, a list, null, or the error text as a string).
// Requests are served one at a time, in order, on the reader goroutine,
// as RabbitMQ's session does; a pipelined client waits for nothing but
// credit. The operations are in management_ops.go.
//
// What RabbitMQ answers with a session error rather than a response,
// Warren does too: a request sent unsettled or in several transfers, or
// whose properties are not as above, or an operation (method, path and
// body shape) that is none of RabbitMQ's (amqp:internal-error); a
// missing permission (amqp:unauthorized-access, with the 0-9-1 text); a
// request while the client's receiver has used up or drained its credit,
// or while the receiver half is not attached (amqp:precondition-failed).
// A request that overtakes the receiver's first flow is answered when it
// comes (mgmtLink.waiting).

// mgmtAddress is the management node's address.
const mgmtAddress = "/management"

// mgmtMaxLinkCredit is the credit of a pair's sender
// (MAX_MANAGEMENT_LINK_CREDIT), topped up when half is used.
const mgmtMaxLinkCredit = 8

// mgmtMaxWaiting bounds the responses that wait for a receiver's first
// flow (mgmtLink.waiting).
const mgmtMaxWaiting = 4 * mgmtMaxLinkCredit

// mgmtPair is a management link pair, by link name. Guarded by conn.mu.
type mgmtPair struct {
	clientAddr string    // the sender's source address, the receiver's target address
	in, out    *mgmtLink // the halves, nil until attached
}

// mgmtLink is one half of a pair. Guarded by conn.mu.
type mgmtLink struct {
	name          string
	handle        uint32
	deliveryCount uint32
	credit        uint32

	// A receiver's responses that wait for the client's first flow.
	// go-amqp sends a receiver's credit after the attach returns, so a
	// client's first request may overtake it: RabbitMQ ends the session
	// then (its Go client sleeps 10 ms after attaching); Warren answers
	// once the credit comes. Credit used up or drained after that is
	// RabbitMQ's session error.
	flowed  bool
	waiting [][]byte
}

// isMgmtAttach reports whether a is a half of a management link pair:
// a settled sender to /management or a receiver from it.
func isMgmtAttach(a *frame.Attach) bool {
	if a.Role == frame.RoleSender {
		return a.SndSettleMode == frame.SndSettled && a.Target != nil && !a.Target.Coordinator && a.Target.Address == mgmtAddress
	}
	return a.Source != nil && a.Source.Address == mgmtAddress
}

// checkPaired checks the paired link property (a symbol key, true).
func checkPaired(props amqp10.Map) *amqpError {
	if v, ok := props.Symbol("paired"); ok {
		if b, isBool := v.(bool); isBool && b {
			return nil
		}
	}
	return &amqpError{cond: frame.CondInvalidField, desc: "Link property 'paired' is not set to boolean value 'true'"}
}

// attachMgmt attaches a half of a management link pair.
func (s *session) attachMgmt(a *frame.Attach) *amqpError {
	if e := checkPaired(a.Properties); e != nil {
		return e
	}
	sender := a.Role == frame.RoleSender // the client's sender: the pair's incoming half
	var clientAddr string
	if sender && a.Source != nil {
		clientAddr = a.Source.Address
	} else if !sender && a.Target != nil {
		clientAddr = a.Target.Address
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.ended {
		return nil
	}
	p := s.mgmtPairs[a.Name]
	switch {
	case p == nil:
		p = &mgmtPair{clientAddr: clientAddr}
	case p.clientAddr == clientAddr && (sender && p.in == nil && p.out != nil || !sender && p.in != nil && p.out == nil):
	default:
		return &amqpError{cond: frame.CondPreconditionFailed, desc: fmt.Sprintf("received invalid attach for management link pair '%s'", a.Name)}
	}
	l := &mgmtLink{name: a.Name, handle: a.Handle}
	s.mgmtPairs[a.Name] = p
	if sender {
		l.deliveryCount, l.credit = a.InitialDeliveryCount, mgmtMaxLinkCredit
		p.in = l
		s.mgmtIn[a.Handle] = l
		c.send(s.channel, &frame.Attach{
			Name:           a.Name,
			Handle:         a.Handle,
			Role:           frame.RoleReceiver,
			SndSettleMode:  frame.SndSettled,
			RcvSettleMode:  frame.RcvFirst,
			Source:         a.Source,
			Target:         a.Target,
			MaxMessageSize: c.cfg.MaxMessageSize,
			Properties:     a.Properties,
		})
		s.mgmtFlowLocked(l)
		return nil
	}
	p.out = l
	s.mgmtOut[a.Handle] = l
	c.send(s.channel, &frame.Attach{
		Name:                    a.Name,
		Handle:                  a.Handle,
		Role:                    frame.RoleSender,
		SndSettleMode:           frame.SndSettled,
		RcvSettleMode:           a.RcvSettleMode,
		Source:                  a.Source,
		Target:                  a.Target,
		HasInitialDeliveryCount: true,
		MaxMessageSize:          a.MaxMessageSize,
		Properties:              a.Properties,
	})
	return nil
}

// mgmtFlowLocked sends a pair half's link state.
// REQUIRES: c.mu held.
func (s *session) mgmtFlowLocked(l *mgmtLink) {
	f := &frame.Flow{
		Handle: l.handle, HasHandle: true,
		DeliveryCount: l.deliveryCount, HasDeliveryCount: true,
		LinkCredit: l.credit, HasLinkCredit: true,
	}
	s.sessionFlowLocked(f)
	s.c.send(s.channel, f)
}

// mgmtLinkFlowLocked applies the client's flow to a pair half: the
// receiver's credit (a drain uses it all up: no response is waiting for
// credit), or an echo.
// REQUIRES: c.mu held.
func (s *session) mgmtLinkFlowLocked(l *mgmtLink, out bool, f *frame.Flow) {
	if out && f.HasLinkCredit {
		dc := l.deliveryCount
		if f.HasDeliveryCount {
			dc = f.DeliveryCount
		}
		l.credit = uint32(max(int64(dc)+int64(f.LinkCredit)-int64(l.deliveryCount), 0))
		l.flowed = true
		for len(l.waiting) > 0 && l.credit > 0 {
			l.deliveryCount++
			l.credit--
			s.pending = append(s.pending, &outDelivery{mgmt: l, payload: l.waiting[0]})
			l.waiting = l.waiting[1:]
		}
		if len(l.waiting) == 0 {
			l.waiting = nil
		}
		if f.Drain {
			l.deliveryCount += l.credit
			l.credit = 0
			f := &frame.Flow{
				Handle: l.handle, HasHandle: true,
				DeliveryCount: l.deliveryCount, HasDeliveryCount: true,
				LinkCredit: 0, HasLinkCredit: true,
				Drain: true,
			}
			s.sessionFlowLocked(f)
			s.c.send(s.channel, f)
			return
		}
	}
	if f.Echo {
		s.mgmtFlowLocked(l)
	}
}

// detachMgmtLocked forgets a pair half (the client detached it); it
// reports whether handle was one. Responses not sent yet are dropped.
// REQUIRES: c.mu held.
func (s *session) detachMgmtLocked(handle uint32) bool {
	l, in := s.mgmtIn[handle]
	if in {
		delete(s.mgmtIn, handle)
	} else if l = s.mgmtOut[handle]; l != nil {
		delete(s.mgmtOut, handle)
		keep := s.pending[:0]
		for _, od := range s.pending {
			if od.mgmt != l {
				keep = append(keep, od)
			}
		}
		s.pending = keep
	} else {
		return false
	}
	if p := s.mgmtPairs[l.name]; p != nil {
		if in {
			p.in = nil
		} else {
			p.out = nil
		}
		if p.in == nil && p.out == nil {
			delete(s.mgmtPairs, l.name)
		}
	}
	return true
}

// mgmtTransfer serves a request sent on a pair's sender (the reader
// goroutine) and queues the response on its receiver.
func (s *session) mgmtTransfer(in *mgmtLink, t *frame.Transfer, payload []byte) error {
	c := s.c
	if !t.Settled {
		s.end(&amqpError{cond: frame.CondInternalError, desc: "management requests must be sent settled"})
		return nil
	}
	if t.More {
		s.end(&amqpError{cond: frame.CondInternalError, desc: "management requests must fit in one transfer"})
		return nil
	}
	c.mu.Lock()
	var e *amqpError
	p := s.mgmtPairs[in.name]
	switch {
	case in.credit == 0:
		e = &amqpError{cond: frame.CondTransferLimitExceeded, desc: fmt.Sprintf("insufficient credit (%d) for management link from client to RabbitMQ", in.credit)}
	case p == nil || p.out == nil:
		e = &amqpError{cond: frame.CondPreconditionFailed, desc: "received transfer on half open management link pair"}
	case p.out.credit == 0 && (p.out.flowed && len(p.out.waiting) == 0 || len(p.out.waiting) >= mgmtMaxWaiting):
		e = &amqpError{cond: frame.CondPreconditionFailed, desc: fmt.Sprintf("insufficient credit (%d) for management link from RabbitMQ to client", p.out.credit)}
	}
	c.mu.Unlock()
	if e != nil {
		s.end(e)
		return nil
	}
	resp, e := c.mgmtRequest(payload)
	if e != nil {
		s.end(e)
		return nil
	}
	c.mu.Lock()
	if s.ended || s.mgmtIn[in.handle] != in {
		c.mu.Unlock()
		return nil
	}
	in.deliveryCount++
	in.credit--
	if in.credit <= mgmtMaxLinkCredit/2 {
		in.credit = mgmtMaxLinkCredit
		s.mgmtFlowLocked(in)
	}
	out := p.out
	if out == nil || s.mgmtOut[out.handle] != out {
		c.mu.Unlock()
		return nil // the receiver went while the request was served
	}
	if !out.flowed || len(out.waiting) > 0 || out.credit == 0 {
		out.waiting = append(out.waiting, resp)
		c.mu.Unlock()
		return nil
	}
	out.deliveryCount++
	out.credit--
	s.pending = append(s.pending, &outDelivery{mgmt: out, payload: resp})
	acks := s.sendPendingLocked() // consumers' deliveries may wait behind the window too
	c.mu.Unlock()
	ackAll(acks)
	return nil
}

// mgmtResponse is the outcome of a request: a status code and the
// amqp-value body, already encoded.
type mgmtResponse struct {
	status string
	body   []byte // an encoded AMQP value
}

// mgmtError is a refusal answered with a response: a status code and
// RabbitMQ's text, which is the body.
type mgmtError struct {
	status string
	text   string
}

func (e *mgmtError) Error() string { return e.status + " " + e.text }

func mgmtErrorf(status, format string, args ...any) *mgmtError {
	return &mgmtError{status: status, text: fmt.Sprintf(format, args...)}
}

// noBody is the body of a request without an amqp-value section, which
// is neither null nor a map: no operation takes it.
type noBody struct{}

// mgmtRequest decodes a request, serves it and encodes the response. A
// non-nil *amqpError ends the session.
func (c *conn) mgmtRequest(payload []byte) ([]byte, *amqpError) {
	var m amqp10.Message
	if err := m.UnmarshalBinary(payload); err != nil {
		return nil, &amqpError{cond: frame.CondDecodeError, desc: fmt.Sprintf("failed to parse management request: %v", err)}
	}
	p := m.Properties
	const need = amqp10.PropTo | amqp10.PropSubject | amqp10.PropReplyTo
	if p == nil || p.Set&need != need || p.ReplyTo != "$me" {
		return nil, &amqpError{cond: frame.CondInternalError, desc: "management request: the properties must set to, subject and reply-to '$me'"}
	}
	var body any = noBody{}
	if m.Body.Kind == amqp10.BodyValue {
		body = m.Body.Value
	}
	var resp mgmtResponse
	segs, query, err := parseMgmtURI(p.To)
	if err == nil {
		resp, err = c.mgmtServe(p.Subject, segs, query, body)
	}
	if err != nil {
		var me *mgmtError
		switch e := err.(type) {
		case *amqpError:
			return nil, e
		case *mgmtError:
			me = e
		default:
			me = &mgmtError{status: "400", text: errText(err)}
		}
		c.log.Warn("management request failed", "method", p.Subject, "to", p.To, "status", me.status, "reason", me.text)
		resp = mgmtResponse{status: me.status, body: amqp10.AppendString(nil, me.text)}
	}
	props := &amqp10.Properties{Set: amqp10.PropSubject, Subject: resp.status}
	if p.Set&amqp10.PropMessageID != 0 {
		props.Set |= amqp10.PropCorrelationID
		props.CorrelationID = p.MessageID
	}
	out := amqp10.Message{
		Properties:            props,
		ApplicationProperties: amqp10.Map{{Key: "http:response", Value: "1.1"}},
	}
	b, merr := out.AppendTo(nil)
	if merr != nil {
		return nil, &amqpError{cond: frame.CondInternalError, desc: fmt.Sprintf("management response: %v", merr)}
	}
	b = amqp10.AppendDescriptor(b, amqp10.DescAMQPValue)
	if resp.body == nil {
		return amqp10.AppendNull(b), nil
	}
	return append(b, resp.body...), nil
}

// errNoOperation is a request that matches none of the operations:
// RabbitMQ's handle_http_req has no clause for it and its session ends
// with amqp:internal-error.
func errNoOperation(method, to string) *amqpError {
	return &amqpError{cond: frame.CondInternalError, desc: fmt.Sprintf("no management operation %s %s", method, to)}
}

// parseMgmtURI splits a request's "to" as RabbitMQ's parse_uri does
// (uri_string:normalize, then the path split at "/" and the query
// dissected): the path's segments, still percent-encoded, after its
// leading "/" and with dot segments removed, and the query's decoded
// keys and values (the last of a repeated key). A URI with a character
// RFC 3986 does not allow, or a bad percent-encoding, is 400. A path that
// does not start with "/" gives no segments (no operation matches).
func parseMgmtURI(uri string) ([]string, map[string]string, error) {
	if i, bad := uriCheck(uri); bad != "" {
		return nil, nil, mgmtErrorf("400", "failed to normalize URI '%s': %s \"%s\"", uri, bad, uri[i:])
	}
	rest, _, _ := strings.Cut(uri, "#")
	path, rawQuery, hasQuery := strings.Cut(rest, "?")
	if strings.HasPrefix(path, "//") { // an authority, as in "//host/path"
		path = path[2:]
		if i := strings.IndexByte(path, '/'); i >= 0 {
			path = path[i:]
		} else {
			path = ""
		}
	}
	var query map[string]string
	if hasQuery {
		var err error
		if query, err = dissectQuery(rawQuery); err != nil {
			return nil, nil, err
		}
	}
	if !strings.HasPrefix(path, "/") {
		return nil, query, nil
	}
	path = removeDotSegments(path)
	return strings.Split(path[1:], "/"), query, nil
}

// uriCheck finds the first byte of uri that RFC 3986 does not allow in
// a URI reference (a path, query and fragment: unreserved, sub-delims,
// ":", "@", "/", "?", "#" and percent-encodings), and names the error as
// uri_string does.
func uriCheck(uri string) (int, string) {
	for i := 0; i < len(uri); i++ {
		ch := uri[i]
		switch {
		case ch == '%':
			if i+2 >= len(uri) || !isHex(uri[i+1]) || !isHex(uri[i+2]) {
				return i, "invalid_percent_encoding"
			}
			i += 2
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/?#", ch) >= 0:
		default:
			return i, "invalid_uri"
		}
	}
	return 0, ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// removeDotSegments is RFC 3986 §5.2.4 on an absolute path.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	var out []string // output segments, each with its leading "/"
	for in != "" {
		switch {
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			i := strings.IndexByte(in[1:], '/')
			if i < 0 {
				out, in = append(out, in), ""
			} else {
				out, in = append(out, in[:i+1]), in[i+1:]
			}
		}
	}
	return strings.Join(out, "")
}

// dissectQuery decodes a query as uri_string:dissect_query does: pairs
// separated by "&", "+" for a space, percent-encodings; a key without
// "=" has the value "true" (Erlang's true).
func dissectQuery(q string) (map[string]string, error) {
	out := map[string]string{}
	if q == "" {
		return out, nil
	}
	for _, kv := range strings.Split(q, "&") {
		k, v, hasValue := strings.Cut(kv, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return nil, mgmtErrorf("400", "failed to dissect query '%s': invalid_percent_encoding \"%s\"", q, k)
		}
		if !hasValue {
			out[dk] = "true"
			continue
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			return nil, mgmtErrorf("400", "failed to dissect query '%s': invalid_percent_encoding \"%s\"", q, v)
		}
		out[dk] = dv
	}
	return out, nil
}
