package msgconv

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqptab"
)

// Streams store AMQP 1.0 encoded messages, as RabbitMQ's do. A message
// published over AMQP 0-9-1 to a stream is converted as RabbitMQ's
// mc_amqpl:convert_to(mc_amqp) and mc_amqp:protocol_state convert it, and
// a stream record delivered to an AMQP 0-9-1 consumer as
// mc_amqpl:convert_from(mc_amqp) and mc_amqpl:protocol_state convert it:
//
//	0-9-1                  1.0 (publish)                         back (deliver)
//	delivery-mode 2        header durable true (else false)      durable → 2, false → 1, absent → x-basic-delivery-mode
//	priority               header priority (ubyte)               header priority, else x-basic-priority
//	expiration             header ttl (uint ms)                  ttl as a decimal string, else x-basic-expiration
//	—                      header first-acquirer true (false     —
//	                       with an x-death header), delivery-
//	                       count 0 (a delivery's: its own)
//	exchange               annotation x-exchange (utf8)          basic.deliver exchange ("" when absent)
//	routing key            annotation x-routing-key (utf8)       basic.deliver routing key (the stream's name when absent)
//	type                   annotation x-basic-type (utf8)        type; "amqp-1.0" when the body is not data sections
//	headers "x-..."        annotation of that name, any type     header, except x-basic-*, x-exchange, x-routing-key, x-death
//	header CC (array)      annotation x-cc (list)                header CC
//	—                      x-opt-rabbitmq-received-time          header timestamp_in_ms (long)
//	other headers          application-properties (utf8 keys;    headers (application property keys up to 255 bytes)
//	                       simple types)
//	the headers left out   annotation x-opt-warren-amqp091-      headers, with their 0-9-1 types
//	  (see below)          headers: binary, a 0-9-1 table
//	message-id             properties message-id: uuid for       uuid → "urn:uuid:…", ulong → decimal, string ≤ 255 →
//	                       "urn:uuid:…", else utf8               message-id; binary or longer → header x-message-id
//	correlation-id         as message-id                         as message-id, header x-correlation-id
//	user-id                properties user-id (binary)           user-id if a valid shortstr
//	reply-to               properties reply-to "/queues/<quoted>" "/queues/" prefix removed, unquoted
//	content-type           properties content-type (symbol)      content-type
//	content-encoding       properties content-encoding (symbol)  content-encoding
//	timestamp (s)          properties creation-time (ms)         timestamp (ms / 1000)
//	app-id                 properties group-id                   app-id
//	cluster-id             dropped                               —
//	body                   one data section (type "amqp-1.0":    data sections concatenated; other bodies: their
//	                       the body's own sections)              encoded sections and the footer
//	—                      —                                     header x-stream-offset (long), sorted, first wins
//
// Header values convert as mc_amqpl:from_091 and to_091 do: longstr →
// utf8 when UTF-8 without NUL up to 4096 bytes, else binary; timestamp
// seconds ↔ timestamp ms; the integer, float and boolean types to their
// equals; array ↔ list; table ↔ map with symbol keys. Two differences,
// both so that what a 0-9-1 client published comes back as it was:
//
//   - binary comes back as a byte array ('x'), as RabbitMQ 3.x did, not as
//     a longstr (RabbitMQ 4.x): amqp091-go hands the consumer the []byte
//     it published, not a string;
//   - a header AMQP 1.0 cannot carry where RabbitMQ puts it (an array or
//     table among the application properties, whose values must be
//     simple; a decimal, for which RabbitMQ's from_091 has no clause; a
//     key that is not UTF-8) is kept, with its 0-9-1 type, in the
//     annotation x-opt-warren-amqp091-headers: an opaque binary to stream
//     clients (whose decoders may not know AMQP 1.0 decimals), the
//     headers again for 0-9-1 consumers. RabbitMQ drops them, or fails.
//
// Where a value cannot come back (char, uuid, decimal or described AMQP
// 1.0 values; a non-UTF-8 string where 1.0 needs one; a value too long
// for a shortstr) it is left out.

const (
	amqp10Type           = "amqp-1.0" // the type of 0-9-1 messages whose body is AMQP 1.0 sections
	annotationHeaders091 = "x-opt-warren-amqp091-headers"
	replyToQueuePrefix   = "/queues/"
	headerStreamOffset   = "x-stream-offset"
	headerStreamFilter   = "x-stream-filter-value"
	maxUTF8ScanLen       = 4096 // mc_util's UTF8_SCAN_LIMIT
	annotationExchange   = "x-exchange"
	annotationRoutingKey = "x-routing-key"
)

