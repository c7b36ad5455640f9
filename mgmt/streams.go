package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
)

// The stream endpoints beyond RabbitMQ's queue ones: super streams (as
// rabbitmq_stream_management 3.13+ has them), and Warren's own: stored
// consumer offsets (listed and reset), named producers, consumer groups.
func (s *Server) registerStreams() {
	s.handle("GET", "/api/stream/super-streams", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		var items []obj
		for _, v := range vs {
			items = append(items, s.superStreamObjs(q, v.Name)...)
		}
		return q.list(items)
	})
	s.handle("GET", "/api/stream/super-streams/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(s.superStreamObjs(q, v))
	})
	s.handle("GET", "/api/stream/super-streams/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		for _, o := range s.superStreamObjs(q, v) {
			if o["name"] == q.Var("name") {
				return q.reply(o)
			}
		}
		return errNotFound()
	})
	s.handle("PUT", "/api/stream/super-streams/{vhost}/{name}", accessManagement, s.putSuperStream)
	s.handle("DELETE", "/api/stream/super-streams/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		if err := s.cfg.SuperStreams.Delete(q.user.Name, v, q.Var("name")); err != nil {
			return superStreamErr(err)
		}
		return q.noContent(false)
	})

	s.handle("GET", "/api/stream/offsets", accessManagement, func(q *request) error { return s.offsets(q, false, false) })
	s.handle("GET", "/api/stream/offsets/{vhost}", accessManagement, func(q *request) error { return s.offsets(q, true, false) })
	s.handle("GET", "/api/stream/offsets/{vhost}/{stream}", accessManagement, func(q *request) error { return s.offsets(q, true, true) })
	s.handle("PUT", "/api/stream/offsets/{vhost}/{stream}/{reference}", accessManagement, s.resetOffset)

	s.handle("GET", "/api/stream/producers", accessManagement, func(q *request) error { return s.producers(q, false, false) })
	s.handle("GET", "/api/stream/producers/{vhost}", accessManagement, func(q *request) error { return s.producers(q, true, false) })
	s.handle("GET", "/api/stream/producers/{vhost}/{stream}", accessManagement, func(q *request) error { return s.producers(q, true, true) })

	s.handle("GET", "/api/stream/consumer-groups", accessManagement, func(q *request) error { return s.consumerGroups(q, false) })
	s.handle("GET", "/api/stream/consumer-groups/{vhost}", accessManagement, func(q *request) error { return s.consumerGroups(q, true) })
}

func superStreamErr(err error) error {
	switch {
	case errors.Is(err, queues.ErrExists):
		return badRequestOr(err)
	case errors.Is(err, queues.ErrInvalidArgument):
		return badRequestOr(err)
	case errors.Is(err, queues.ErrAccessRefused):
		return errNotAuthorised(err.Error())
	}
	return err
}

// superStreamObjs lists vhost's super streams: the direct exchanges with
// x-super-stream true, with their partitions in partition order.
func (s *Server) superStreamObjs(q *request, vhost string) []obj {
	var out []obj
	for _, x := range s.b.Exchanges(vhost) {
		if v, _ := x.Args["x-super-stream"].(bool); !v {
			continue
		}
		parts, err := s.cfg.SuperStreams.Partitions(q.user.Name, vhost, x.Name)
		if err != nil {
			continue // not readable by this user
		}
		keys := make([]string, len(parts))
		for _, b := range s.b.BindingsFrom(vhost, x.Name) {
			if i := slices.Index(parts, b.Dest); i >= 0 && keys[i] == "" {
				keys[i] = b.Key
			}
		}
		out = append(out, obj{"name": x.Name, "vhost": vhost, "partitions": parts, "binding_keys": keys})
	}
	return out
}

