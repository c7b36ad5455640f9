package mgmt

import (
	"sync"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/classic"
)

// The sampler reads every queue's and stream's counters every interval
// (RabbitMQ's collect_statistics_interval, 5 s) and keeps the last two
// readings, so an answer can give rates without the publish and deliver
// paths doing anything but counting. Counts in answers are read fresh;
// rates are those of the last interval. Per virtual host it also keeps a
// bounded history of the totals (history.go) for the overview's
// msg_rates_age and lengths_age samples.
type sampler struct {
	s     *Server
	every time.Duration
	now   func() time.Time // time.Now; tests set their own with setClock

	mu      sync.Mutex
	samples map[sampleKey]*sample
	hist    map[string]*vhostHistory // by vhost
	ticked  bool                     // a tick has run: objects new since are new, not recovered

	run struct {
		sync.Mutex
		started, stopped bool
	}
	stopc chan struct{}
	done  chan struct{}
}

type sampleKey struct {
	vhost, name string
	stream      bool
}

// reading is one sample of an object's counters.
type reading struct {
	at                                              time.Time
	messages, ready, unacked                        float64
	publish, deliver, get, redeliver, ack, deliver_ float64 // deliver_ = deliver+get
}

type sample struct {
	prev, cur reading
	full      bool // prev is set
}

func newSampler(s *Server, every time.Duration) *sampler {
	return &sampler{s: s, every: every, now: time.Now, samples: map[sampleKey]*sample{}, hist: map[string]*vhostHistory{}, stopc: make(chan struct{}), done: make(chan struct{})}
}

func (sm *sampler) start() {
	sm.run.Lock()
	defer sm.run.Unlock()
	if sm.run.started || sm.run.stopped || sm.every < 0 {
		return
	}
	sm.run.started = true
	go func() {
		defer close(sm.done)
		t := time.NewTicker(sm.every)
		defer t.Stop()
		sm.tick()
		for {
			select {
			case <-t.C:
				sm.tick()
			case <-sm.stopc:
				return
			}
		}
	}()
}

func (sm *sampler) stop() {
	sm.run.Lock()
	if sm.run.stopped {
		sm.run.Unlock()
		return
	}
	sm.run.stopped = true
	close(sm.stopc)
	started := sm.run.started
	sm.run.Unlock()
	if started {
		<-sm.done
	}
}

func queueReading(st classic.Stats, at time.Time) reading {
	return reading{
		at: at, messages: float64(st.Ready + st.Unacked), ready: float64(st.Ready), unacked: float64(st.Unacked),
		publish: float64(st.Published), deliver: float64(st.Delivered), get: float64(st.Got),
		redeliver: float64(st.Redelivered), ack: float64(st.Acked), deliver_: float64(st.Delivered + st.Got),
	}
}

func streamReading(st osiris.Stats, at time.Time) reading {
	n := float64(st.NextOffset - st.FirstOffset)
	return reading{at: at, messages: n, ready: n, publish: float64(st.NextOffset)}
}

// tick takes one reading of everything.
func (sm *sampler) tick() {
	b := sm.s.b
	vhosts, err := b.VHosts()
	if err != nil {
		return
	}
	sm.mu.Lock()
	now := sm.now()
	sm.mu.Unlock()
	seen := map[sampleKey]bool{}
	seenVHosts := make(map[string]bool, len(vhosts))
	for _, v := range vhosts {
		seenVHosts[v.Name] = true
		var sum reading // gauges summed, counters as increments since the last tick
		for _, q := range b.Queues(v.Name) {
			k := sampleKey{v.Name, q.Def().Name, false}
			seen[k] = true
			sum.addTotal(sm.record(k, queueReading(q.Stats(), now)))
		}
		streams, _ := b.Streams(v.Name)
		for _, d := range streams {
			st, ok := b.LookupStream(d.VHost, d.Name)
			if !ok {
				continue
			}
			k := sampleKey{d.VHost, d.Name, true}
			seen[k] = true
			sum.addTotal(sm.record(k, streamReading(st.Stats(), now)))
		}
		sm.mu.Lock()
		sm.historyOf(v.Name).push(now, sum)
		sm.mu.Unlock()
	}
	sm.mu.Lock()
	for k := range sm.samples {
		if !seen[k] {
			delete(sm.samples, k)
		}
	}
	for v := range sm.hist {
		if !seenVHosts[v] {
			delete(sm.hist, v)
		}
	}
	sm.ticked = true
	sm.mu.Unlock()
}

// setClock replaces the sampler's clock (tests).
func (sm *sampler) setClock(now func() time.Time) {
	sm.mu.Lock()
	sm.now = now
	sm.mu.Unlock()
}

// clock returns the sampler's time now.
func (sm *sampler) clock() time.Time {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.now()
}

// record keeps r as k's latest reading and returns it with its counters
// replaced by their increments since k's previous reading: the totals'
// history adds these up, so a deleted queue does not take its counts
// out of the totals (as RabbitMQ's vhost message stats). A queue first
// seen after the first tick counts from zero; one present at the first
// tick (recovered at start) counts from there.
func (sm *sampler) record(k sampleKey, r reading) reading {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	inc := r
	s := sm.samples[k]
	if s == nil {
		sm.samples[k] = &sample{cur: r}
		if !sm.ticked {
			inc.setCounters(reading{})
		}
		return inc
	}
	p := s.cur
	d := func(prev, cur float64) float64 {
		if cur < prev { // the counters restarted (a queue of that name recreated)
			return cur
		}
		return cur - prev
	}
	inc.setCounters(reading{
		publish: d(p.publish, r.publish), deliver: d(p.deliver, r.deliver), get: d(p.get, r.get),
		redeliver: d(p.redeliver, r.redeliver), ack: d(p.ack, r.ack), deliver_: d(p.deliver_, r.deliver_),
	})
	s.prev, s.cur, s.full = s.cur, r, true
	return inc
}

