package amqp10

import (
	"fmt"
	"unicode/utf8"
)

// Message is an AMQP 1.0 message (core §3.2): its sections in encoded
// order. A nil pointer or map is an absent section; a decoded section
// that is present but empty is a non-nil empty Map.
type Message struct {
	Header                *Header
	DeliveryAnnotations   Map // keys are Symbols (or uint64)
	MessageAnnotations    Map // keys are Symbols (or uint64)
	Properties            *Properties
	ApplicationProperties Map // keys are strings; values are simple
	Body                  Body
	Footer                Map // keys are Symbols (or uint64)

	// BodyAndFooter is set by Unmarshal: the encoded body sections and
	// footer, aliasing the input. RabbitMQ hands these bytes to AMQP
	// 0-9-1 consumers as the body of a message whose body is not made of
	// data sections.
	BodyAndFooter []byte
}

// BodyKind says which body sections a message has.
type BodyKind uint8

// Body kinds.
const (
	BodyNone     BodyKind = iota // no body section (not a valid message)
	BodyData                     // one or more data sections
	BodySequence                 // one or more amqp-sequence sections
	BodyValue                    // one amqp-value section
)

// Body is a message's application data.
type Body struct {
	Kind     BodyKind
	Data     [][]byte // BodyData: each data section's bytes
	Sequence [][]any  // BodySequence: each amqp-sequence section's list
	Value    any      // BodyValue: the amqp-value section's value
}

// HeaderField names a field of the header section.
type HeaderField uint8

// Header fields, in encoded order.
const (
	HeaderDurable HeaderField = 1 << iota
	HeaderPriority
	HeaderTTL
	HeaderFirstAcquirer
	HeaderDeliveryCount
)

// Header is the header section. Set says which fields are present; an
// absent field is encoded as null (omitted at the end) and reads as its
// zero value here, whatever the spec's default (priority 4).
type Header struct {
	Set           HeaderField
	Durable       bool
	Priority      uint8
	TTL           uint32 // milliseconds
	FirstAcquirer bool
	DeliveryCount uint32
}

// PropField names a field of the properties section.
type PropField uint16

// Properties fields, in encoded order.
const (
	PropMessageID PropField = 1 << iota
	PropUserID
	PropTo
	PropSubject
	PropReplyTo
	PropCorrelationID
	PropContentType
	PropContentEncoding
	PropAbsoluteExpiryTime
	PropCreationTime
	PropGroupID
	PropGroupSequence
	PropReplyToGroupID
)

// Properties is the properties section. Set says which fields are
// present.
type Properties struct {
	Set                PropField
	MessageID          any    // uint64, UUID, []byte or string
	UserID             []byte // aliases the input when decoded
	To                 string
	Subject            string
	ReplyTo            string
	CorrelationID      any    // uint64, UUID, []byte or string
	ContentType        string // a symbol
	ContentEncoding    string // a symbol
	AbsoluteExpiryTime Timestamp
	CreationTime       Timestamp
	GroupID            string
	GroupSequence      uint32
	ReplyToGroupID     string
}

// MarshalBinary encodes m.
func (m *Message) MarshalBinary() ([]byte, error) { return m.AppendTo(nil) }