// AppendAMQP10 appends the AMQP 1.0 encoding of an AMQP 0-9-1
// message (raw content properties and body) published to exchange with
// routing key key, and returns the message's stream filter value (its
// x-stream-filter-value header when that is a UTF-8 string; nil for
// none). props must have been validated (the publish path scanned them).
func AppendAMQP10(dst []byte, exchange, key string, props, body []byte) ([]byte, []byte, error) {
	return AppendAMQP10Delivery(dst, exchange, key, props, nil, body, false, 0)
}

// AppendAMQP10Delivery is AppendAMQP10 for a delivery to an AMQP 1.0
// consumer: the header's delivery-count is deliveryCount and its
// first-acquirer false when the message was delivered before
// (redelivered, a delivery count, or dead-lettered: an x-death header),
// as mc_amqp's update_header_from_anns sets them.
//
// props10, when set, is the properties section the message was published
// with over AMQP 1.0 (queues.Message.AMQP10Props): it goes out as it came
// in, instead of the one props convert to (which loses to, subject,
// absolute-expiry-time, group-sequence, reply-to-group-id, the
// milliseconds of creation-time and the types of non-string ids).
func AppendAMQP10Delivery(dst []byte, exchange, key string, props, props10, body []byte, redelivered bool, deliveryCount uint32) ([]byte, []byte, error) {
	p, err := wire.ParseProperties(props)
	if err != nil {
		return dst, nil, err
	}
	hkeys := slices.Sorted(maps.Keys(p.Headers))

	// header: durable, priority, ttl, first-acquirer, delivery-count.
	dst = amqp10.AppendDescriptor(dst, amqp10.DescHeader)
	dst, c := amqp10.BeginList(dst)
	dst = amqp10.AppendBool(dst, p.Flags&wire.FlagDeliveryMode != 0 && p.DeliveryMode == 2)
	if p.Flags&wire.FlagPriority != 0 {
		dst = amqp10.AppendUbyte(dst, p.Priority)
	} else {
		dst = amqp10.AppendNull(dst)
	}
	if ttl, err := strconv.ParseInt(p.Expiration, 10, 64); p.Flags&wire.FlagExpiration != 0 && err == nil {
		dst = amqp10.AppendUint(dst, uint32(ttl)) // Erlang's V:32 keeps the low bits
	} else {
		dst = amqp10.AppendNull(dst)
	}
	_, dead := p.Headers["x-death"]
	dst = amqp10.AppendBool(dst, !redelivered && deliveryCount == 0 && !dead)
	dst = amqp10.AppendUint(dst, deliveryCount)
	dst = c.End(dst, 5)

	// message-annotations: x-exchange, x-routing-key, x-basic-type, then
	// the x- headers and CC in header order.
	dst = amqp10.AppendDescriptor(dst, amqp10.DescMessageAnnotations)
	dst, c = amqp10.BeginMap(dst)
	n := 2 // entries
	dst = amqp10.AppendString(amqp10.AppendSymbol(dst, annotationExchange), validUTF8(exchange))
	dst = amqp10.AppendString(amqp10.AppendSymbol(dst, annotationRoutingKey), validUTF8(key))
	if p.Flags&wire.FlagType != 0 && utf8.ValidString(p.Type) {
		dst = amqp10.AppendString(amqp10.AppendSymbol(dst, "x-basic-type"), p.Type)
		n++
	}
	var filter []byte
	var kept wire.Table // the headers AMQP 1.0 cannot carry where RabbitMQ puts them
	keep := func(k string, v any) {
		if kept == nil {
			kept = wire.Table{}
		}
		kept[k] = v
	}
	for _, k := range hkeys {
		v := p.Headers[k]
		name := k
		switch {
		case k == "CC":
			if _, ok := v.([]any); !ok {
				continue
			}
			name = "x-cc"
		case !strings.HasPrefix(k, "x-") || k == annotationExchange || k == annotationRoutingKey:
			if !strings.HasPrefix(k, "x-") && !fitsAppProperty(k, v) {
				keep(k, v)
			}
			continue
		}
		at := len(dst)
		dst = amqp10.AppendSymbol(dst, name)
		var ok bool
		if dst, ok = appendFrom091(dst, v, 1); !ok || !convertsWhole(v, 1) {
			dst = dst[:at]
			keep(k, v)
			continue
		}
		n++
		if k == headerStreamFilter {
			if s, ok := v.(string); ok && len(s) <= maxUTF8ScanLen && isUTF8NoNull(s) {
				filter = []byte(s)
			}
		}
	}
	if kept != nil {
		if t, err := amqptab.AppendTable(nil, kept); err == nil {
			dst = amqp10.AppendBinary(amqp10.AppendSymbol(dst, annotationHeaders091), t[4:]) // without the length
			n++
		}
	}
	dst = c.End(dst, 2*n)

	// properties.
	var pr amqp10.Properties
	if p.Flags&wire.FlagMessageID != 0 {
		pr.Set |= amqp10.PropMessageID
		pr.MessageID = messageIDTo10(p.MessageID)
	}
	if p.Flags&wire.FlagUserID != 0 {
		pr.Set |= amqp10.PropUserID
		pr.UserID = []byte(p.UserID)
	}
	if p.Flags&wire.FlagReplyTo != 0 && utf8.ValidString(p.ReplyTo) {
		pr.Set |= amqp10.PropReplyTo
		pr.ReplyTo = replyToQueuePrefix + quoteURI(p.ReplyTo)
	}
	if p.Flags&wire.FlagCorrelationID != 0 {
		pr.Set |= amqp10.PropCorrelationID
		pr.CorrelationID = messageIDTo10(p.CorrelationID)
	}
	if p.Flags&wire.FlagContentType != 0 && utf8.ValidString(p.ContentType) {
		pr.Set |= amqp10.PropContentType
		pr.ContentType = p.ContentType
	}
	if p.Flags&wire.FlagContentEncoding != 0 && utf8.ValidString(p.ContentEncoding) {
		pr.Set |= amqp10.PropContentEncoding
		pr.ContentEncoding = p.ContentEncoding
	}
	if p.Flags&wire.FlagTimestamp != 0 {
		pr.Set |= amqp10.PropCreationTime
		pr.CreationTime = amqp10.Timestamp(int64(p.Timestamp) * 1000)
	}
	if p.Flags&wire.FlagAppID != 0 && utf8.ValidString(p.AppID) {
		pr.Set |= amqp10.PropGroupID
		pr.GroupID = p.AppID
	}
	if props10 != nil {
		dst = append(dst, props10...)
	} else if pr.Set != 0 {
		if dst, err = pr.AppendTo(dst); err != nil {
			return dst, nil, err
		}
	}

	// application-properties: the other headers of simple types.
	at := len(dst)
	dst = amqp10.AppendDescriptor(dst, amqp10.DescApplicationProperties)
	dst, c = amqp10.BeginMap(dst)
	n = 0 // keys and values
	for _, k := range hkeys {
		v := p.Headers[k]
		if strings.HasPrefix(k, "x-") || !fitsAppProperty(k, v) {
			continue
		}
		e := len(dst)
		dst = amqp10.AppendString(dst, k)
		var ok bool
		if dst, ok = appendFrom091(dst, v, 1); !ok {
			dst = dst[:e]
			continue
		}
		n += 2
	}
	if n == 0 {
		dst = dst[:at]
	} else {
		dst = c.End(dst, n)
	}

	// body.
	if p.Type == amqp10Type && isAMQP10Body(body) {
		return append(dst, body...), filter, nil
	}
	return amqp10.AppendBinary(amqp10.AppendDescriptor(dst, amqp10.DescData), body), filter, nil
}

