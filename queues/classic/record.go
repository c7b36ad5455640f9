package classic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Classic queue log records: the codec of the format the package doc
// draws (doc.go).

// These constants are part of the on-disk format and must not be changed.
const (
	recPersistent   = 0x01 // flags: delivery-mode 2
	recDeadLettered = 0x02 // flags: written by dead-lettering; x-death is the broker's
	recKeysOnly     = 0x04 // flags: the routing keys are the routing key alone (not CC)
	recAMQP10       = 0x08 // flags: an AMQP 1.0 properties section follows the props
	recFlagsKnown   = recPersistent | recDeadLettered | recKeysOnly | recAMQP10
	// recRef flags a reference record: the message is the body record at
	// an offset of the vhost's body log (fan-out by reference). Only
	// recPersistent may go with it.
	recRef = 0x10

	recFixedSize = 1 + 1 + 1 + 4 // flags, two shortstr lengths, props length
	// refRecordSize is a reference record's size: flags, body offset
	// u64, body size u32, priority u8, expiration ms i64 (-1: none).
	refRecordSize = 1 + 8 + 4 + 1 + 8
)

// errBadRecord marks a queue log record that does not parse.
var errBadRecord = errors.New("queues: malformed queue record")

// transientFilter is the chunk filter value of transient messages in
// durable queues, expiringFilter that of persistent messages with an
// expiration property. Never modified.
var (
	transientFilter = []byte{'t'}
	expiringFilter  = []byte{'e'}
)

// EncodeRecord appends m's log record (a segment simple entry) to dst.
// One record is shared by every queue the message is routed to. Exchange
// and routing key are shortstrs: longer values are cut at 255 bytes.
func EncodeRecord(dst []byte, m *Message) []byte {
	var flags byte
	if m.Persistent {
		flags |= recPersistent
	}
	return encodeRecord(dst, flags, m.Exchange, m.RoutingKey, m.Props, m.AMQP10Props, m.Body)
}

// encodeRecord appends a record with flags as a segment simple entry.
// props10, when set, is kept after props (flag recAMQP10).
func encodeRecord(dst []byte, flags byte, exchange, routingKey string, props, props10, body []byte) []byte {
	if props10 != nil {
		flags |= recAMQP10
	} else {
		flags &^= recAMQP10
	}
	// One allocation of the exact size, not a growth per field.
	dst = slices.Grow(dst, 4+recFixedSize+min(len(exchange), 255)+min(len(routingKey), 255)+len(props)+4+len(props10)+len(body))
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // entry size, filled in below
	dst = append(dst, flags)
	dst = appendShortStr(dst, exchange)
	dst = appendShortStr(dst, routingKey)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(props)))
	dst = append(dst, props...)
	if props10 != nil {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(props10)))
		dst = append(dst, props10...)
	}
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

func appendShortStr(dst []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// record is a decoded queue record; its slices alias the record bytes.
type record struct {
	persistent   bool
	deadLettered bool // recDeadLettered
	keysOnly     bool // recKeysOnly
	exchange     []byte
	routingKey   []byte
	props        []byte
	props10      []byte // recAMQP10: the AMQP 1.0 properties section as published; nil otherwise
	body         []byte

	// A reference record (recRef) has only persistent and these; the
	// message is the body record at bodyOff.
	ref     bool
	bodyOff uint64
	refMeta pubMeta // its size, priority (not clamped) and expiration
}

// AppendRef appends to dst the reference entry (a segment simple entry)
// that stands for rec, a record entry as EncodeRecord makes it, stored
// at offset bodyOff of the vhost's body log. The reference keeps what a
// queue needs of the message without reading its body (at enqueue and
// at recovery): persistence, body size, priority, expiration.
func AppendRef(dst, rec []byte, bodyOff uint64) ([]byte, error) {
	if err := checkEntry(rec); err != nil {
		return dst, err
	}
	r, err := parseRecord(rec[4:])
	if err != nil {
		return dst, err
	}
	if r.ref {
		return dst, fmt.Errorf("a reference to a reference: %w", errBadRecord)
	}
	m, err := parseMeta(r, 255)
	if err != nil {
		return dst, err
	}
	return appendRefMeta(dst, r.persistent, bodyOff, m), nil
}

// appendRefMeta appends a reference entry.
func appendRefMeta(dst []byte, persistent bool, bodyOff uint64, m pubMeta) []byte {
	flags := byte(recRef)
	if persistent {
		flags |= recPersistent
	}
	dst = binary.BigEndian.AppendUint32(dst, refRecordSize)
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, bodyOff)
	dst = binary.BigEndian.AppendUint32(dst, m.size)
	dst = append(dst, m.prio)
	return binary.BigEndian.AppendUint64(dst, uint64(m.msgTTL))
}

// bodyMark is the first byte of a body log entry: no record's flags have
// its bit.
const bodyMark = 0x80

