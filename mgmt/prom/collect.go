package prom

import (
	"regexp"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warren-mq/warren/queues"
)

type mode uint8

const (
	modeAggregated mode = iota // /metrics: one sample per metric
	modePerObject              // /metrics/per-object
	modeDetailed               // /metrics/detailed
)

// scrape is one endpoint's collector: what to emit and how.
type scrape struct {
	s        *Server
	mode     mode
	families map[string]bool // detailed: the families asked for
	vhosts   map[string]bool // detailed: nil means every vhost
	queueRe  *regexp.Regexp  // detailed: nil means every queue
}

// Describe describes nothing: the metrics depend on what exists at
// scrape time, so the collector is unchecked.
func (sc *scrape) Describe(chan<- *prometheus.Desc) {}

// want reports whether family is emitted: always, but in detailed mode
// only when asked for.
func (sc *scrape) want(family string) bool {
	return sc.mode != modeDetailed || sc.families[family]
}

// perObject reports whether object families get one sample per object.
func (sc *scrape) perObject() bool { return sc.mode != modeAggregated }

// emitter sends const metrics.
type emitter struct {
	ch     chan<- prometheus.Metric
	prefix string
}

func (e *emitter) desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(e.prefix+name, help, labels, nil)
}

// one emits a metric with one sample.
func (e *emitter) one(name, help string, t prometheus.ValueType, v float64) {
	e.ch <- prometheus.MustNewConstMetric(e.desc(name, help), t, v)
}

// labelled emits a metric whose samples rows adds.
func (e *emitter) labelled(name, help string, t prometheus.ValueType, labels []string, rows func(add func(v float64, lv ...string))) {
	d := e.desc(name, help, labels...)
	rows(func(v float64, lv ...string) {
		e.ch <- prometheus.MustNewConstMetric(d, t, v, lv...)
	})
}

// histogram emits a cumulative histogram from per-bucket counts (the
// last count is above every bound).
func (e *emitter) histogram(name, help string, bounds []float64, counts []uint64, sum float64, labels []string, lv ...string) {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += counts[i]
		buckets[b] = cum
	}
	cum += counts[len(bounds)]
	e.ch <- prometheus.MustNewConstHistogram(e.desc(name, help, labels...), cum, sum, buckets, lv...)
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
	untyped = prometheus.UntypedValue
)

// Collect gathers the model's state once and emits every family.
func (sc *scrape) Collect(ch chan<- prometheus.Metric) {
	d := sc.gather()
	core := &emitter{ch: ch, prefix: "rabbitmq_"}
	if sc.mode == modeDetailed {
		core.prefix = "rabbitmq_detailed_"
	}
	sc.node(core, d)
	sc.queueFamilies(core, d)
	sc.connFamilies(core, d)
	if sc.mode == modeDetailed {
		sc.clusterFamilies(&emitter{ch: ch, prefix: "rabbitmq_cluster_"}, d)
	} else {
		sc.totals(core, d)
		sc.global(&emitter{ch: ch, prefix: "rabbitmq_global_"}, d)
		sc.messageSizes(core, d)
		sc.alarms(&emitter{ch: ch, prefix: "rabbitmq_alarms_"})
		sc.warren(&emitter{ch: ch, prefix: "warren_"}, d)
	}
	if sc.mode == modePerObject || sc.queueFamiliesWanted() {
		sc.queueInfo(core, d)
	}
	sc.identity(&emitter{ch: ch, prefix: "rabbitmq_"})
}

// queueFamiliesWanted is RabbitMQ's condition for queue_info in
// detailed mode.
func (sc *scrape) queueFamiliesWanted() bool {
	return sc.mode == modeDetailed && (sc.families["queue_coarse_metrics"] || sc.families["queue_consumer_count"] || sc.families["queue_metrics"])
}