// fitsAppProperty reports whether a header goes to the application
// properties: a UTF-8 key and a simple value appendFrom091 converts.
func fitsAppProperty(k string, v any) bool {
	switch v.(type) {
	case []any, wire.Table, amqptab.Decimal:
		return false
	}
	return utf8.ValidString(k)
}

// convertsWhole reports whether appendFrom091 converts v without leaving
// anything out (a decimal inside an array or a table).
func convertsWhole(v any, depth int) bool {
	switch v := v.(type) {
	case amqptab.Decimal:
		return false
	case []any:
		for _, e := range v {
			if !convertsWhole(e, depth+1) {
				return false
			}
		}
	case wire.Table:
		for _, e := range v {
			if !convertsWhole(e, depth+1) {
				return false
			}
		}
	}
	return depth <= amqp10.MaxDepth
}

// validUTF8 returns s, or its bytes with invalid sequences replaced, so
// that the utf8 value is valid.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// isUTF8NoNull is mc_util:is_utf8_no_null.
func isUTF8NoNull(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// isAMQP10Body reports whether b is AMQP 1.0 body sections (and a
// footer), as a message of type "amqp-1.0" carries.
func isAMQP10Body(b []byte) bool {
	var m amqp10.Message
	return m.UnmarshalBinary(b) == nil && m.Body.Kind != amqp10.BodyNone && m.Header == nil &&
		m.DeliveryAnnotations == nil && m.MessageAnnotations == nil && m.Properties == nil &&
		m.ApplicationProperties == nil
}

// appendFrom091 appends a header value converted as mc_amqpl:from_091
// does; ok is false for a value RabbitMQ cannot convert (decimal).
func appendFrom091(dst []byte, v any, depth int) ([]byte, bool) {
	if depth > amqp10.MaxDepth {
		return dst, false
	}
	switch v := v.(type) {
	case nil:
		return amqp10.AppendNull(dst), true
	case bool:
		// {boolean, V} is the two-byte form.
		if v {
			return append(dst, 0x56, 1), true
		}
		return append(dst, 0x56, 0), true
	case string:
		if len(v) <= maxUTF8ScanLen && isUTF8NoNull(v) {
			return amqp10.AppendString(dst, v), true
		}
		return amqp10.AppendBinary(dst, []byte(v)), true
	case []byte:
		return amqp10.AppendBinary(dst, v), true
	case int8:
		return amqp10.AppendByte(dst, v), true
	case uint8:
		return amqp10.AppendUbyte(dst, v), true
	case int16:
		return amqp10.AppendShort(dst, v), true
	case uint16:
		return amqp10.AppendUshort(dst, v), true
	case int32:
		return amqp10.AppendInt(dst, v), true
	case uint32:
		return amqp10.AppendUint(dst, v), true
	case int64:
		return amqp10.AppendLong(dst, v), true
	case float32:
		return amqp10.AppendFloat(dst, v), true
	case float64:
		return amqp10.AppendDouble(dst, v), true
	case time.Time:
		return amqp10.AppendTimestamp(dst, v.Unix()*1000), true
	case []any:
		dst, c := amqp10.BeginList(dst)
		n := 0
		for _, e := range v {
			var ok bool
			if dst, ok = appendFrom091(dst, e, depth+1); ok {
				n++
			}
		}
		return c.End(dst, n), true
	case wire.Table:
		dst, c := amqp10.BeginMap(dst)
		n := 0
		for _, k := range slices.Sorted(maps.Keys(v)) {
			at := len(dst)
			dst = amqp10.AppendSymbol(dst, k)
			var ok bool
			if dst, ok = appendFrom091(dst, v[k], depth+1); !ok {
				dst = dst[:at]
				continue
			}
			n += 2
		}
		return c.End(dst, n), true
	}
	return dst, false // amqptab.Decimal: RabbitMQ's from_091 has no clause for it
}

// messageIDTo10 converts a message-id or correlation-id: a
// "urn:uuid:..." string becomes a uuid (mc_util:urn_string_to_uuid),
// other UTF-8 strings stay strings, others become binary.
func messageIDTo10(s string) any {
	if u, ok := parseURNUUID(s); ok {
		return u
	}
	if !utf8.ValidString(s) {
		return []byte(s)
	}
	return s
}

func parseURNUUID(s string) (amqp10.UUID, bool) {
	var u amqp10.UUID
	rest, ok := strings.CutPrefix(s, "urn:uuid:")
	if !ok || len(rest) != 36 || rest[8] != '-' || rest[13] != '-' || rest[18] != '-' || rest[23] != '-' {
		return u, false
	}
	h := rest[0:8] + rest[9:13] + rest[14:18] + rest[19:23] + rest[24:36]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, false
	}
	return u, true
}