// putSuperStream creates a super stream: {"partitions": N} makes
// partitions name-0 … name-(N-1) bound with keys "0" … "N-1";
// {"binding-keys": "a,b"} (RabbitMQ 4.x's name; "binding_keys" too) makes name-a, name-b bound with a and b, as
// rabbitmq-streams add_super_stream does. "arguments" take the stream
// arguments (max-length-bytes, max-age, stream-max-segment-size-bytes,
// queue-leader-locator, initial-cluster-size, with or without "x-").
func (s *Server) putSuperStream(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	var body struct {
		Partitions  json.Number    `json:"partitions"`
		BindingKeys any            `json:"binding-keys"` // RabbitMQ 4.x's name
		Keys        any            `json:"binding_keys"`
		Arguments   map[string]any `json:"arguments"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.BindingKeys == nil {
		body.BindingKeys = body.Keys
	}
	name := q.Var("name")
	var keys []string
	switch bk := body.BindingKeys.(type) {
	case nil:
	case string:
		for _, k := range strings.Split(bk, ",") {
			if k = strings.TrimSpace(k); k != "" {
				keys = append(keys, k)
			}
		}
	case []any:
		for _, k := range bk {
			ks, ok := k.(string)
			if !ok {
				return errBadRequest("binding_keys must be strings")
			}
			keys = append(keys, ks)
		}
	default:
		return errBadRequest("binding_keys must be a comma-separated string or a list")
	}
	var parts []string
	switch {
	case body.Partitions != "" && keys != nil:
		return errBadRequest("give partitions or binding_keys, not both")
	case body.Partitions != "":
		n, err := body.Partitions.Int64()
		if err != nil || n < 1 {
			return errBadRequest("partitions must be a positive integer")
		}
		if n > 1000 {
			return errBadRequest("too many partitions")
		}
		for i := range n {
			keys = append(keys, strconv.FormatInt(i, 10))
		}
		for _, k := range keys {
			parts = append(parts, name+"-"+k)
		}
	case keys != nil:
		for _, k := range keys {
			parts = append(parts, name+"-"+k)
		}
	default:
		return errBadRequest("partitions or binding_keys is required")
	}
	args := map[string]string{}
	for k, val := range body.Arguments {
		k = strings.TrimPrefix(k, "x-")
		switch k {
		case "max-length-bytes", "max-age", "stream-max-segment-size-bytes", "queue-leader-locator", "initial-cluster-size",
			"stream-filter-size-bytes":
		default:
			return errBadRequest(fmt.Sprintf("unknown super stream argument %q", k))
		}
		switch x := val.(type) {
		case string:
			args[k] = x
		case json.Number:
			args[k] = x.String()
		default:
			return errBadRequest(fmt.Sprintf("argument %q must be a string or a number", k))
		}
	}
	if err := s.cfg.SuperStreams.Create(q.user.Name, v, name, parts, keys, args); err != nil {
		return superStreamErr(err)
	}
	return q.noContent(true)
}

// visibleStreams returns the streams the request's path selects that the
// user may see.
func (s *Server) visibleStreams(q *request, byVHost, byStream bool) ([]queues.StreamDef, error) {
	var vhosts []string
	if byVHost {
		v, err := q.vhost()
		if err != nil {
			return nil, err
		}
		vhosts = []string{v}
	} else {
		vs, err := q.visibleVHosts()
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			vhosts = append(vhosts, v.Name)
		}
	}
	var out []queues.StreamDef
	for _, v := range vhosts {
		defs, err := s.b.Streams(v)
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			if !byStream || d.Name == q.Var("stream") {
				out = append(out, d)
			}
		}
	}
	if byStream && len(out) == 0 {
		return nil, errNotFound()
	}
	return out, nil
}

// eachStream calls fn with every open stream the request's path selects
// and the user may see, and answers with the objects fn made.
func (s *Server) eachStream(q *request, byVHost, byStream bool, fn func(queues.StreamDef, *osiris.Stream) []obj) error {
	defs, err := s.visibleStreams(q, byVHost, byStream)
	if err != nil {
		return err
	}
	items := []obj{}
	for _, d := range defs {
		if st, ok := s.b.LookupStream(d.VHost, d.Name); ok {
			items = append(items, fn(d, st)...)
		}
	}
	return q.list(items)
}

func (s *Server) offsets(q *request, byVHost, byStream bool) error {
	return s.eachStream(q, byVHost, byStream, func(d queues.StreamDef, st *osiris.Stream) []obj {
		var items []obj
		next := st.Stats().NextOffset
		offs := st.Offsets()
		refs := make([]string, 0, len(offs))
		for r := range offs {
			refs = append(refs, r)
		}
		sortStrings(refs)
		for _, r := range refs {
			lag := int64(0)
			if next > offs[r]+1 {
				lag = int64(next - offs[r] - 1)
			}
			items = append(items, obj{"vhost": d.VHost, "stream": d.Name, "reference": r, "name": r, "offset": offs[r], "lag": lag})
		}
		return items
	})
}

// resetOffset stores a consumer reference's offset: a number, "first",
// "last" (the last message), "next" (none read yet: after the last) or
// {"timestamp": ms} (the first chunk at or after it). Consumers that
// attach afterwards and query their offset resume from there; one
// attached now keeps reading where it is, and may store over it.
func (s *Server) resetOffset(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	stream, ref := q.Var("stream"), q.Var("reference")
	if err := q.checkPerm(v, queues.PermRead, stream); err != nil {
		return err
	}
	st, ok := s.b.LookupStream(v, stream)
	if !ok {
		return errNotFound()
	}
	if ref == "" || len(ref) > 255 {
		return errBadRequest("reference must be 1 to 255 bytes")
	}
	var body struct {
		Offset    any         `json:"offset"`
		Timestamp json.Number `json:"timestamp"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	var spec osiris.OffsetSpec
	switch o := body.Offset.(type) {
	case nil:
		if body.Timestamp == "" {
			return errBadRequest("offset or timestamp is required")
		}
		ms, err := body.Timestamp.Int64()
		if err != nil {
			return errBadRequest("timestamp must be milliseconds since the epoch")
		}
		spec = osiris.OffsetSpec{Kind: osiris.SpecTimestamp, Timestamp: ms}
	case json.Number:
		n, err := strconv.ParseUint(o.String(), 10, 64)
		if err != nil {
			return errBadRequest("offset must be a non-negative integer, first, last or next")
		}
		return s.storeOffset(q, st, ref, n)
	case string:
		switch o {
		case "first":
			spec = osiris.OffsetSpec{Kind: osiris.SpecFirst}
		case "last":
			stats := st.Stats()
			if stats.NextOffset == stats.FirstOffset {
				return s.storeOffset(q, st, ref, stats.NextOffset)
			}
			return s.storeOffset(q, st, ref, stats.NextOffset-1)
		case "next":
			return s.storeOffset(q, st, ref, st.Stats().NextOffset)
		default:
			return errBadRequest("offset must be a non-negative integer, first, last or next")
		}
	default:
		return errBadRequest("offset must be a non-negative integer, first, last or next")
	}
	rd, err := st.NewReader(spec, osiris.ReaderOptions{})
	if err != nil {
		return err
	}
	n := rd.NextOffset()
	rd.Close()
	return s.storeOffset(q, st, ref, n)
}

func (s *Server) storeOffset(q *request, st *osiris.Stream, ref string, n uint64) error {
	if err := st.StoreOffset(ref, n); err != nil {
		return err
	}
	if err := st.Flush(); err != nil {
		return err
	}
	return q.noContent(false)
}

func (s *Server) producers(q *request, byVHost, byStream bool) error {
	return s.eachStream(q, byVHost, byStream, func(d queues.StreamDef, st *osiris.Stream) []obj {
		var items []obj
		for _, p := range st.Producers() {
			items = append(items, obj{
				"vhost": d.VHost, "stream": d.Name, "reference": p.Reference, "name": p.Reference,
				"last_publishing_id": p.LastPublishingID, "duplicates": p.Duplicates,
			})
		}
		return items
	})
}

func (s *Server) consumerGroups(q *request, byVHost bool) error {
	var only string
	if byVHost {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		only = v
	}
	items := []obj{}
	if s.cfg.ConsumerGroups == nil {
		return q.list(items)
	}
	for _, g := range s.cfg.ConsumerGroups() {
		if (byVHost && g.Key.VHost != only) || !q.canSee(g.Key.VHost) {
			continue
		}
		members := []obj{}
		for _, m := range g.Members {
			mo := obj{"subscription_id": m.ID, "state": m.State, "active": m.State == "active"}
			if c, ok := m.Owner.(interface{ ConnectionName() string }); ok {
				mo["connection_name"] = c.ConnectionName()
			}
			members = append(members, mo)
		}
		o := obj{
			"vhost": g.Key.VHost, "stream": g.Key.Stream, "reference": g.Key.Name, "name": g.Key.Name,
			"partition_index": g.Partition, "consumers": len(g.Members), "members": members,
		}
		if g.SuperStream != "" {
			o["super_stream"] = g.SuperStream
		}
		items = append(items, o)
	}
	slices.SortStableFunc(items, func(a, b obj) int {
		return strings.Compare(fmt.Sprint(a["vhost"], "\x00", a["stream"], "\x00", a["reference"]),
			fmt.Sprint(b["vhost"], "\x00", b["stream"], "\x00", b["reference"]))
	})
	return q.list(items)
}

func sortStrings(s []string) { slices.Sort(s) }