// node emits the node families: churn, coarse and limits, persister.
func (sc *scrape) node(e *emitter, d *data) {
	b := sc.s.cfg.Broker
	if sc.want("connection_churn_metrics") {
		c := b.Churn()
		e.one("connections_opened_total", "Total number of connections opened", counter, float64(c.ConnectionsOpened.Load()))
		e.one("connections_closed_total", "Total number of connections closed or terminated", counter, float64(c.ConnectionsClosed.Load()))
		e.one("channels_opened_total", "Total number of channels opened", counter, float64(c.ChannelsOpened.Load()))
		e.one("channels_closed_total", "Total number of channels closed", counter, float64(c.ChannelsClosed.Load()))
		e.one("queues_declared_total", "Total number of queues declared", counter, float64(c.QueuesDeclared.Load()))
		e.one("queues_created_total", "Total number of queues created", counter, float64(c.QueuesCreated.Load()))
		e.one("queues_deleted_total", "Total number of queues deleted", counter, float64(c.QueuesDeleted.Load()))
	}
	p := readProcess(sc.s.cfg.DataDir)
	if sc.want("node_coarse_metrics") {
		if p.fdsOK {
			e.one("process_open_fds", "Open file descriptors", gauge, float64(p.openFDs))
		}
		if p.rssOK {
			e.one("process_resident_memory_bytes", "Memory used in bytes", gauge, float64(p.rss))
		}
		if p.diskOK {
			e.one("disk_space_available_bytes", "Disk space available in bytes", gauge, float64(p.diskFree))
		}
	}
	if sc.want("node_metrics") {
		if p.maxFDsOK {
			e.one("process_max_fds", "Open file descriptors limit", gauge, float64(p.maxFDs))
		}
		// The limits once a monitor has set them (the daemon's always
		// does).
		if r := b.Alarms().Readings(); r.MemLimit > 0 || r.DiskLimit > 0 {
			e.one("resident_memory_limit_bytes", "Memory high watermark in bytes", gauge, float64(r.MemLimit))
			e.one("disk_space_available_limit_bytes", "Free disk space low watermark in bytes", gauge, float64(r.DiskLimit))
		}
		e.one("erlang_uptime_seconds", "Node uptime", gauge, time.Since(sc.s.cfg.Started).Seconds())
	}
	if sc.want("node_persister_metrics") {
		m := logMetrics
		var syncs uint64
		for i := range m.Syncs {
			syncs += m.Syncs[i].Load()
		}
		e.one("io_write_bytes_total", "Total number of I/O bytes written", counter, float64(m.BytesWritten.Load()))
		e.one("io_write_ops_total", "Total number of I/O write operations", counter, float64(m.ChunksWritten.Load()))
		e.one("io_sync_ops_total", "Total number of I/O sync operations", counter, float64(syncs))
		e.one("io_sync_time_seconds_total", "Total I/O sync time", counter, float64(m.SyncNanos.Load())/1e9)
	}
}

var queueLabels = []string{"vhost", "queue"}

