package amqptab

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Basic property flags, in wire order. These constants are part of the
// wire format and must not be changed.
const (
	FlagContentType     uint16 = 0x8000 // content-type shortstr
	FlagContentEncoding uint16 = 0x4000 // content-encoding shortstr
	FlagHeaders         uint16 = 0x2000 // headers table
	FlagDeliveryMode    uint16 = 0x1000 // delivery-mode octet
	FlagPriority        uint16 = 0x0800 // priority octet
	FlagCorrelationID   uint16 = 0x0400 // correlation-id shortstr
	FlagReplyTo         uint16 = 0x0200 // reply-to shortstr
	FlagExpiration      uint16 = 0x0100 // expiration shortstr (decimal ms)
	FlagMessageID       uint16 = 0x0080 // message-id shortstr
	FlagTimestamp       uint16 = 0x0040 // timestamp u64 seconds
	FlagType            uint16 = 0x0020 // type shortstr
	FlagUserID          uint16 = 0x0010 // user-id shortstr
	FlagAppID           uint16 = 0x0008 // app-id shortstr
	FlagClusterID       uint16 = 0x0004 // cluster-id shortstr

	flagsIgnored uint16 = 0x0003 // continuation bit and its neighbour
)

const numProps = 14

// Props is a scan of raw properties: where each present property's value
// is. It refers to the raw bytes it was scanned from by position only.
type Props struct {
	// Flags are the present properties (bits 1-0 cleared).
	Flags uint16
	// pos[i] is the value of property i (flag 0x8000>>i) as raw[lo:hi]:
	// a shortstr's bytes without the length octet, a table with its u32
	// length, one octet, or the 8 timestamp bytes.
	pos [numProps]struct{ lo, hi int32 }
}

func propIndex(flag uint16) int {
	for i := range numProps {
		if flag == 0x8000>>i {
			return i
		}
	}
	return -1
}

// ScanProps scans raw properties without allocating. The headers table's
// framing is checked (its length), not its entries.
func ScanProps(raw []byte) (Props, error) {
	var p Props
	if len(raw) < 2 {
		return p, fmt.Errorf("amqptab: properties of %d bytes lack the flags: %w", len(raw), ErrMalformed)
	}
	p.Flags = binary.BigEndian.Uint16(raw) &^ flagsIgnored
	off := 2
	for i := range numProps {
		bit := uint16(0x8000) >> i
		if p.Flags&bit == 0 {
			continue
		}
		var n int
		switch bit {
		case FlagHeaders:
			if len(raw)-off < 4 {
				return p, fmt.Errorf("amqptab: headers: truncated length: %w", ErrMalformed)
			}
			n = 4 + int(binary.BigEndian.Uint32(raw[off:]))
		case FlagDeliveryMode, FlagPriority:
			n = 1
		case FlagTimestamp:
			n = 8
		default:
			if off >= len(raw) {
				return p, fmt.Errorf("amqptab: property %#04x: truncated length: %w", bit, ErrMalformed)
			}
			n = int(raw[off])
			off++
		}
		if n < 0 || len(raw)-off < n {
			return p, fmt.Errorf("amqptab: property %#04x: truncated value: %w", bit, ErrMalformed)
		}
		p.pos[i].lo, p.pos[i].hi = int32(off), int32(off+n)
		off += n
	}
	if off != len(raw) {
		return p, fmt.Errorf("amqptab: properties: %d trailing bytes: %w", len(raw)-off, ErrMalformed)
	}
	return p, nil
}

// Value returns the raw value of the property flag in raw (the bytes
// ScanProps scanned), or nil when it is absent: a shortstr's bytes, the
// headers table with its u32 length, the octet, the timestamp's 8 bytes.
func (p *Props) Value(raw []byte, flag uint16) []byte {
	if p.Flags&flag == 0 {
		return nil
	}
	i := propIndex(flag)
	if i < 0 {
		return nil
	}
	return raw[p.pos[i].lo:p.pos[i].hi:p.pos[i].hi]
}

// Priority returns the priority property, if present.
func (p *Props) Priority(raw []byte) (uint8, bool) {
	if v := p.Value(raw, FlagPriority); v != nil {
		return v[0], true
	}
	return 0, false
}

// AppendProps appends raw's properties, as p scanned them, without those
// in drop, and with the headers replaced by headers (a u32-length-prefixed
// table; nil keeps raw's headers, if any, unless FlagHeaders is in drop).
func AppendProps(dst, raw []byte, p *Props, drop uint16, headers []byte) []byte {
	flags := p.Flags &^ drop
	if headers != nil {
		flags |= FlagHeaders
	}
	dst = binary.BigEndian.AppendUint16(dst, flags)
	for i := range numProps {
		bit := uint16(0x8000) >> i
		if flags&bit == 0 {
			continue
		}
		if bit == FlagHeaders && headers != nil {
			dst = append(dst, headers...)
			continue
		}
		v := raw[p.pos[i].lo:p.pos[i].hi]
		switch bit {
		case FlagHeaders, FlagDeliveryMode, FlagPriority, FlagTimestamp:
		default:
			dst = append(dst, byte(len(v)))
		}
		dst = append(dst, v...)
	}
	return dst
}

// ParseExpiration reads an expiration property (decimal milliseconds) as
// RabbitMQ accepts it (rabbit_basic:parse_expiration): 0 to ten years.
func ParseExpiration(v []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 || n > 315_360_000_000 {
		return 0, false
	}
	return n, true
}
