package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Basic property flags, in wire order. Flag bits 1-0 (continuation and
// a reserved bit) are ignored when reading and never written. These
// constants are part of the wire format and must not be changed.
const (
	FlagContentType     uint16 = 0x8000 // content-type shortstr
	FlagContentEncoding uint16 = 0x4000 // content-encoding shortstr
	FlagHeaders         uint16 = 0x2000 // headers table
	FlagDeliveryMode    uint16 = 0x1000 // delivery-mode octet (1 transient, 2 persistent)
	FlagPriority        uint16 = 0x0800 // priority octet
	FlagCorrelationID   uint16 = 0x0400 // correlation-id shortstr
	FlagReplyTo         uint16 = 0x0200 // reply-to shortstr
	FlagExpiration      uint16 = 0x0100 // expiration shortstr (decimal milliseconds)
	FlagMessageID       uint16 = 0x0080 // message-id shortstr
	FlagTimestamp       uint16 = 0x0040 // timestamp u64 seconds
	FlagType            uint16 = 0x0020 // type shortstr
	FlagUserID          uint16 = 0x0010 // user-id shortstr
	FlagAppID           uint16 = 0x0008 // app-id shortstr
	FlagClusterID       uint16 = 0x0004 // cluster-id shortstr (reserved)

	// flagsIgnored are the continuation bit and its neighbour, which
	// RabbitMQ ignores.
	flagsIgnored uint16 = 0x0003
)

// ContentHeader is a decoded content header frame payload.
type ContentHeader struct {
	ClassID  uint16 // class of the content method, ClassBasic
	Weight   uint16 // always 0
	BodySize uint64 // total body size
	Props    []byte // raw property flags u16 + values, aliasing the payload
}

// ParseContentHeader decodes a content header frame payload and checks
// that its properties parse (as ScanProperties does). It checks the
// layout only: that ClassID matches the content method, Weight is 0 and
// BodySize is acceptable are the caller's to check. Errors wrap
// ErrMalformed.
func ParseContentHeader(payload []byte) (ContentHeader, error) {
	h, _, err := ScanContentHeader(payload)
	return h, err
}

// ScanContentHeader is ParseContentHeader that also returns the
// properties' PropsView, so the publish path scans them once.
func ScanContentHeader(payload []byte) (ContentHeader, PropsView, error) {
	if len(payload) < 14 {
		return ContentHeader{}, PropsView{}, fmt.Errorf("amqp/wire: content header of %d bytes is shorter than 14: %w", len(payload), ErrMalformed)
	}
	h := ContentHeader{
		ClassID:  binary.BigEndian.Uint16(payload),
		Weight:   binary.BigEndian.Uint16(payload[2:]),
		BodySize: binary.BigEndian.Uint64(payload[4:]),
		Props:    payload[12:],
	}
	v, err := ScanProperties(h.Props)
	if err != nil {
		return ContentHeader{}, PropsView{}, err
	}
	return h, v, nil
}

// Properties are the basic class's content properties. Flags says which
// are present; a field whose flag is clear is zero and not written.
type Properties struct {
	Flags           uint16 // Flag* bits of the present properties
	ContentType     string // MIME type
	ContentEncoding string // MIME encoding
	Headers         Table  // application headers
	DeliveryMode    uint8  // 1 transient, 2 persistent
	Priority        uint8  // 0-9 by the spec; RabbitMQ accepts 0-255
	CorrelationID   string // application correlation id
	ReplyTo         string // address to reply to
	Expiration      string // per-message TTL, decimal milliseconds
	MessageID       string // application message id
	Timestamp       uint64 // seconds since the epoch
	Type            string // message type name
	UserID          string // creating user, checked by the broker
	AppID           string // creating application
	ClusterID       string // reserved, must be empty by the spec
}

// PropsView is a zero-allocation view of raw properties for the publish
// path: the properties the broker acts on, with slices aliasing the raw
// bytes.
type PropsView struct {
	Flags         uint16 // Flag* bits of the present properties (bits 1-0 cleared)
	DeliveryMode  uint8  // 0 if absent
	Priority      uint8  // 0 if absent
	Expiration    []byte // nil if absent
	UserID        []byte // nil if absent
	ReplyTo       []byte // nil if absent
	Headers       []byte // raw u32-length-prefixed table, nil if absent
	HeadersPos    int    // offset of Headers within raw, -1 if absent
	MessageID     []byte // nil if absent
	CorrelationID []byte // nil if absent
	Timestamp     uint64 // seconds; 0 if absent (see Flags)
}

// propValues holds the raw value of each property, in flag order: the
// bytes of a shortstr (without its length), a table with its u32 length,
// one octet, or 8 timestamp bytes. Absent properties are nil.
type propValues [14][]byte

var propNames = [14]string{
	"content-type", "content-encoding", "headers", "delivery-mode",
	"priority", "correlation-id", "reply-to", "expiration", "message-id",
	"timestamp", "type", "user-id", "app-id", "cluster-id",
}

// scanProps walks raw properties into vals and returns the flags (bits
// 1-0 cleared) and the offset of the headers table (-1 if absent). With
// deep set it validates the headers table through every nesting level.
func scanProps(raw []byte, vals *propValues, deep bool) (flags uint16, headersPos int, err error) {
	if len(raw) < 2 {
		return 0, -1, fmt.Errorf("amqp/wire: properties of %d bytes lack the flags: %w", len(raw), ErrMalformed)
	}
	flags = binary.BigEndian.Uint16(raw) &^ flagsIgnored
	headersPos = -1
	off := 2
	for i := range vals {
		bit := uint16(0x8000) >> i
		if flags&bit == 0 {
			continue
		}
		var n int
		switch bit {
		case FlagHeaders:
			if deep {
				var err error
				if n, err = amqptab.CheckTable(raw[off:]); err != nil {
					return 0, -1, fmt.Errorf("amqp/wire: property headers: %w", err)
				}
			} else if n = amqptab.ValueSize('F', raw[off:]); n < 0 {
				return 0, -1, fmt.Errorf("amqp/wire: property headers: truncated table: %w", ErrMalformed)
			}
			headersPos = off
		case FlagDeliveryMode, FlagPriority:
			n = 1
		case FlagTimestamp:
			n = 8
		default: // shortstr
			if off >= len(raw) {
				return 0, -1, fmt.Errorf("amqp/wire: property %s: truncated length: %w", propNames[i], ErrMalformed)
			}
			off++
			n = int(raw[off-1])
		}
		if len(raw)-off < n {
			return 0, -1, fmt.Errorf("amqp/wire: property %s: truncated value: %w", propNames[i], ErrMalformed)
		}
		vals[i] = raw[off : off+n : off+n]
		off += n
	}
	if off != len(raw) {
		return 0, -1, fmt.Errorf("amqp/wire: properties: %d trailing bytes: %w", len(raw)-off, ErrMalformed)
	}
	return flags, headersPos, nil
}

// ScanProperties checks raw properties (flags u16 + values) without
// allocating, the headers table through every nesting level, and returns
// a view of them. Errors wrap ErrMalformed; trailing bytes are an error,
// as in RabbitMQ.
func ScanProperties(raw []byte) (PropsView, error) {
	var vals propValues
	flags, pos, err := scanProps(raw, &vals, true)
	if err != nil {
		return PropsView{}, err
	}
	v := PropsView{
		Flags:         flags,
		Expiration:    vals[7],
		UserID:        vals[11],
		ReplyTo:       vals[6],
		Headers:       vals[2],
		HeadersPos:    pos,
		MessageID:     vals[8],
		CorrelationID: vals[5],
	}
	if ts := vals[9]; ts != nil {
		v.Timestamp = binary.BigEndian.Uint64(ts)
	}
	if d := vals[3]; d != nil {
		v.DeliveryMode = d[0]
	}
	if p := vals[4]; p != nil {
		v.Priority = p[0]
	}
	return v, nil
}

// ParseProperties decodes raw properties (flags u16 + values). Errors
// wrap ErrMalformed; trailing bytes are an error, as in RabbitMQ.
// Shortstr properties are not checked for UTF-8 (RabbitMQ does not).
func ParseProperties(raw []byte) (Properties, error) {
	var vals propValues
	flags, _, err := scanProps(raw, &vals, false)
	if err != nil {
		return Properties{}, err
	}
	p := Properties{
		Flags:           flags,
		ContentType:     string(vals[0]),
		ContentEncoding: string(vals[1]),
		CorrelationID:   string(vals[5]),
		ReplyTo:         string(vals[6]),
		Expiration:      string(vals[7]),
		MessageID:       string(vals[8]),
		Type:            string(vals[10]),
		UserID:          string(vals[11]),
		AppID:           string(vals[12]),
		ClusterID:       string(vals[13]),
	}
	if h := vals[2]; h != nil {
		if p.Headers, _, err = amqptab.ReadTable(h); err != nil {
			return Properties{}, fmt.Errorf("amqp/wire: property headers: %w", err)
		}
	}
	if d := vals[3]; d != nil {
		p.DeliveryMode = d[0]
	}
	if pr := vals[4]; pr != nil {
		p.Priority = pr[0]
	}
	if ts := vals[9]; ts != nil {
		p.Timestamp = binary.BigEndian.Uint64(ts)
	}
	return p, nil
}

// AppendProperties appends the flags (bits 1-0 cleared) and the values of
// the properties whose flag is set, the headers with sorted keys. A
// shortstr property longer than 255 bytes or an unencodable header gives
// an error wrapping ErrFieldType, and dst is returned unchanged.
func AppendProperties(dst []byte, p *Properties) ([]byte, error) {
	start := len(dst)
	flags := p.Flags &^ flagsIgnored
	dst = binary.BigEndian.AppendUint16(dst, flags)
	strs := [14]*string{
		0: &p.ContentType, 1: &p.ContentEncoding, 5: &p.CorrelationID,
		6: &p.ReplyTo, 7: &p.Expiration, 8: &p.MessageID, 10: &p.Type,
		11: &p.UserID, 12: &p.AppID, 13: &p.ClusterID,
	}
	for i := range strs {
		bit := uint16(0x8000) >> i
		if flags&bit == 0 {
			continue
		}
		switch bit {
		case FlagHeaders:
			var err error
			if dst, err = amqptab.AppendTable(dst, p.Headers); err != nil {
				return dst[:start], fmt.Errorf("amqp/wire: property headers: %w", err)
			}
		case FlagDeliveryMode:
			dst = append(dst, p.DeliveryMode)
		case FlagPriority:
			dst = append(dst, p.Priority)
		case FlagTimestamp:
			dst = binary.BigEndian.AppendUint64(dst, p.Timestamp)
		default:
			s := *strs[i]
			if len(s) > MaxShortstr {
				return dst[:start], fmt.Errorf("amqp/wire: property %s: %d bytes exceeds 255: %w", propNames[i], len(s), ErrFieldType)
			}
			dst = append(dst, byte(len(s)))
			dst = append(dst, s...)
		}
	}
	return dst, nil
}