// queueFamilies emits the queue families, summed in aggregated mode.
func (sc *scrape) queueFamilies(e *emitter, d *data) {
	per := sc.perObject()
	// each emits one metric over the queues; pick selects the value
	// (ok false: the queue has none).
	each := func(name, help string, t prometheus.ValueType, pick func(q *qrow) (float64, bool)) {
		if !per {
			var sum float64
			for i := range d.queues {
				if v, ok := pick(&d.queues[i]); ok {
					sum += v
				}
			}
			e.one(name, help, t, sum)
			return
		}
		e.labelled(name, help, t, queueLabels, func(add func(float64, ...string)) {
			for i := range d.queues {
				q := &d.queues[i]
				if v, ok := pick(q); ok {
					add(v, q.vhost, q.name)
				}
			}
		})
	}
	if sc.want("queue_coarse_metrics") {
		each("queue_messages_ready", "Messages ready to be delivered to consumers", gauge, func(q *qrow) (float64, bool) { return float64(q.ready), true })
		each("queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged", gauge, func(q *qrow) (float64, bool) { return float64(q.unacked), true })
		each("queue_messages", "Sum of ready and unacknowledged messages - total queue depth", gauge, func(q *qrow) (float64, bool) { return float64(q.ready + q.unacked), true })
	}
	consumers := func(q *qrow) (float64, bool) { return float64(q.consumers), true }
	if sc.want("queue_metrics") {
		each("queue_consumers", "Consumers on a queue", gauge, consumers)
		each("queue_messages_bytes", "Size in bytes of ready and unacknowledged messages", gauge, func(q *qrow) (float64, bool) { return float64(q.readyBytes + q.unackedBytes), true })
		each("queue_messages_ready_bytes", "Size in bytes of ready messages", gauge, func(q *qrow) (float64, bool) { return float64(q.readyBytes), true })
		each("queue_messages_unacked_bytes", "Size in bytes of all unacknowledged messages", gauge, func(q *qrow) (float64, bool) { return float64(q.unackedBytes), true })
		each("stream_segments", "Total number of stream segment files", counter, func(q *qrow) (float64, bool) { return float64(q.segments), q.stream })
	} else if sc.want("queue_consumer_count") {
		each("queue_consumers", "Consumers on a queue", gauge, consumers)
	}
	if sc.want("queue_delivery_metrics") {
		each("queue_messages_redelivered_total", "Total number of messages redelivered from a queue to consumers", counter, func(q *qrow) (float64, bool) { return float64(q.ctr.Redelivered), !q.stream })
		each("queue_messages_acked_total", "Total number of messages acknowledged by consumers on a queue", counter, func(q *qrow) (float64, bool) { return float64(q.ctr.Acked), !q.stream })
	}
	if sc.want("stream_consumer_metrics") {
		const name, help = "stream_consumer_max_offset_lag", "Highest consumer offset lag"
		if !per {
			var m uint64
			for i := range d.queues {
				m = max(m, d.queues[i].maxLag)
			}
			e.one(name, help, gauge, float64(m))
		} else {
			e.labelled(name, help, gauge, queueLabels, func(add func(float64, ...string)) {
				for i := range d.queues {
					if q := &d.queues[i]; q.hasLag {
						add(float64(q.maxLag), q.vhost, q.name)
					}
				}
			})
		}
	}
}

// connFamilies emits the channel and connection families.
func (sc *scrape) connFamilies(e *emitter, d *data) {
	per := sc.perObject()
	type row struct {
		label string
		v     float64
	}
	emit := func(name, help string, t prometheus.ValueType, rows []row) {
		if !per {
			var sum float64
			for _, r := range rows {
				sum += r.v
			}
			e.one(name, help, t, sum)
			return
		}
		e.labelled(name, help, t, []string{"channel"}, func(add func(float64, ...string)) {
			for _, r := range rows {
				add(r.v, r.label)
			}
		})
	}
	chans := func(pick func(*queues.ChannelInfo) float64) []row {
		var out []row
		for i := range d.conns {
			for j := range d.conns[i].AMQPChannels {
				c := &d.conns[i].AMQPChannels[j]
				out = append(out, row{c.Name, pick(c)})
			}
		}
		return out
	}
	conns := func(pick func(*queues.ConnInfo) float64) []row {
		out := make([]row, len(d.conns))
		for i := range d.conns {
			out[i] = row{d.conns[i].Name, pick(&d.conns[i])}
		}
		return out
	}
	if sc.want("channel_metrics") {
		emit("channel_consumers", "Consumers on a channel", gauge, chans(func(c *queues.ChannelInfo) float64 { return float64(c.ConsumerCount) }))
		emit("channel_messages_unacked", "Delivered but not yet acknowledged messages", gauge, chans(func(c *queues.ChannelInfo) float64 { return float64(c.MessagesUnacknowledged) }))
		emit("channel_messages_unconfirmed", "Published but not yet confirmed messages", gauge, chans(func(c *queues.ChannelInfo) float64 { return float64(c.MessagesUnconfirmed) }))
		emit("consumer_prefetch", "Limit of unacknowledged messages for each consumer", gauge, chans(func(c *queues.ChannelInfo) float64 { return float64(c.PrefetchCount) }))
		emit("channel_prefetch", "Deprecated and will be removed in a future version", gauge, chans(func(c *queues.ChannelInfo) float64 { return float64(c.GlobalPrefetchCount) }))
	}
	if !per {
		sc.channelTotals(e, d)
	}
	if sc.want("connection_coarse_metrics") {
		emit("connection_incoming_bytes_total", "Total number of bytes received on a connection", counter, conns(func(c *queues.ConnInfo) float64 { return float64(c.RecvOct) }))
		emit("connection_outgoing_bytes_total", "Total number of bytes sent on a connection", counter, conns(func(c *queues.ConnInfo) float64 { return float64(c.SendOct) }))
	}
	if sc.want("connection_metrics") {
		emit("connection_incoming_packets_total", "Total number of packets received on a connection", counter, conns(func(c *queues.ConnInfo) float64 { return float64(c.RecvCnt) }))
		emit("connection_outgoing_packets_total", "Total number of packets sent on a connection", counter, conns(func(c *queues.ConnInfo) float64 { return float64(c.SendCnt) }))
		emit("connection_channels", "Channels on a connection", gauge, conns(func(c *queues.ConnInfo) float64 { return float64(c.Channels) }))
	}
}