// quoteURI percent-encodes all but the unreserved characters, as
// uri_string:quote/1 does.
func quoteURI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	return b.String()
}

// unquoteURI undoes percent-encoding (cow_uri:urldecode); ok is false
// for a malformed escape.
func unquoteURI(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		var v [1]byte
		if _, err := hex.Decode(v[:], []byte(s[i+1:i+3])); err != nil {
			return "", false
		}
		b.WriteByte(v[0])
		i += 2
	}
	return b.String(), true
}

// Delivery is a stream record converted for an AMQP 0-9-1
// consumer.
type Delivery struct {
	Exchange string
	Key      string
	Props    []byte // raw content properties
	Body     []byte // may alias the record
}

// StreamRecordTo091 converts the stream record at offset of the stream
// named queue for an AMQP 0-9-1 consumer, appending the properties to
// propBuf[:0]. A record that is not an AMQP 1.0 message (a stream client
// may publish anything) is delivered as it is, with only the
// x-stream-offset header.
func StreamRecordTo091(rec []byte, offset uint64, queue string, propBuf []byte) Delivery {
	d := Delivery{Key: queue}
	var m amqp10.Message
	if err := m.UnmarshalBinary(rec); err != nil || m.Body.Kind == amqp10.BodyNone {
		p := wire.Properties{Flags: wire.FlagHeaders, Headers: wire.Table{headerStreamOffset: int64(offset)}}
		d.Props, _ = wire.AppendProperties(propBuf[:0], &p)
		d.Body = rec
		return d
	}
	return to091Delivery(d, &m, wire.Table{headerStreamOffset: int64(offset)}, propBuf)
}

