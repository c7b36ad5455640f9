package prom

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/classic"
)

// data is the model's state as one scrape reads it.
type data struct {
	vhosts     []string
	queues     []qrow // classic, quorum and streams, in the vhosts and filters asked for
	queueCount int    // every queue and stream of those vhosts (no queue filter)
	conns      []queues.ConnInfo

	channels, consumers int
	publishers          [queues.NumProtos]int
	protoConsumers      [queues.NumProtos]int
}

// qrow is a queue or stream.
type qrow struct {
	vhost, name, qtype        string
	stream                    bool
	ready, unacked, consumers int
	readyBytes, unackedBytes  int64
	ctr                       classic.Counters
	segments                  int
	streamBytes               int64
	maxLag                    uint64 // highest offset lag of the stream's consumers (stream protocol)
	hasLag                    bool
	hist                      classic.HistoryStats // a classic or quorum queue's history, when hasHist
	hasHist                   bool
}

// gather reads the model once.
func (sc *scrape) gather() *data {
	b := sc.s.cfg.Broker
	d := &data{}
	for _, c := range b.Conns() {
		d.conns = append(d.conns, c.Info())
	}
	type key struct{ vhost, name string }
	streamConsumers := map[key]int{}
	lags := map[key]uint64{}
	for i := range d.conns {
		ci := &d.conns[i]
		d.channels += ci.Channels
		if ci.Protocol == queues.ProtocolStream {
			d.publishers[queues.ProtoStream] += len(ci.StreamPublishers)
			d.protoConsumers[queues.ProtoStream] += len(ci.StreamConsumers)
			d.consumers += len(ci.StreamConsumers)
			for _, sc := range ci.StreamConsumers {
				k := key{sc.Queue.VHost, sc.Queue.Name}
				streamConsumers[k]++
				if lag, ok := lags[k]; !ok || sc.OffsetLag > lag {
					lags[k] = sc.OffsetLag
				}
			}
			continue
		}
		for _, ch := range ci.AMQPChannels {
			if ch.Publishing {
				d.publishers[queues.ProtoAMQP091]++
			}
			d.protoConsumers[queues.ProtoAMQP091] += ch.ConsumerCount
			d.consumers += ch.ConsumerCount
			for _, cs := range ch.Consumers {
				streamConsumers[key{cs.Queue.VHost, cs.Queue.Name}]++ // read below for streams only
			}
		}
	}

	vhosts, _ := b.VHosts()
	for _, v := range vhosts {
		if sc.vhosts != nil && !sc.vhosts[v.Name] {
			continue
		}
		d.vhosts = append(d.vhosts, v.Name)
		for _, q := range b.Queues(v.Name) {
			d.queueCount++
			def := q.Def()
			if sc.queueRe != nil && !sc.queueRe.MatchString(def.Name) {
				continue
			}
			st := q.Stats()
			hist, hasHist := q.History()
			d.queues = append(d.queues, qrow{
				vhost: v.Name, name: def.Name, qtype: def.Type,
				ready: st.Ready, unacked: st.Unacked, consumers: st.Consumers,
				readyBytes: st.ReadyBytes, unackedBytes: st.UnackedBytes, ctr: st.Counters,
				hist: hist, hasHist: hasHist,
			})
		}
		streams, _ := b.Streams(v.Name)
		for _, sd := range streams {
			d.queueCount++
			if sc.queueRe != nil && !sc.queueRe.MatchString(sd.Name) {
				continue
			}
			s, ok := b.LookupStream(sd.VHost, sd.Name)
			if !ok {
				continue
			}
			st := s.Stats()
			k := key{sd.VHost, sd.Name}
			lag, hasLag := lags[k]
			n := 0
			if st.NextOffset > st.FirstOffset {
				n = int(st.NextOffset - st.FirstOffset)
			}
			d.queues = append(d.queues, qrow{
				vhost: sd.VHost, name: sd.Name, qtype: queues.QueueStream, stream: true,
				ready: n, consumers: streamConsumers[k], segments: st.Segments, streamBytes: st.Bytes,
				maxLag: lag, hasLag: hasLag,
			})
		}
	}
	return d
}

// process is what the node reads of its own process and disk.
type process struct {
	rss, openFDs, maxFDs, diskFree uint64
	rssOK, fdsOK, maxFDsOK, diskOK bool
}

func readProcess(dataDir string) process {
	var p process
	if proc, err := procfs.Self(); err == nil {
		if st, err := proc.Stat(); err == nil {
			p.rss, p.rssOK = uint64(st.ResidentMemory()), true
		}
		if n, err := proc.FileDescriptorsLen(); err == nil {
			p.openFDs, p.fdsOK = uint64(n), true
		}
		if l, err := proc.Limits(); err == nil && l.OpenFiles > 0 {
			p.maxFDs, p.maxFDsOK = l.OpenFiles, true
		}
	}
	if dataDir != "" {
		var fs unix.Statfs_t
		if err := unix.Statfs(dataDir, &fs); err == nil {
			p.diskFree, p.diskOK = fs.Bavail*uint64(fs.Bsize), true
		}
	}
	return p
}

// clusterIDParam is the global parameter that holds the cluster's
// permanent id, as RabbitMQ names it.
const clusterIDParam = "internal_cluster_id"

// clusterID returns the permanent cluster id (rabbitmq_cluster_permanent_id),
// creating and storing it the first time.
func (s *Server) clusterID() string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.id != "" {
		return s.id
	}
	b := s.cfg.Broker
	if raw, err := b.GetGlobalParameter(clusterIDParam); err == nil {
		var id string
		if json.Unmarshal(raw, &id) == nil && id != "" {
			s.id = id
			return id
		}
	}
	var r [16]byte
	rand.Read(r[:])
	id := "rabbitmq-cluster-id-" + hex.EncodeToString(r[:])
	raw, _ := json.Marshal(id)
	if err := b.SetGlobalParameter(clusterIDParam, raw); err != nil {
		s.log.Warn("prometheus: cannot store the cluster id", "err", err)
	}
	s.id = id
	return id
}