// channelTotals emits the channel_exchange, channel_queue and
// channel_queue_exchange families in aggregated mode: sums over every
// channel, which are AMQP 0-9-1's counters (Warren counts per
// connection, so per-object mode has no per-channel samples of them).
func (sc *scrape) channelTotals(e *emitter, d *data) {
	v := sc.s.cfg.Broker.ProtoCounters(queues.ProtoAMQP091)
	var dv queues.DeliveryValues
	for _, x := range v.Delivery {
		dv.GetManualAck += x.GetManualAck
		dv.GetAutoAck += x.GetAutoAck
		dv.ConsumeManualAck += x.ConsumeManualAck
		dv.ConsumeAutoAck += x.ConsumeAutoAck
		dv.Redelivered += x.Redelivered
		dv.Acknowledged += x.Acknowledged
		dv.GetEmpty += x.GetEmpty
	}
	e.one("channel_messages_published_total", "Total number of messages published into an exchange on a channel", counter, float64(v.Received))
	e.one("channel_messages_confirmed_total", "Total number of messages published into an exchange and confirmed on the channel", counter, float64(v.Confirmed))
	e.one("channel_messages_unroutable_returned_total", "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", counter, float64(v.UnroutableReturned))
	e.one("channel_messages_unroutable_dropped_total", "Total number of messages published as non-mandatory into an exchange and dropped as unroutable", counter, float64(v.UnroutableDropped))
	e.one("channel_get_ack_total", "Total number of messages fetched with basic.get in manual acknowledgement mode", counter, float64(dv.GetManualAck))
	e.one("channel_get_total", "Total number of messages fetched with basic.get in automatic acknowledgement mode", counter, float64(dv.GetAutoAck))
	e.one("channel_messages_delivered_ack_total", "Total number of messages delivered to consumers in manual acknowledgement mode", counter, float64(dv.ConsumeManualAck))
	e.one("channel_messages_delivered_total", "Total number of messages delivered to consumers in automatic acknowledgement mode", counter, float64(dv.ConsumeAutoAck))
	e.one("channel_messages_redelivered_total", "Total number of messages redelivered to consumers", counter, float64(dv.Redelivered))
	e.one("channel_messages_acked_total", "Total number of messages acknowledged by consumers", counter, float64(dv.Acknowledged))
	e.one("channel_get_empty_total", "Total number of times basic.get operations fetched no message", counter, float64(dv.GetEmpty))
	var published uint64
	for i := range d.queues {
		published += d.queues[i].ctr.Published
	}
	e.one("queue_messages_published_total", "Total number of messages published into a queue through an exchange on a channel", counter, float64(published))
}