// To091 converts an AMQP 1.0 message (published over AMQP 1.0) to AMQP
// 0-9-1 content properties and body, as StreamRecordTo091 does but
// without a stream offset, appending the properties to propBuf[:0]; the
// exchange and routing key come from the x-exchange and x-routing-key
// annotations (empty when absent). A message that does not decode, or
// has no body, is an error wrapping amqp10's.
func To091(msg []byte, propBuf []byte) (Delivery, error) {
	var m amqp10.Message
	if err := m.UnmarshalBinary(msg); err != nil {
		return Delivery{}, err
	}
	if m.Body.Kind == amqp10.BodyNone {
		return Delivery{}, errNoBody
	}
	return to091Delivery(Delivery{}, &m, wire.Table{}, propBuf), nil
}

// MessageTo091 is To091 for a message already decoded (m must have a
// body): a front end that decoded it to route it need not decode it
// again.
func MessageTo091(m *amqp10.Message, propBuf []byte) Delivery {
	return to091Delivery(Delivery{}, m, wire.Table{}, propBuf)
}

// errNoBody is a message without body sections.
var errNoBody = errors.New("msgconv: message without a body")

// to091Delivery fills d from m; headers holds what goes first (the
// stream offset) and wins over m's values of the same name.
func to091Delivery(d Delivery, m *amqp10.Message, headers wire.Table, propBuf []byte) Delivery {
	first := maps.Clone(headers)
	ma := m.MessageAnnotations
	if v, ok := ma.Symbol(annotationExchange); ok {
		if s, ok := v.(string); ok {
			d.Exchange = s
		}
	}
	if v, ok := ma.Symbol(annotationRoutingKey); ok {
		if s, ok := v.(string); ok {
			d.Key = s
		}
	}

	var p wire.Properties
	setStr := func(flag uint16, dst *string, v string) {
		if len(v) <= wire.MaxShortstr {
			p.Flags |= flag
			*dst = v
		}
	}
	h := m.Header
	switch {
	case h != nil && h.Set&amqp10.HeaderDurable != 0:
		p.Flags |= wire.FlagDeliveryMode
		p.DeliveryMode = 1
		if h.Durable {
			p.DeliveryMode = 2
		}
	default:
		if n, ok := annotationUint8(ma, "x-basic-delivery-mode"); ok {
			p.Flags |= wire.FlagDeliveryMode
			p.DeliveryMode = n
		}
	}
	switch {
	case h != nil && h.Set&amqp10.HeaderPriority != 0:
		p.Flags |= wire.FlagPriority
		p.Priority = h.Priority
	default:
		if n, ok := annotationUint8(ma, "x-basic-priority"); ok {
			p.Flags |= wire.FlagPriority
			p.Priority = n
		}
	}
	switch {
	case h != nil && h.Set&amqp10.HeaderTTL != 0:
		setStr(wire.FlagExpiration, &p.Expiration, strconv.FormatUint(uint64(h.TTL), 10))
	default:
		if s, ok := annotationString(ma, "x-basic-expiration"); ok {
			setStr(wire.FlagExpiration, &p.Expiration, s)
		}
	}
	if m.Body.Kind != amqp10.BodyData {
		setStr(wire.FlagType, &p.Type, amqp10Type)
	} else if s, ok := annotationString(ma, "x-basic-type"); ok {
		setStr(wire.FlagType, &p.Type, s)
	}

	// Headers, first wins: x-stream-offset, the annotations, the ids that
	// do not fit a shortstr, the application properties.
	add := func(k string, v any) {
		if _, dup := headers[k]; !dup && len(k) <= wire.MaxShortstr {
			headers[k] = v
		}
	}
	for _, e := range ma {
		k, ok := e.Key.(amqp10.Symbol)
		if !ok {
			continue
		}
		switch name := string(k); {
		case name == "x-cc":
			if v, ok := to091(e.Value, 1); ok {
				add("CC", v)
			}
		case name == "x-opt-rabbitmq-received-time":
			if ts, ok := e.Value.(amqp10.Timestamp); ok {
				add("timestamp_in_ms", int64(ts))
			}
		case name == "x-opt-deaths":
			// x-death from AMQP 1.0 dead-lettering: not converted.
		case name == annotationHeaders091:
			if b, ok := e.Value.([]byte); ok {
				t, _, err := amqptab.ReadTable(append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b))), b...))
				if err != nil {
					continue // not ours: a stream client may write anything
				}
				for _, k := range slices.Sorted(maps.Keys(t)) {
					add(k, t[k])
				}
			}
		case !strings.HasPrefix(name, "x-") || strings.HasPrefix(name, "x-basic-") ||
			name == annotationExchange || name == annotationRoutingKey || name == "x-death":
		default:
			if v, ok := to091(e.Value, 1); ok {
				add(name, v)
			}
		}
	}
	if pr := m.Properties; pr != nil {
		if pr.Set&amqp10.PropCorrelationID != 0 {
			if s, hv, ok := messageIDTo091(pr.CorrelationID); ok {
				setStr(wire.FlagCorrelationID, &p.CorrelationID, s)
			} else if hv != nil {
				add("x-correlation-id", hv)
			}
		}
		if pr.Set&amqp10.PropMessageID != 0 {
			if s, hv, ok := messageIDTo091(pr.MessageID); ok {
				setStr(wire.FlagMessageID, &p.MessageID, s)
			} else if hv != nil {
				add("x-message-id", hv)
			}
		}
		if pr.Set&amqp10.PropUserID != 0 && len(pr.UserID) <= wire.MaxShortstr && isUTF8NoNull(string(pr.UserID)) {
			setStr(wire.FlagUserID, &p.UserID, string(pr.UserID))
		}
		if pr.Set&amqp10.PropReplyTo != 0 && len(pr.ReplyTo) <= wire.MaxShortstr {
			r, ok := pr.ReplyTo, true
			if q, cut := strings.CutPrefix(r, replyToQueuePrefix); cut {
				r, ok = unquoteURI(q)
			}
			if ok {
				setStr(wire.FlagReplyTo, &p.ReplyTo, r)
			}
		}
		if pr.Set&amqp10.PropContentType != 0 {
			setStr(wire.FlagContentType, &p.ContentType, pr.ContentType)
		}
		if pr.Set&amqp10.PropContentEncoding != 0 {
			setStr(wire.FlagContentEncoding, &p.ContentEncoding, pr.ContentEncoding)
		}
		if pr.Set&amqp10.PropCreationTime != 0 && pr.CreationTime >= 0 {
			p.Flags |= wire.FlagTimestamp
			p.Timestamp = uint64(pr.CreationTime / 1000)
		}
		if pr.Set&amqp10.PropGroupID != 0 {
			setStr(wire.FlagAppID, &p.AppID, pr.GroupID)
		}
	}
	for _, e := range m.ApplicationProperties {
		k, ok := e.Key.(string)
		if !ok {
			continue
		}
		if v, ok := to091(e.Value, 1); ok {
			add(k, v)
		}
	}
	if len(headers) > 0 {
		p.Flags |= wire.FlagHeaders
		p.Headers = headers
	}
	var err error
	if d.Props, err = wire.AppendProperties(propBuf[:0], &p); err != nil {
		// A value the 0-9-1 table cannot hold: deliver the offset alone.
		p = wire.Properties{}
		if len(first) > 0 {
			p = wire.Properties{Flags: wire.FlagHeaders, Headers: first}
		}
		d.Props, _ = wire.AppendProperties(propBuf[:0], &p)
	}

	switch {
	case m.Body.Kind != amqp10.BodyData:
		d.Body = m.BodyAndFooter
	case len(m.Body.Data) == 1:
		d.Body = m.Body.Data[0]
	default:
		d.Body = bytes.Join(m.Body.Data, nil)
	}
	return d
}