// AppendTo appends m's sections in the order §3.2 defines: header,
// delivery-annotations, message-annotations, properties,
// application-properties, body, footer. On error dst is returned
// unchanged.
func (m *Message) AppendTo(dst []byte) ([]byte, error) {
	start := len(dst)
	dst, err := m.appendTo(dst)
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func (m *Message) appendTo(dst []byte) ([]byte, error) {
	var err error
	if m.Header != nil {
		dst = m.Header.AppendTo(dst)
	}
	for _, s := range [...]struct {
		code uint64
		m    Map
	}{{DescDeliveryAnnotations, m.DeliveryAnnotations}, {DescMessageAnnotations, m.MessageAnnotations}} {
		if s.m != nil {
			if dst, err = AppendValue(AppendDescriptor(dst, s.code), s.m); err != nil {
				return dst, err
			}
		}
	}
	if m.Properties != nil {
		if dst, err = m.Properties.AppendTo(dst); err != nil {
			return dst, err
		}
	}
	if m.ApplicationProperties != nil {
		if dst, err = AppendValue(AppendDescriptor(dst, DescApplicationProperties), m.ApplicationProperties); err != nil {
			return dst, err
		}
	}
	switch m.Body.Kind {
	case BodyData:
		for _, d := range m.Body.Data {
			dst = AppendBinary(AppendDescriptor(dst, DescData), d)
		}
	case BodySequence:
		for _, s := range m.Body.Sequence {
			if s == nil {
				s = []any{}
			}
			if dst, err = AppendValue(AppendDescriptor(dst, DescAMQPSequence), s); err != nil {
				return dst, err
			}
		}
	case BodyValue:
		if dst, err = AppendValue(AppendDescriptor(dst, DescAMQPValue), m.Body.Value); err != nil {
			return dst, err
		}
	}
	if m.Footer != nil {
		if dst, err = AppendValue(AppendDescriptor(dst, DescFooter), m.Footer); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// AppendTo appends the header section: its fields up to the last one
// set, absent ones before it as null.
func (h *Header) AppendTo(dst []byte) []byte {
	dst = AppendDescriptor(dst, DescHeader)
	dst, c := BeginList(dst)
	n := 0
	for i := 0; i < 5; i++ {
		f := HeaderField(1) << i
		if h.Set < f {
			break
		}
		n++
		if h.Set&f == 0 {
			dst = AppendNull(dst)
			continue
		}
		switch f {
		case HeaderDurable:
			dst = AppendBool(dst, h.Durable)
		case HeaderPriority:
			dst = AppendUbyte(dst, h.Priority)
		case HeaderTTL:
			dst = AppendUint(dst, h.TTL)
		case HeaderFirstAcquirer:
			dst = AppendBool(dst, h.FirstAcquirer)
		case HeaderDeliveryCount:
			dst = AppendUint(dst, h.DeliveryCount)
		}
	}
	return c.End(dst, n)
}

// AppendTo appends the properties section: its fields up to the last
// one set, absent ones before it as null. A message-id or correlation-id
// of another type than uint64, UUID, []byte or string, or a string field
// that is not UTF-8, is an error wrapping ErrUnsupported.
func (p *Properties) AppendTo(dst []byte) ([]byte, error) {
	for _, s := range [...]string{p.To, p.Subject, p.ReplyTo, p.GroupID, p.ReplyToGroupID} {
		if !utf8.ValidString(s) {
			return dst, fmt.Errorf("amqp10: properties string is not UTF-8: %w", ErrUnsupported)
		}
	}
	dst = AppendDescriptor(dst, DescProperties)
	dst, c := BeginList(dst)
	n := 0
	for i := 0; i < 13; i++ {
		f := PropField(1) << i
		if p.Set < f {
			break
		}
		n++
		if p.Set&f == 0 {
			dst = AppendNull(dst)
			continue
		}
		switch f {
		case PropMessageID, PropCorrelationID:
			id := p.MessageID
			if f == PropCorrelationID {
				id = p.CorrelationID
			}
			switch id.(type) {
			case uint64, UUID, []byte, string:
			default:
				return dst, fmt.Errorf("amqp10: message id of type %T: %w", id, ErrUnsupported)
			}
			var err error
			if dst, err = AppendValue(dst, id); err != nil {
				return dst, err
			}
		case PropUserID:
			dst = AppendBinary(dst, p.UserID)
		case PropTo:
			dst = AppendString(dst, p.To)
		case PropSubject:
			dst = AppendString(dst, p.Subject)
		case PropReplyTo:
			dst = AppendString(dst, p.ReplyTo)
		case PropContentType:
			dst = AppendSymbol(dst, p.ContentType)
		case PropContentEncoding:
			dst = AppendSymbol(dst, p.ContentEncoding)
		case PropAbsoluteExpiryTime:
			dst = AppendTimestamp(dst, int64(p.AbsoluteExpiryTime))
		case PropCreationTime:
			dst = AppendTimestamp(dst, int64(p.CreationTime))
		case PropGroupID:
			dst = AppendString(dst, p.GroupID)
		case PropGroupSequence:
			dst = AppendUint(dst, p.GroupSequence)
		case PropReplyToGroupID:
			dst = AppendString(dst, p.ReplyToGroupID)
		}
	}
	return c.End(dst, n), nil
}

// UnmarshalBinary decodes a message, replacing m. Binary values (data
// sections, user-id, binary ids and map values) alias b. Sections may
// come in any order, each at most once, except body sections of one kind,
// which may repeat (data, amqp-sequence); a message without a body
// section is accepted (Body.Kind BodyNone).
func (m *Message) UnmarshalBinary(b []byte) error {
	*m = Message{}
	var budget int
	d := newDecoder(b, &budget)
	var seen uint16 // bit code-DescHeader: section seen
	bodyStart := -1
	for d.left() > 0 && d.err == nil {
		at := d.off
		if d.u8() != codeDescribed {
			d.off = at
			d.failf("section is not a described value")
			break
		}
		code, ok := sectionCode(d.value(2))
		if d.err != nil {
			break
		}
		if !ok {
			d.off = at
			d.failf("unknown section descriptor")
			break
		}
		bit := uint16(1) << (code - DescHeader)
		repeatable := code == DescData || code == DescAMQPSequence
		if seen&bit != 0 && !repeatable {
			d.off = at
			d.failf("repeated section 0x%02x", code)
			break
		}
		seen |= bit
		if code >= DescData && code <= DescAMQPValue && bodyStart < 0 {
			bodyStart = at
		}
		v := d.value(2)
		if d.err != nil {
			break
		}
		m.section(&d, code, v, at)
	}
	if d.err != nil {
		*m = Message{}
		return d.err
	}
	if bodyStart >= 0 {
		m.BodyAndFooter = b[bodyStart:]
	}
	return nil
}

// sectionCode maps a section descriptor to its code.
func sectionCode(desc any) (uint64, bool) {
	switch d := desc.(type) {
	case uint64:
		return d, d >= DescHeader && d <= DescFooter
	case Symbol:
		c, ok := sectionSymbols[string(d)]
		return c, ok
	}
	return 0, false
}

// section stores one decoded section.
func (m *Message) section(d *decoder, code uint64, v any, at int) {
	fail := func(what string) {
		d.off = at
		d.failf("section 0x%02x: %s", code, what)
	}
	asMap := func() Map {
		switch x := v.(type) {
		case Map:
			if x == nil {
				return Map{}
			}
			return x
		case nil:
			return Map{}
		}
		fail(fmt.Sprintf("a %T, not a map", v))
		return nil
	}
	body := func(k BodyKind) bool {
		if m.Body.Kind != BodyNone && (m.Body.Kind != k || k == BodyValue) {
			fail("mixed or repeated body sections")
			return false
		}
		m.Body.Kind = k
		return true
	}
	switch code {
	case DescHeader:
		h, err := headerOf(v)
		if err != "" {
			fail(err)
			return
		}
		m.Header = h
	case DescDeliveryAnnotations:
		m.DeliveryAnnotations = asMap()
	case DescMessageAnnotations:
		m.MessageAnnotations = asMap()
	case DescProperties:
		p, err := propertiesOf(v)
		if err != "" {
			fail(err)
			return
		}
		m.Properties = p
	case DescApplicationProperties:
		m.ApplicationProperties = asMap()
	case DescData:
		data, ok := v.([]byte)
		if !ok {
			fail(fmt.Sprintf("a %T, not binary", v))
			return
		}
		if body(BodyData) {
			m.Body.Data = append(m.Body.Data, data)
		}
	case DescAMQPSequence:
		seq, ok := v.([]any)
		if !ok {
			fail(fmt.Sprintf("a %T, not a list", v))
			return
		}
		if body(BodySequence) {
			m.Body.Sequence = append(m.Body.Sequence, seq)
		}
	case DescAMQPValue:
		if body(BodyValue) {
			m.Body.Value = v
		}
	case DescFooter:
		m.Footer = asMap()
	}
}

// fields returns a composite's field list: a list, or null for none.
func fields(v any) ([]any, string) {
	switch x := v.(type) {
	case []any:
		return x, ""
	case nil:
		return nil, ""
	}
	return nil, fmt.Sprintf("a %T, not a list", v)
}

func headerOf(v any) (*Header, string) {
	fs, err := fields(v)
	if err != "" {
		return nil, err
	}
	h := &Header{}
	for i, f := range fs {
		if f == nil || i >= 5 {
			continue // absent, or a field of a later version
		}
		bit := HeaderField(1) << i
		ok := true
		switch bit {
		case HeaderDurable:
			h.Durable, ok = f.(bool)
		case HeaderPriority:
			h.Priority, ok = f.(uint8)
		case HeaderTTL:
			h.TTL, ok = f.(uint32)
		case HeaderFirstAcquirer:
			h.FirstAcquirer, ok = f.(bool)
		case HeaderDeliveryCount:
			h.DeliveryCount, ok = f.(uint32)
		}
		if !ok {
			return nil, fmt.Sprintf("header field %d is a %T", i, f)
		}
		h.Set |= bit
	}
	return h, ""
}

func propertiesOf(v any) (*Properties, string) {
	fs, err := fields(v)
	if err != "" {
		return nil, err
	}
	p := &Properties{}
	str := func(f any) (string, bool) {
		switch s := f.(type) {
		case string:
			return s, true
		case Symbol:
			return string(s), utf8.ValidString(string(s))
		}
		return "", false
	}
	for i, f := range fs {
		if f == nil || i >= 13 {
			continue
		}
		bit := PropField(1) << i
		ok := true
		switch bit {
		case PropMessageID, PropCorrelationID:
			switch f.(type) {
			case uint64, UUID, []byte, string:
			default:
				ok = false
			}
			if bit == PropMessageID {
				p.MessageID = f
			} else {
				p.CorrelationID = f
			}
		case PropUserID:
			p.UserID, ok = f.([]byte)
		case PropTo:
			p.To, ok = str(f)
		case PropSubject:
			p.Subject, ok = str(f)
		case PropReplyTo:
			p.ReplyTo, ok = str(f)
		case PropContentType:
			p.ContentType, ok = str(f)
		case PropContentEncoding:
			p.ContentEncoding, ok = str(f)
		case PropAbsoluteExpiryTime:
			p.AbsoluteExpiryTime, ok = f.(Timestamp)
		case PropCreationTime:
			p.CreationTime, ok = f.(Timestamp)
		case PropGroupID:
			p.GroupID, ok = str(f)
		case PropGroupSequence:
			p.GroupSequence, ok = f.(uint32)
		case PropReplyToGroupID:
			p.ReplyToGroupID, ok = str(f)
		}
		if !ok {
			return nil, fmt.Sprintf("properties field %d is a %T", i, f)
		}
		p.Set |= bit
	}
	return p, ""
}

// ReadProperties decodes only the properties and application-properties
// sections of the encoded message b (nil when absent), passing over the
// others without decoding them, at a fraction of UnmarshalBinary's cost.
// Binary values alias b. A section it passes over is checked only as far
// as its size. (A filter that reads a few fields does better still with
// RawSections and Items, which decode nothing it does not ask for.)
func ReadProperties(b []byte) (*Properties, Map, error) {
	var budget int
	d := newDecoder(b, &budget)
	var props *Properties
	var app Map
	var seen uint16
	for d.left() > 0 && d.err == nil {
		at := d.off
		if d.u8() != codeDescribed {
			d.off = at
			d.failf("section is not a described value")
			break
		}
		code, ok := sectionCode(d.value(2))
		if d.err != nil {
			break
		}
		if !ok {
			d.off = at
			d.failf("unknown section descriptor")
			break
		}
		if code != DescProperties && code != DescApplicationProperties {
			d.skip(2)
			continue
		}
		bit := uint16(1) << (code - DescHeader)
		if seen&bit != 0 {
			d.off = at
			d.failf("repeated section 0x%02x", code)
			break
		}
		seen |= bit
		v := d.value(2)
		if d.err != nil {
			break
		}
		var m Message
		m.section(&d, code, v, at)
		if code == DescProperties {
			props = m.Properties
		} else {
			app = m.ApplicationProperties
		}
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return props, app, nil
}

// RawSections returns the encoded values of the properties and
// application-properties sections of the encoded message b (nil when
// absent), aliasing b, for Items to walk without decoding what is not
// wanted. Other sections are checked only as far as their size.
func RawSections(b []byte) (props, app []byte, err error) {
	d := decoder{b: b} // skipping charges no budget
	for d.left() > 0 && d.err == nil {
		at := d.off
		if d.u8() != codeDescribed {
			d.off = at
			d.failf("section is not a described value")
			break
		}
		code, ok := d.sectionDescriptor()
		if d.err != nil {
			break
		}
		if !ok {
			d.off = at
			d.failf("unknown section descriptor")
			break
		}
		start := d.off
		d.skip(2)
		switch code {
		case DescProperties:
			props = d.b[start:d.off]
		case DescApplicationProperties:
			app = d.b[start:d.off]
		}
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return props, app, nil
}