// AppendBody appends to dst the body log entry of rec, a record entry as
// EncodeRecord makes it, stored for the durable queues whose directory
// ids are ids:
//
//	+--------------+--------------+------------------+--------+
//	| 0x80 u8      | n uvarint    | n ids (uvarint)  | record |
//	+--------------+--------------+------------------+--------+
//
// The ids are the body log's journal of the references: after a crash,
// the broker rebuilds the references a queue lost from them.
func AppendBody(dst, rec []byte, ids []uint64) []byte {
	dst = slices.Grow(dst, 4+1+binary.MaxVarintLen64*(1+len(ids))+len(rec)-4)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, bodyMark)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, id)
	}
	dst = append(dst, rec[4:]...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ParseBody splits a body log entry's data (without its size) into the
// queue ids it names and its record (without a size). ids aliases
// scratch.
func ParseBody(b []byte, scratch []uint64) (ids []uint64, rec []byte, err error) {
	if len(b) == 0 || b[0] != bodyMark {
		return nil, nil, fmt.Errorf("body entry without its mark: %w", errBadRecord)
	}
	p := 1
	n, k := binary.Uvarint(b[p:])
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("body entry id count: %w", errBadRecord)
	}
	p += k
	ids = scratch[:0]
	for range n {
		id, k := binary.Uvarint(b[p:])
		if k <= 0 {
			return nil, nil, fmt.Errorf("body entry id: %w", errBadRecord)
		}
		p += k
		ids = append(ids, id)
	}
	return ids, b[p:], nil
}

// SetRefOffset sets the body offset of ref, an entry AppendRef made.
func SetRefOffset(ref []byte, bodyOff uint64) { binary.BigEndian.PutUint64(ref[4+1:], bodyOff) }

// isRef reports whether b, a record without its entry size, is a
// reference record.
func isRef(b []byte) bool { return len(b) > 0 && b[0]&recRef != 0 }

// parseRef decodes a reference record.
func parseRef(b []byte) (record, error) {
	var r record
	if len(b) != refRecordSize || b[0]&^(recRef|recPersistent) != 0 {
		return r, fmt.Errorf("reference of %d bytes, flags %#x: %w", len(b), b[0], errBadRecord)
	}
	r.ref, r.persistent = true, b[0]&recPersistent != 0
	r.bodyOff = binary.BigEndian.Uint64(b[1:])
	r.refMeta = pubMeta{size: binary.BigEndian.Uint32(b[9:]), prio: b[13], msgTTL: int64(binary.BigEndian.Uint64(b[14:]))}
	if r.refMeta.msgTTL < -1 {
		return r, fmt.Errorf("reference expiration %d: %w", r.refMeta.msgTTL, errBadRecord)
	}
	return r, nil
}

// parseRecord decodes a queue record (without the entry size). A
// reference record gives its reference fields only (see bodyReader).
func parseRecord(b []byte) (record, error) {
	var r record
	if isRef(b) {
		return parseRef(b)
	}
	if len(b) < recFixedSize {
		return r, fmt.Errorf("%d bytes: %w", len(b), errBadRecord)
	}
	if b[0]&^recFlagsKnown != 0 {
		return r, fmt.Errorf("flags %#x: %w", b[0], errBadRecord)
	}
	r.persistent = b[0]&recPersistent != 0
	r.deadLettered = b[0]&recDeadLettered != 0
	r.keysOnly = b[0]&recKeysOnly != 0
	p := 1
	n := int(b[p])
	p++
	if len(b)-p < n+1+4 {
		return r, fmt.Errorf("exchange of %d bytes: %w", n, errBadRecord)
	}
	r.exchange = b[p : p+n]
	p += n
	n = int(b[p])
	p++
	if len(b)-p < n+4 {
		return r, fmt.Errorf("routing key of %d bytes: %w", n, errBadRecord)
	}
	r.routingKey = b[p : p+n]
	p += n
	pl := binary.BigEndian.Uint32(b[p:])
	p += 4
	if uint64(pl) > uint64(len(b)-p) {
		return r, fmt.Errorf("properties of %d bytes: %w", pl, errBadRecord)
	}
	r.props = b[p : p+int(pl)]
	p += int(pl)
	if b[0]&recAMQP10 != 0 {
		if len(b)-p < 4 {
			return r, fmt.Errorf("no AMQP 1.0 properties length: %w", errBadRecord)
		}
		n := binary.BigEndian.Uint32(b[p:])
		p += 4
		if uint64(n) > uint64(len(b)-p) {
			return r, fmt.Errorf("AMQP 1.0 properties of %d bytes: %w", n, errBadRecord)
		}
		r.props10 = b[p : p+int(n) : p+int(n)]
		p += int(n)
	}
	r.body = b[p:]
	return r, nil
}

// checkEntry checks that e is exactly one simple entry holding a record.
func checkEntry(e []byte) error {
	if len(e) < 4+recFixedSize || e[0]&0x80 != 0 {
		return fmt.Errorf("entry of %d bytes: %w", len(e), errBadRecord)
	}
	if n := binary.BigEndian.Uint32(e); uint64(n) != uint64(len(e)-4) {
		return fmt.Errorf("entry size %d, %d bytes: %w", n, len(e)-4, errBadRecord)
	}
	return nil
}
