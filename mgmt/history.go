package mgmt

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// historyLen is how many readings of a virtual host's totals the sampler
// keeps: 5 minutes at the default 5 s interval. Memory is bounded by
// historyLen readings per virtual host.
const historyLen = 60

// maxRangeSamples bounds the samples one range asks for, as RabbitMQ's
// ?MAX_RANGE: age/incr above it is a 400.
const maxRangeSamples = 500

// vhostHistory is a ring of a virtual host's totals: queue lengths as
// read, message counters as running sums of the increments the sampler
// saw (so they only grow).
type vhostHistory struct {
	ring [historyLen]reading
	n    int     // readings in ring
	next int     // where the next reading goes
	sum  reading // the running counters
}

// historyOf returns vhost's history, creating it.
// REQUIRES: sm.mu held.
func (sm *sampler) historyOf(vhost string) *vhostHistory {
	h := sm.hist[vhost]
	if h == nil {
		h = &vhostHistory{}
		sm.hist[vhost] = h
	}
	return h
}

// push appends one reading at: inc's gauges as they are, its counters
// added to the running sums.
func (h *vhostHistory) push(at time.Time, inc reading) {
	h.sum.publish += inc.publish
	h.sum.deliver += inc.deliver
	h.sum.get += inc.get
	h.sum.redeliver += inc.redeliver
	h.sum.ack += inc.ack
	h.sum.deliver_ += inc.deliver_
	r := inc
	r.at = at
	r.setCounters(h.sum)
	h.ring[h.next] = r
	h.next = (h.next + 1) % historyLen
	h.n = min(h.n+1, historyLen)
}

// at returns the latest reading taken at or before t.
func (h *vhostHistory) at(t time.Time) (reading, bool) {
	for i := range h.n {
		r := h.ring[(h.next-1-i+2*historyLen)%historyLen]
		if !r.at.After(t) {
			return r, true
		}
	}
	return reading{}, false
}

// addTotal adds o's gauges and counters to r.
func (r *reading) addTotal(o reading) {
	r.messages += o.messages
	r.ready += o.ready
	r.unacked += o.unacked
	r.publish += o.publish
	r.deliver += o.deliver
	r.get += o.get
	r.redeliver += o.redeliver
	r.ack += o.ack
	r.deliver_ += o.deliver_
}

// setCounters replaces r's message counters with c's.
func (r *reading) setCounters(c reading) {
	r.publish, r.deliver, r.get, r.redeliver, r.ack, r.deliver_ = c.publish, c.deliver, c.get, c.redeliver, c.ack, c.deliver_
}

// sampleRange is one of RabbitMQ's history ranges (msg_rates_age and
// msg_rates_incr, lengths_age and lengths_incr, in seconds): samples at
// last, last-incr, ... down to last-age, last being now rounded down to
// incr.
type sampleRange struct {
	last      time.Time
	age, incr time.Duration
}

// parseRange reads prefix_age and prefix_incr as RabbitMQ does: missing
// or not integers, no range; not positive or more than maxRangeSamples
// samples, a 400.
func parseRange(qs url.Values, prefix string, now time.Time) (*sampleRange, error) {
	age, err1 := strconv.Atoi(qs.Get(prefix + "_age"))
	incr, err2 := strconv.Atoi(qs.Get(prefix + "_incr"))
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	if age <= 0 || incr <= 0 || age/incr > maxRangeSamples {
		return nil, errBadRequest(fmt.Sprintf("Invalid range parameters: age %d, incr %d", age, incr))
	}
	step := time.Duration(incr) * time.Second
	return &sampleRange{last: now.Truncate(step), age: time.Duration(age) * time.Second, incr: step}, nil
}

// rangeSamples returns the summed readings of hs at each point of rg,
// newest first, with their timestamps in milliseconds. Points before
// every history's first reading are left out.
func rangeSamples(hs []*vhostHistory, rg *sampleRange) (ts []int64, rs []reading) {
	for t := rg.last; !t.Before(rg.last.Add(-rg.age)); t = t.Add(-rg.incr) {
		var sum reading
		found := false
		for _, h := range hs {
			if r, ok := h.at(t); ok {
				sum.addTotal(r)
				found = true
			}
		}
		if !found {
			break
		}
		ts = append(ts, t.UnixMilli())
		rs = append(rs, sum)
	}
	return ts, rs
}

// historyOfVHosts copies the histories of vhosts (under the lock, so
// answers read them without it).
func (sm *sampler) historyOfVHosts(vhosts []string) []*vhostHistory {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	out := make([]*vhostHistory, 0, len(vhosts))
	for _, v := range vhosts {
		if h := sm.hist[v]; h != nil {
			c := *h
			out = append(out, &c)
		}
	}
	return out
}

// putSamples adds RabbitMQ's samples, avg_rate and avg to the *_details
// objects of fields in o, reading each field's value from a reading.
func putSamples(o obj, ts []int64, rs []reading, fields map[string]func(reading) float64) {
	if len(ts) == 0 {
		return
	}
	for name, val := range fields {
		d, ok := o[name+"_details"].(obj)
		if !ok {
			continue
		}
		samples := make([]obj, len(ts))
		total := 0.0
		for i := range ts {
			v := val(rs[i])
			total += v
			samples[i] = obj{"sample": int64(v), "timestamp": ts[i]}
		}
		d["samples"] = samples
		if n := len(ts); n > 1 {
			d["avg_rate"] = round1((val(rs[0]) - val(rs[n-1])) * 1000 / float64(ts[0]-ts[n-1]))
			d["avg"] = round1(total / float64(n))
		}
	}
}

var (
	msgRateFields = map[string]func(reading) float64{
		"publish":     func(r reading) float64 { return r.publish },
		"deliver":     func(r reading) float64 { return r.deliver },
		"get":         func(r reading) float64 { return r.get },
		"deliver_get": func(r reading) float64 { return r.deliver_ },
		"redeliver":   func(r reading) float64 { return r.redeliver },
		"ack":         func(r reading) float64 { return r.ack },
	}
	lengthFields = map[string]func(reading) float64{
		"messages":                func(r reading) float64 { return r.messages },
		"messages_ready":          func(r reading) float64 { return r.ready },
		"messages_unacknowledged": func(r reading) float64 { return r.unacked },
	}
)
