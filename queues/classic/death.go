package classic

import (
	"fmt"
	"slices"
	"strings"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Dead-lettered messages: the new record a dead-lettered message becomes
// and its death history, as RabbitMQ 4.x writes it (rabbit_dead_letter:
// publish/5, mc:record_death/3 and is_death_cycle/2, mc_amqpl:
// protocol_state/2 and death_table/7).
//
// The history is the x-death header: an array of tables, newest event
// first, one per (queue, reason). A repeat of a (queue, reason) adds one
// to its count and moves it to the front; its time, exchange and routing
// keys stay those of its first event. Each table has, in this order:
//
//	original-expiration  S  the message's expiration property, only if it had one
//	count                l  events of this (queue, reason)
//	reason               S  rejected | expired | maxlen
//	queue                S  the queue the message died in
//	time                 T  the first event (seconds)
//	exchange             S  the exchange the message was published to
//	routing-keys         A  of S: its routing keys (the routing key and CC, not BCC)
//
// x-first-death-{queue,reason,exchange} are set by the first event and
// x-last-death-{queue,reason,exchange} by every one (longstr). The
// headers are sorted by key, as RabbitMQ 4.x delivers them. The
// expiration property is removed.
//
// RabbitMQ keeps the history in the message container's annotations and
// ignores an x-death header a client publishes (it is overwritten by the
// next dead-lettering). A queue record keeps only the AMQP properties, so
// a record the broker wrote when dead-lettering carries recDeadLettered:
// only then is its x-death header read back as history.
//
// The dead-lettered message goes to the dead-letter exchange with the
// queue's x-dead-letter-routing-key, or else the message's routing keys
// (its routing key and CC; RabbitMQ's also has the BCC keys, which Warren
// strips before the message is stored, so they are not there to reuse);
// it is delivered with that exchange and the first of those keys. When
// the keys were the dead-letter routing key the new record carries
// recKeysOnly: its routing keys are its routing key alone, not its CC
// header (which it keeps), as RabbitMQ's routing-keys annotation is then
// the dead-letter routing key alone.

// deathReason is why a message was dead-lettered.
type deathReason uint8

const (
	reasonRejected      deathReason = iota + 1 // basic.reject or basic.nack with requeue=false
	reasonExpired                              // message TTL
	reasonMaxLen                               // x-max-length(-bytes) with drop-head or reject-publish-dlx
	reasonDeliveryLimit                        // quorum queue: returned past the delivery limit
)

func (r deathReason) String() string {
	switch r {
	case reasonRejected:
		return "rejected"
	case reasonExpired:
		return "expired"
	case reasonMaxLen:
		return "maxlen"
	case reasonDeliveryLimit:
		return "delivery_limit"
	}
	return "unknown"
}

// death is one x-death entry.
type death struct {
	queue, reason string
	count         int64
	time          int64 // seconds
	exchange      string
	keys          []string
	origExp       string
	hasOrigExp    bool
}

// deadLetter is a message ready to be republished to a dead-letter
// exchange.
type deadLetter struct {
	rec        []byte     // the new record, a segment simple entry
	route      DeadLetter // what routing reads of it
	deaths     []death    // the new history, newest first
	persistent bool
}

// death header keys.
const (
	hdrXDeath         = "x-death"
	hdrFirstQueue     = "x-first-death-queue"
	hdrFirstReason    = "x-first-death-reason"
	hdrFirstExchange  = "x-first-death-exchange"
	hdrLastQueue      = "x-last-death-queue"
	hdrLastReason     = "x-last-death-reason"
	hdrLastExchange   = "x-last-death-exchange"
	hdrCC             = "CC"
	maxDeathEntries   = 1 << 16 // bound on a history read back (one per queue and reason)
	maxDeathKeysTotal = 1 << 20
)

// buildDeadLetter makes the dead-lettered copy of rec, which died in
// queue for reason at nowMs, for the exchange dlx and, when hasDLRK, the
// routing key dlrk.
func buildDeadLetter(rec record, queue string, reason deathReason, dlx, dlrk string, hasDLRK bool, nowMs int64) (*deadLetter, error) {
	pv, err := amqptab.ScanProps(rec.props)
	if err != nil {
		return nil, err
	}
	hdrs := pv.Value(rec.props, amqptab.FlagHeaders)

	// The message's routing keys: its routing key and, unless they were
	// set by a dead-letter routing key, its CC header.
	msgKeys := []string{string(rec.routingKey)}
	var deaths []death
	if hdrs != nil {
		err := amqptab.ScanTable(hdrs, func(key []byte, tag byte, v []byte) error {
			switch string(key) {
			case hdrCC:
				if !rec.keysOnly && tag == 'A' {
					return amqptab.ScanArray(v, func(tag byte, v []byte) error {
						if s, ok := amqptab.LongStr(tag, v); ok {
							msgKeys = append(msgKeys, s)
						}
						return nil
					})
				}
			case hdrXDeath:
				if rec.deadLettered && tag == 'A' && deaths == nil {
					deaths = readDeaths(v)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}

	// Record the death (mc:record_death).
	first := len(deaths) == 0
	r := reason.String()
	i := slices.IndexFunc(deaths, func(d death) bool { return d.queue == queue && d.reason == r })
	if i >= 0 {
		d := deaths[i]
		d.count++
		deaths = slices.Insert(slices.Delete(deaths, i, i+1), 0, d)
	} else {
		d := death{queue: queue, reason: r, count: 1, time: nowMs / 1000, exchange: string(rec.exchange), keys: msgKeys}
		if exp := pv.Value(rec.props, amqptab.FlagExpiration); exp != nil {
			d.origExp, d.hasOrigExp = string(exp), true
		}
		deaths = slices.Insert(deaths, 0, d)
	}

	// The new headers: the old ones with the death headers replaced,
	// sorted by key.
	type entry struct {
		key string
		val []byte // tag and value
	}
	var es []entry
	replaced := map[string]bool{hdrXDeath: true, hdrLastQueue: true, hdrLastReason: true, hdrLastExchange: true}
	if first {
		replaced[hdrFirstQueue], replaced[hdrFirstReason], replaced[hdrFirstExchange] = true, true, true
	}
	if hdrs != nil {
		_ = amqptab.ScanTable(hdrs, func(key []byte, tag byte, v []byte) error {
			if !replaced[string(key)] {
				es = append(es, entry{string(key), amqptab.AppendRaw(nil, tag, v)})
			}
			return nil
		})
	}
	str := func(s string) []byte { return amqptab.AppendLongStr(nil, s) }
	es = append(es,
		entry{hdrXDeath, appendDeaths(nil, deaths)},
		entry{hdrLastQueue, str(queue)},
		entry{hdrLastReason, str(r)},
		entry{hdrLastExchange, str(string(rec.exchange))},
	)
	if first {
		es = append(es,
			entry{hdrFirstQueue, str(queue)},
			entry{hdrFirstReason, str(r)},
			entry{hdrFirstExchange, str(string(rec.exchange))},
		)
	}
	slices.SortStableFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	es = slices.CompactFunc(es, func(a, b entry) bool { return a.key == b.key })
	table, start := amqptab.Begin(nil)
	for _, e := range es {
		table = amqptab.AppendKey(table, e.key)
		table = append(table, e.val...)
	}
	table = amqptab.End(table, start)
	props := amqptab.AppendProps(nil, rec.props, &pv, amqptab.FlagExpiration, table)

	dl := &deadLetter{deaths: deaths, persistent: rec.persistent}
	dl.route.Keys = msgKeys
	if hasDLRK {
		dl.route.Keys = []string{dlrk}
	}
	var flags byte = recDeadLettered
	if rec.persistent {
		flags |= recPersistent
	}
	if hasDLRK || rec.keysOnly {
		flags |= recKeysOnly
	}
	dl.rec = encodeRecord(nil, flags, dlx, dl.route.Keys[0], props, rec.props10, rec.body)
	if dl.route.Headers, _, err = amqptab.ReadTable(table); err != nil {
		return nil, err
	}
	if dl.route.PropsView, err = amqptab.ScanProps(props); err != nil {
		return nil, err
	}
	dl.route.Props = props
	return dl, nil
}

// readDeaths reads an x-death array the broker wrote. Entries it cannot
// read are skipped.
func readDeaths(arr []byte) []death {
	var out []death
	nkeys := 0
	_ = amqptab.ScanArray(arr, func(tag byte, v []byte) error {
		if tag != 'F' || len(out) >= maxDeathEntries {
			return nil
		}
		var d death
		err := amqptab.ScanTable(v, func(key []byte, tag byte, v []byte) error {
			switch string(key) {
			case "queue":
				d.queue, _ = amqptab.LongStr(tag, v)
			case "reason":
				d.reason, _ = amqptab.LongStr(tag, v)
			case "exchange":
				d.exchange, _ = amqptab.LongStr(tag, v)
			case "original-expiration":
				d.origExp, d.hasOrigExp = amqptab.LongStr(tag, v)
			case "count":
				d.count, _ = amqptab.Int(tag, v)
			case "time":
				d.time, _ = amqptab.Int(tag, v)
			case "routing-keys":
				if tag != 'A' {
					return nil
				}
				return amqptab.ScanArray(v, func(tag byte, v []byte) error {
					if s, ok := amqptab.LongStr(tag, v); ok && nkeys < maxDeathKeysTotal {
						d.keys = append(d.keys, s)
						nkeys++
					}
					return nil
				})
			}
			return nil
		})
		if err == nil && d.queue != "" && d.reason != "" {
			out = append(out, d)
		}
		return nil
	})
	return out
}

// appendDeaths appends the x-death array (tag and value).
func appendDeaths(dst []byte, deaths []death) []byte {
	dst = append(dst, 'A')
	dst, arr := amqptab.Begin(dst)
	for _, d := range deaths {
		dst = append(dst, 'F')
		var t int
		dst, t = amqptab.Begin(dst)
		if d.hasOrigExp {
			dst = amqptab.AppendLongStr(amqptab.AppendKey(dst, "original-expiration"), d.origExp)
		}
		dst = amqptab.AppendLong(amqptab.AppendKey(dst, "count"), d.count)
		dst = amqptab.AppendLongStr(amqptab.AppendKey(dst, "reason"), d.reason)
		dst = amqptab.AppendLongStr(amqptab.AppendKey(dst, "queue"), d.queue)
		dst = amqptab.AppendTimestamp(amqptab.AppendKey(dst, "time"), d.time)
		dst = amqptab.AppendLongStr(amqptab.AppendKey(dst, "exchange"), d.exchange)
		dst = append(amqptab.AppendKey(dst, "routing-keys"), 'A')
		var ks int
		dst, ks = amqptab.Begin(dst)
		for _, k := range d.keys {
			dst = amqptab.AppendLongStr(dst, k)
		}
		dst = amqptab.End(dst, ks)
		dst = amqptab.End(dst, t)
	}
	return amqptab.End(dst, arr)
}

// isDeathCycle reports whether dead-lettering a message with history
// deaths (newest first, this death included) to queue target would loop
// without a client's rejection in between (mc:is_death_cycle/2, v2): the
// target is in the history and neither its newest entry nor any newer one
// has reason rejected.
func isDeathCycle(target string, deaths []death) bool {
	for _, d := range deaths {
		if d.reason == reasonRejected.String() {
			return false
		}
		if d.queue == target {
			return true
		}
	}
	return false
}

// parseMeta reads what the queue needs of a record at enqueue: its body
// size, its priority (clamped to maxPrio) and its expiration.
func parseMeta(rec record, maxPrio int) (pubMeta, error) {
	if rec.ref {
		m := rec.refMeta
		m.prio = uint8(min(int(m.prio), maxPrio))
		return m, nil
	}
	m := pubMeta{size: uint32(len(rec.body)), msgTTL: -1}
	if len(rec.props) < 2 {
		return m, fmt.Errorf("properties of %d bytes: %w", len(rec.props), errBadRecord)
	}
	flags := uint16(rec.props[0])<<8 | uint16(rec.props[1])
	if flags&amqptab.FlagExpiration == 0 && (maxPrio == 0 || flags&amqptab.FlagPriority == 0) {
		return m, nil // the common case: no scan
	}
	pv, err := amqptab.ScanProps(rec.props)
	if err != nil {
		return m, err
	}
	if v := pv.Value(rec.props, amqptab.FlagExpiration); v != nil {
		if ttl, ok := amqptab.ParseExpiration(v); ok {
			m.msgTTL = ttl
		}
	}
	if maxPrio > 0 {
		if p, ok := pv.Priority(rec.props); ok {
			m.prio = uint8(min(int(p), maxPrio))
		}
	}
	return m, nil
}