// totals emits RabbitMQ's TOTALS: what is open now.
func (sc *scrape) totals(e *emitter, d *data) {
	e.one("connections", "Connections currently open", gauge, float64(len(d.conns)))
	e.one("channels", "Channels currently open", gauge, float64(d.channels))
	e.one("consumers", "Consumers currently connected", gauge, float64(d.consumers))
	e.one("queues", "Queues available", gauge, float64(d.queueCount))
}

// queueInfo emits queue_info: one constant sample per queue with its
// type. Warren is one node, the leader of everything.
func (sc *scrape) queueInfo(e *emitter, d *data) {
	e.labelled("queue_info", "A metric with a constant '1' value and labels that provide some queue details", gauge,
		[]string{"vhost", "queue", "queue_type", "membership"}, func(add func(float64, ...string)) {
			for i := range d.queues {
				q := &d.queues[i]
				add(1, q.vhost, q.name, queues.QTypeNames[queues.QTypeOf(q.qtype)], "leader")
			}
		})
}

// clusterFamilies are the detailed endpoint's cluster-wide families.
func (sc *scrape) clusterFamilies(e *emitter, d *data) {
	b := sc.s.cfg.Broker
	if sc.want("vhost_status") {
		e.labelled("vhost_status", "Whether a given vhost is running", gauge, []string{"vhost"}, func(add func(float64, ...string)) {
			for _, v := range d.vhosts {
				add(1, v)
			}
		})
	}
	wantB, wantN := sc.want("exchange_bindings"), sc.want("exchange_names")
	if !wantB && !wantN {
		return
	}
	type ex struct{ vhost, name, typ string }
	var xs []ex
	counts := map[ex]int{}
	for _, v := range d.vhosts {
		for _, x := range b.Exchanges(v) {
			if x.Internal || x.Name == "" {
				continue
			}
			k := ex{v, x.Name, x.Type}
			xs = append(xs, k)
			if wantB {
				counts[k] = len(b.BindingsFrom(v, x.Name))
			}
		}
	}
	lbl := []string{"vhost", "exchange", "type"}
	if wantB {
		e.labelled("exchange_bindings", "Number of bindings for an exchange. This value is cluster-wide.", gauge, lbl, func(add func(float64, ...string)) {
			for _, x := range xs {
				add(float64(counts[x]), x.vhost, x.name, x.typ)
			}
		})
	}
	if wantN {
		e.labelled("exchange_name", "Enumerates exchanges without any additional info. This value is cluster-wide. A cheaper alternative to `exchange_bindings`", gauge, lbl, func(add func(float64, ...string)) {
			for _, x := range xs {
				add(1, x.vhost, x.name, x.typ)
			}
		})
	}
}

// identity emits build_info and identity_info, which RabbitMQ's
// dashboards join every query on.
func (sc *scrape) identity(e *emitter) {
	cfg := &sc.s.cfg
	endpoint := map[mode]string{modeAggregated: "aggregated", modePerObject: "per-object", modeDetailed: "detailed"}[sc.mode]
	e.labelled("build_info", "RabbitMQ & Erlang/OTP version info", untyped,
		[]string{"rabbitmq_version", "product_name", "product_version", "prometheus_client_version", "go_version"}, func(add func(float64, ...string)) {
			add(1, cfg.Version, "Warren", cfg.Version, "client_golang", runtime.Version())
		})
	e.labelled("identity_info", "RabbitMQ node & cluster identity info", untyped,
		[]string{"rabbitmq_node", "rabbitmq_cluster", "rabbitmq_cluster_permanent_id", "rabbitmq_endpoint"}, func(add func(float64, ...string)) {
			add(1, cfg.Node, cfg.Cluster, sc.s.clusterID(), endpoint)
		})
}