// rates returns the per-second rates of k over the last interval (zeros
// until two readings exist).
func (sm *sampler) rates(k sampleKey) reading {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	s := sm.samples[k]
	if s == nil || !s.full {
		return reading{}
	}
	dt := s.cur.at.Sub(s.prev.at).Seconds()
	if dt <= 0 {
		return reading{}
	}
	rate := func(a, b float64) float64 { return (b - a) / dt }
	return reading{
		messages: rate(s.prev.messages, s.cur.messages), ready: rate(s.prev.ready, s.cur.ready),
		unacked: rate(s.prev.unacked, s.cur.unacked), publish: rate(s.prev.publish, s.cur.publish),
		deliver: rate(s.prev.deliver, s.cur.deliver), get: rate(s.prev.get, s.cur.get),
		redeliver: rate(s.prev.redeliver, s.cur.redeliver), ack: rate(s.prev.ack, s.cur.ack),
		deliver_: rate(s.prev.deliver_, s.cur.deliver_),
	}
}

// totals are counts and rates summed over objects.
type totals struct {
	count, rate reading
	queues      int
	consumers   int
	streams     bool // only streams: no deliver/ack counters
}

func (t *totals) add(count, rate reading) {
	c, r := &t.count, &t.rate
	c.messages += count.messages
	c.ready += count.ready
	c.unacked += count.unacked
	c.publish += count.publish
	c.deliver += count.deliver
	c.get += count.get
	c.redeliver += count.redeliver
	c.ack += count.ack
	c.deliver_ += count.deliver_
	r.messages += rate.messages
	r.ready += rate.ready
	r.unacked += rate.unacked
	r.publish += rate.publish
	r.deliver += rate.deliver
	r.get += rate.get
	r.redeliver += rate.redeliver
	r.ack += rate.ack
	r.deliver_ += rate.deliver_
}

func details(rate float64) obj { return obj{"rate": round1(rate)} }

func round1(f float64) float64 {
	if f < 0 && f > -0.05 {
		return 0
	}
	return float64(int64(f*10+copysign(0.5, f))) / 10
}

func copysign(x, sign float64) float64 {
	if sign < 0 {
		return -x
	}
	return x
}

// put writes the queue-total fields RabbitMQ's objects carry.
func (t *totals) put(o obj) {
	o["messages"] = int64(t.count.messages)
	o["messages_details"] = details(t.rate.messages)
	o["messages_ready"] = int64(t.count.ready)
	o["messages_ready_details"] = details(t.rate.ready)
	o["messages_unacknowledged"] = int64(t.count.unacked)
	o["messages_unacknowledged_details"] = details(t.rate.unacked)
	o["message_stats"] = t.messageStats()
}

func (t *totals) messageStats() obj {
	c, r := t.count, t.rate
	ms := obj{
		"publish": int64(c.publish), "publish_details": details(r.publish),
	}
	if !t.streams {
		ms["deliver"] = int64(c.deliver)
		ms["deliver_details"] = details(r.deliver)
		ms["get"] = int64(c.get)
		ms["get_details"] = details(r.get)
		ms["deliver_get"] = int64(c.deliver_)
		ms["deliver_get_details"] = details(r.deliver_)
		ms["redeliver"] = int64(c.redeliver)
		ms["redeliver_details"] = details(r.redeliver)
		ms["ack"] = int64(c.ack)
		ms["ack_details"] = details(r.ack)
	}
	return ms
}

// vhostTotals sums the queues and streams of vhost ("" for all).
func (sm *sampler) vhostTotals(vhost string) *totals {
	b := sm.s.b
	t := &totals{}
	var vhosts []string
	if vhost != "" {
		vhosts = []string{vhost}
	} else if vs, err := b.VHosts(); err == nil {
		for _, v := range vs {
			vhosts = append(vhosts, v.Name)
		}
	}
	now := time.Now()
	for _, v := range vhosts {
		for _, q := range b.Queues(v) {
			st := q.Stats()
			t.add(queueReading(st, now), sm.rates(sampleKey{v, q.Def().Name, false}))
			t.queues++
			t.consumers += st.Consumers
		}
		streams, _ := b.Streams(v)
		for _, d := range streams {
			if st, ok := b.LookupStream(d.VHost, d.Name); ok {
				t.add(streamReading(st.Stats(), now), sm.rates(sampleKey{d.VHost, d.Name, true}))
				t.queues++
			}
		}
	}
	return t
}

// queueObjStats returns the counts and rates of one queue.
func (sm *sampler) queueTotals(q *queues.Queue) (*totals, classic.Stats) {
	st := q.Stats()
	t := &totals{}
	t.add(queueReading(st, time.Now()), sm.rates(sampleKey{q.Def().VHost, q.Def().Name, false}))
	return t, st
}

func (sm *sampler) streamTotals(vhost, name string, st osiris.Stats) *totals {
	t := &totals{streams: true}
	t.add(streamReading(st, time.Now()), sm.rates(sampleKey{vhost, name, true}))
	return t
}
