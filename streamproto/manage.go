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

// handleMetadata answers with this broker and, per stream, its leader
// (this broker) or the reason there is none. The reply has no top-level
// response code.
func (c *conn) handleMetadata(r *reader) {
	corr := r.u32()
	streams := r.stringArray()
	if r.err != nil {
		return
	}
	vhost := c.vhost()
	codes := make([]wire.Code, len(streams))
	for i, name := range streams {
		switch {
		case c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, name) != nil &&
			c.srv.broker.CheckPermission(c.user, vhost, queues.PermWrite, name) != nil:
			codes[i] = wire.CodeAccessRefused
		default:
			if _, err := c.srv.broker.Stream(vhost, name); err != nil {
				codes[i] = wire.CodeStreamDoesNotExist
			} else {
				codes[i] = wire.CodeOK
			}
		}
	}
	host, portText := c.advertised()
	port, _ := strconv.ParseUint(portText, 10, 16)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyMetadata|wire.ResponseBit, 1)
		b = wire.AppendU32(b, corr)
		b = wire.AppendU32(b, 1) // brokers
		b = wire.AppendU16(b, 0)
		b = wire.AppendString(b, host)
		b = wire.AppendU32(b, uint32(port))
		b = wire.AppendU32(b, uint32(len(streams)))
		for i, name := range streams {
			b = wire.AppendString(b, name)
			b = wire.AppendU16(b, uint16(codes[i]))
			if codes[i] == wire.CodeOK {
				b = wire.AppendU16(b, 0)
			} else {
				b = wire.AppendU16(b, 0xffff)
			}
			b = wire.AppendU32(b, 0) // no replicas
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
