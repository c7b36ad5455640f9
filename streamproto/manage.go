package streamproto

import (
	"errors"
	"strconv"
	"strings"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

func (c *conn) handleCreate(r *reader) {
	corr := r.u32()
	stream := r.string()
	args := r.stringMap()
	if r.err != nil {
		return
	}
	// RabbitMQ strips CR and LF from names.
	stream = strings.NewReplacer("\r", "", "\n", "").Replace(stream)
	vhost := c.vhost()
	code := wire.CodeOK
	switch {
	case !queues.ValidStreamName(stream):
		code = wire.CodePreconditionFailed
	case c.srv.broker.CheckPermission(c.user, vhost, queues.PermConfigure, stream) != nil:
		code = wire.CodeAccessRefused
	default:
		code = c.codeFor(c.srv.broker.CreateStream(vhost, stream, args), "create stream", stream)
	}
	c.respond(wire.KeyCreate, corr, code)
}

func (c *conn) handleDelete(r *reader) {
	corr := r.u32()
	stream := r.string()
	if r.err != nil {
		return
	}
	vhost := c.vhost()
	code := wire.CodeOK
	if _, err := c.srv.broker.Stream(vhost, stream); err != nil {
		code = wire.CodeStreamDoesNotExist
	} else if c.srv.broker.CheckPermission(c.user, vhost, queues.PermConfigure, stream) != nil {
		code = wire.CodeAccessRefused
	} else {
		code = c.codeFor(c.srv.broker.DeleteStream(vhost, stream), "delete stream", stream)
	}
	c.respond(wire.KeyDelete, corr, code)
}

// handleMetadata answers, per stream, its leader and replicas or the
// reason there is none: on a single node, this broker leads every
// stream; in a cluster, the stream's placement says which nodes, at the
// addresses they advertised. The reply has no top-level response code.
func (c *conn) handleMetadata(r *reader) {
	corr := r.u32()
	streams := r.stringArray()
	if r.err != nil {
		return
	}
	vhost := c.vhost()
	type streamMeta struct {
		code     wire.Code
		leader   int // index into brokers, -1: none
		replicas []int
	}
	host, portText := c.advertised()
	port, _ := strconv.ParseUint(portText, 10, 16)
	type brokerAddr struct {
		host string
		port uint32
	}
	brokers := []brokerAddr{{host, uint32(port)}}
	index := map[string]int{} // node -> brokers index
	if node := c.srv.broker.NodeName(); node != "" {
		index[node] = 0
	}
	brokerOf := func(node string) int {
		if i, ok := index[node]; ok {
			return i
		}
		if !c.srv.broker.NodeUp(node) {
			return -1 // RabbitMQ names only the members that run
		}
		a, ok := c.srv.broker.NodeStreamAddr(node)
		if !ok {
			return -1
		}
		brokers = append(brokers, brokerAddr{a.Host, uint32(a.Port)})
		index[node] = len(brokers) - 1
		return len(brokers) - 1
	}
	metas := make([]streamMeta, len(streams))
	for i, name := range streams {
		m := &metas[i]
		m.leader = -1
		switch {
		case c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, name) != nil &&
			c.srv.broker.CheckPermission(c.user, vhost, queues.PermWrite, name) != nil:
			m.code = wire.CodeAccessRefused
		default:
			if def, ok := c.srv.broker.StreamPlacement(vhost, name); ok {
				m.code = wire.CodeOK
				m.leader = brokerOf(def.Leader)
				for _, member := range def.Members {
					if member != def.Leader {
						if bi := brokerOf(member); bi >= 0 {
							m.replicas = append(m.replicas, bi)
						}
					}
				}
				if m.leader < 0 {
					m.code = wire.CodeStreamNotAvailable
				}
			} else if _, err := c.srv.broker.Stream(vhost, name); err != nil {
				m.code = wire.CodeStreamDoesNotExist
			} else {
				m.code, m.leader = wire.CodeOK, 0
			}
		}
	}
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyMetadata|wire.ResponseBit, 1)
		b = wire.AppendU32(b, corr)
		b = wire.AppendU32(b, uint32(len(brokers)))
		for i, br := range brokers {
			b = wire.AppendU16(b, uint16(i))
			b = wire.AppendString(b, br.host)
			b = wire.AppendU32(b, br.port)
		}
		b = wire.AppendU32(b, uint32(len(streams)))
		for i, name := range streams {
			m := metas[i]
			b = wire.AppendString(b, name)
			b = wire.AppendU16(b, uint16(m.code))
			if m.code == wire.CodeOK {
				b = wire.AppendU16(b, uint16(m.leader))
			} else {
				b = wire.AppendU16(b, 0xffff)
			}
			if m.code != wire.CodeOK {
				b = wire.AppendU32(b, 0)
				continue
			}
			b = wire.AppendU32(b, uint32(len(m.replicas)))
			for _, r := range m.replicas {
				b = wire.AppendU16(b, uint16(r))
			}
		}
		return wire.EndFrame(b, start)
	})
}