// messageIDTo091 converts a message-id or correlation-id as
// mc_amqpl:message_id does: uuid and ulong and short strings to the
// property (ok), binary and long strings to a header value (hv).
func messageIDTo091(v any) (s string, hv any, ok bool) {
	switch id := v.(type) {
	case amqp10.UUID:
		return "urn:uuid:" + id.String(), nil, true
	case uint64:
		return strconv.FormatUint(id, 10), nil, true
	case []byte:
		return "", id, false
	case string:
		if len(id) <= wire.MaxShortstr {
			return id, nil, true
		}
		return "", id, false
	}
	return "", nil, false
}

// annotationString returns a string (or symbol) annotation.
func annotationString(ma amqp10.Map, name string) (string, bool) {
	v, ok := ma.Symbol(name)
	if !ok {
		return "", false
	}
	switch s := v.(type) {
	case string:
		return s, true
	case amqp10.Symbol:
		return string(s), true
	}
	return "", false
}

// annotationUint8 returns an integer annotation that fits an octet.
func annotationUint8(ma amqp10.Map, name string) (uint8, bool) {
	v, ok := ma.Symbol(name)
	if !ok {
		return 0, false
	}
	var n int64
	switch x := v.(type) {
	case uint8:
		return x, true
	case int8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case int16:
		n = int64(x)
	case uint32:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxUint8 {
			return 0, false
		}
		n = int64(x)
	default:
		return 0, false
	}
	if n < 0 || n > math.MaxUint8 {
		return 0, false
	}
	return uint8(n), true
}