func (c *conn) handleStreamStats(r *reader) {
	corr := r.u32()
	stream := r.string()
	if r.err != nil {
		return
	}
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	code := wire.CodeOK
	var st osiris.Stats
	switch {
	case err != nil:
		code = wire.CodeStreamDoesNotExist
	case c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream) != nil:
		code = wire.CodeAccessRefused
	default:
		st = s.Stats()
	}
	c.countCode(code)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, wire.KeyStreamStats, corr, code)
		if code != wire.CodeOK {
			b = wire.AppendU32(b, 0)
			return wire.EndFrame(b, start)
		}
		first := int64(st.FirstOffset)
		if st.CommittedChunkID < 0 {
			first = -1
		}
		b = wire.AppendU32(b, 3)
		b = wire.AppendString(b, "committed_chunk_id")
		b = wire.AppendU64(b, uint64(st.CommittedChunkID))
		b = wire.AppendString(b, "first_chunk_id")
		b = wire.AppendU64(b, uint64(first))
		b = wire.AppendString(b, "last_chunk_id")
		b = wire.AppendU64(b, uint64(st.LastChunkID))
		return wire.EndFrame(b, start)
	})
}

func (c *conn) handleExchangeCommandVersions(r *reader) {
	corr := r.u32()
	n := r.count(6)
	for i := 0; i < n && r.err == nil; i++ {
		key, _, maxV := wire.Key(r.u16()), r.u16(), r.u16()
		if key == wire.KeyDeliver && maxV >= 2 {
			c.deliverV2 = true
		}
	}
	if r.err != nil {
		return
	}
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, wire.KeyExchangeCommandVersions, corr, wire.CodeOK)
		b = wire.AppendU32(b, uint32(len(wire.ServerCommandVersions)))
		for _, v := range wire.ServerCommandVersions {
			b = wire.AppendU16(b, v[0])
			b = wire.AppendU16(b, v[1])
			b = wire.AppendU16(b, v[2])
		}
		return wire.EndFrame(b, start)
	})
}

// handleResolveOffsetSpec answers with the offset a subscription with the
// given spec would start at.
func (c *conn) handleResolveOffsetSpec(r *reader) {
	corr := r.u32()
	stream := r.string()
	spec, ok := offsetSpec(r)
	var props map[string]string
	if !r.empty() {
		props = r.stringMap()
	}
	if r.err != nil {
		return
	}
	code, offset := wire.CodeOK, uint64(0)
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	switch {
	case !ok:
		code = wire.CodePreconditionFailed
	case err != nil:
		code = wire.CodeStreamDoesNotExist
	case c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream) != nil:
		code = wire.CodeAccessRefused
	default:
		rd, err := s.NewReader(spec, readerOptions(props))
		if err != nil {
			code = wire.CodeNoOffset
		} else {
			offset = rd.NextOffset()
			rd.Close()
		}
	}
	c.countCode(code)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, wire.KeyResolveOffsetSpec, corr, code)
		b = wire.AppendU16(b, wire.OffsetTypeOffset)
		b = wire.AppendU64(b, offset)
		return wire.EndFrame(b, start)
	})
}

// handleRoute answers which partitions of a super stream a routing key
// goes to; no match is OK with an empty list.
func (c *conn) handleRoute(r *reader) {
	corr := r.u32()
	key := r.string()
	name := r.string()
	if r.err != nil {
		return
	}
	streams, err := c.srv.super.Route(c.user, c.vhost(), name, key)
	c.respondStrings(wire.KeyRoute, corr, c.codeFor(err, "route", name), streams)
}

// handlePartitions answers a super stream's partitions in partition order.
func (c *conn) handlePartitions(r *reader) {
	corr := r.u32()
	name := r.string()
	if r.err != nil {
		return
	}
	streams, err := c.srv.super.Partitions(c.user, c.vhost(), name)
	c.respondStrings(wire.KeyPartitions, corr, c.codeFor(err, "partitions", name), streams)
}

// respondStrings queues a response with a code and a string array.
func (c *conn) respondStrings(key wire.Key, corr uint32, code wire.Code, list []string) {
	c.countCode(code)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, key, corr, code)
		b = wire.AppendU32(b, uint32(len(list)))
		for _, s := range list {
			b = wire.AppendString(b, s)
		}
		return wire.EndFrame(b, start)
	})
}

func (c *conn) handleCreateSuperStream(r *reader) {
	corr := r.u32()
	name := r.string()
	partitions := r.stringArray()
	keys := r.stringArray()
	args := r.stringMap()
	if r.err != nil {
		return
	}
	err := c.srv.super.Create(c.user, c.vhost(), name, partitions, keys, args)
	c.respond(wire.KeyCreateSuperStream, corr, c.codeFor(err, "create super stream", name))
}

func (c *conn) handleDeleteSuperStream(r *reader) {
	corr := r.u32()
	name := r.string()
	if r.err != nil {
		return
	}
	err := c.srv.super.Delete(c.user, c.vhost(), name)
	c.respond(wire.KeyDeleteSuperStream, corr, c.codeFor(err, "delete super stream", name))
}

// codeFor turns the outcome of a catalog operation into its response code;
// unexpected errors are logged and answered as internal errors.
func (c *conn) codeFor(err error, op, name string) wire.Code {
	switch {
	case err == nil:
		return wire.CodeOK
	case errors.Is(err, queues.ErrExists):
		return wire.CodeStreamAlreadyExists
	case errors.Is(err, queues.ErrInvalidArgument):
		return wire.CodePreconditionFailed
	case errors.Is(err, queues.ErrNotFound):
		return wire.CodeStreamDoesNotExist
	case errors.Is(err, queues.ErrAccessRefused):
		return wire.CodeAccessRefused
	}
	c.log.Error(op, "name", name, "err", err)
	return wire.CodeInternalError
}