// to091 converts an AMQP 1.0 value to a field-table value as
// mc_amqpl:to_091 does; ok is false for values it has no clause for.
func to091(v any, depth int) (any, bool) {
	if depth > amqptab.MaxDepth-1 {
		return nil, false
	}
	switch x := v.(type) {
	case nil, bool, int8, uint8, int16, uint16, int32, uint32, int64, float32, float64:
		return x, true
	case string:
		return x, true
	case amqp10.Symbol:
		return string(x), true
	case []byte:
		return x, true // binary → byte array ('x'), as RabbitMQ 3.x
	case uint64:
		if x > math.MaxInt64 {
			return nil, false
		}
		return int64(x), true
	case amqp10.Timestamp:
		return time.Unix(int64(x)/1000, 0).UTC(), true
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if c, ok := to091(e, depth+1); ok {
				out = append(out, c)
			}
		}
		return out, true
	case amqp10.Array:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if c, ok := to091(e, depth+1); ok {
				out = append(out, c)
			}
		}
		return out, true
	case amqp10.Map:
		out := make(wire.Table, len(x))
		for _, e := range x {
			var k string
			switch key := e.Key.(type) {
			case string:
				k = key
			case amqp10.Symbol:
				k = string(key)
			default:
				continue
			}
			if _, dup := out[k]; dup || len(k) > wire.MaxShortstr {
				continue
			}
			if c, ok := to091(e.Value, depth+1); ok {
				out[k] = c
			}
		}
		return out, true
	}
	return nil, false
}

// ValueTo091 converts an AMQP 1.0 value to a field-table value as
// mc_amqpl:to_091 does (the arguments of a management request); ok is
// false for a value it has no clause for.
func ValueTo091(v any) (any, bool) { return to091(v, 0) }

// AppendValueFrom091 appends the AMQP 1.0 value mc_amqpl:from_091 makes
// of a field-table value (the arguments of a management response); ok
// is false for one it cannot convert (a decimal).
func AppendValueFrom091(dst []byte, v any) ([]byte, bool) { return appendFrom091(dst, v, 0) }
