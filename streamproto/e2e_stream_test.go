package streamproto

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

// End-to-end tests of stream management, publishing and consuming with the
// real Go stream client. Connection-level behaviour (heartbeats,
// authentication, restarts, deletion under clients) is in
// e2e_conn_test.go; the helpers are in e2e_helpers_test.go.

// Ensure a stream can be declared (its options become its configuration),
// redeclared (the broker answers StreamAlreadyExists, which DeclareStream
// reports as success, and the stream is left as it was), deleted and
// declared again empty, and that a missing stream is StreamDoesNotExist
// for every client call that names it.
func TestE2EDeclareRedeclareDelete(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)

	if ok, err := env.StreamExists("s"); err != nil || ok {
		t.Fatalf("StreamExists before declare = %v, %v; want false", ok, err)
	}
	e2eDeclare(t, env, "s", nil)
	if ok, err := env.StreamExists("s"); err != nil || !ok {
		t.Fatalf("StreamExists after declare = %v, %v; want true", ok, err)
	}
	md, err := env.StreamMetaData("s")
	if err != nil {
		t.Fatalf("StreamMetaData: %v", err)
	}
	if md.Leader == nil || md.Leader.Host != tb.host || md.Leader.Port != strconv.Itoa(tb.port) || len(md.Replicas) != 0 {
		t.Fatalf("metadata leader %+v replicas %d, want %s:%d and none", md.Leader, len(md.Replicas), tb.host, tb.port)
	}
	orig, err := tb.broker.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	p := e2eNewProducer(t, env, "s", nil)
	p.send(t, seq("old", 0, 10), nil)

	// Redeclaring with the same arguments keeps the stream, its
	// configuration and its data; other arguments are refused
	// (PRECONDITION_FAILED), as RabbitMQ refuses an inequivalent queue.
	e2eDeclare(t, env, "s", nil)
	if err := env.DeclareStream("s", stream.NewStreamOptions().SetMaxLengthBytes(stream.ByteCapacity{}.MB(1))); !errors.Is(err, stream.PreconditionFailed) {
		t.Fatalf("redeclare with other arguments: %v, want %v", err, stream.PreconditionFailed)
	}
	now, err := tb.broker.Stream("/", "s")
	if err != nil || now != orig {
		t.Fatalf("after redeclare the stream is %p (%v), want the original %p", now, err, orig)
	}
	if got := now.Config().MaxLengthBytes; got != 0 {
		t.Fatalf("redeclare changed max-length-bytes to %d", got)
	}
	if got := now.Stats().NextOffset; got != 10 {
		t.Fatalf("after redeclare next offset %d, want 10", got)
	}

	// Stream options become the stream's configuration.
	e2eDeclare(t, env, "aged", stream.NewStreamOptions().SetMaxAge(90*time.Minute).
		SetMaxLengthBytes(stream.ByteCapacity{}.MB(5)).SetMaxSegmentSizeBytes(stream.ByteCapacity{}.KB(100)))
	aged, err := tb.broker.Stream("/", "aged")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := aged.Config(); cfg.MaxAge != 90*time.Minute || cfg.MaxLengthBytes != 5_000_000 || cfg.MaxSegmentSize != 100_000 {
		t.Fatalf("config %+v, want max age 90m, max length 5000000, segment 100000", cfg)
	}

	// Bad names are refused by the broker.
	e2eWantErr(t, "DeclareStream(amq.s)", env.DeclareStream("amq.s", nil), stream.PreconditionFailed)

	if err := p.Close(); err != nil {
		t.Fatalf("producer Close: %v", err)
	}
	if err := env.DeleteStream("s"); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	if ok, err := env.StreamExists("s"); err != nil || ok {
		t.Fatalf("StreamExists after delete = %v, %v; want false", ok, err)
	}
	if _, err := os.Stat(orig.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stream directory after delete: %v, want it gone", err)
	}
	e2eWantErr(t, "DeleteStream again", env.DeleteStream("s"), stream.StreamDoesNotExist)

	// Every call naming a missing stream fails with StreamDoesNotExist.
	_, err = env.NewProducer("s", nil)
	e2eWantErr(t, "NewProducer on a missing stream", err, stream.StreamDoesNotExist)
	_, err = env.NewConsumer("s", func(stream.ConsumerContext, *amqp.Message) {}, nil)
	e2eWantErr(t, "NewConsumer on a missing stream", err, stream.StreamDoesNotExist)
	_, err = env.StreamMetaData("s")
	e2eWantErr(t, "StreamMetaData on a missing stream", err, stream.StreamDoesNotExist)
	_, err = env.StreamStats("s")
	e2eWantErr(t, "StreamStats on a missing stream", err, stream.StreamDoesNotExist)
	_, err = env.QueryOffset("c", "s")
	e2eWantErr(t, "QueryOffset on a missing stream", err, stream.StreamDoesNotExist)
	_, err = env.QuerySequence("p", "s")
	e2eWantErr(t, "QuerySequence on a missing stream", err, stream.StreamDoesNotExist)

	// Declared again, the stream is new and empty: the old data is gone.
	e2eDeclare(t, env, "s", nil)
	st, err := env.StreamStats("s")
	if err != nil {
		t.Fatalf("StreamStats: %v", err)
	}
	if first, err := st.FirstOffset(); err == nil {
		t.Fatalf("new stream has first offset %d, want none", first)
	}
	p2 := e2eNewProducer(t, env, "s", nil)
	p2.send(t, seq("new", 0, 3), nil)
	_, sk := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets := sk.wait(t, 3)
	e2eWantBodies(t, "redeclared stream", bodies, seq("new", 0, 3))
	e2eWantOffsets(t, "redeclared stream", offsets, 0)
	s, err := tb.broker.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().NextOffset; n != 3 {
		t.Fatalf("redeclared stream holds %d records, want 3", n)
	}
}

// Ensure each offset specification starts where RabbitMQ starts: first,
// last (the last chunk), next (new data only), offset k (inside a chunk;
// the client drops the records before k) and timestamp t (the first chunk
// at or after t), and that attached consumers follow new data.
func TestE2EOffsetSpecifications(t *testing.T) {
	t.Parallel()
	clock := &e2eClock{}
	tb := startBroker(t, brokerOpts{stream: osiris.Options{Now: clock.now}})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	p := e2eNewProducer(t, env, "s", nil)

	// Three confirmed batches, so three chunks: A = 0..9 stamped 1000 s,
	// B = 10..19 at 2000 s, C = 20..29 at 3000 s.
	all := seq("m", 0, 35)
	for i, ts := range []int64{1_000_000, 2_000_000, 3_000_000} {
		clock.ms.Store(ts)
		p.send(t, all[i*10:(i+1)*10], nil)
	}
	s, err := tb.broker.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.LastChunkID != 20 || st.NextOffset != 30 || st.FirstTimestamp != 1_000_000 {
		t.Fatalf("stats %+v, want chunks 0, 10, 20 and first timestamp 1000000", st)
	}

	spec := stream.OffsetSpecification{}
	for _, tc := range []struct {
		name  string
		spec  stream.OffsetSpecification
		first int // index in all of the first message
	}{
		{"first", spec.First(), 0},
		{"offset 0", spec.Offset(0), 0},
		{"offset 15", spec.Offset(15), 15},
		{"offset 20", spec.Offset(20), 20},
		{"offset 29", spec.Offset(29), 29},
		{"timestamp before all", spec.Timestamp(1), 0},
		{"timestamp of A", spec.Timestamp(1_000_000), 0},
		{"timestamp between A and B", spec.Timestamp(1_500_000), 10},
		{"timestamp of B", spec.Timestamp(2_000_000), 10},
		{"timestamp between B and C", spec.Timestamp(2_000_001), 20},
		{"last", spec.Last(), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sk := e2eSubscribe(t, env, "s", e2eFrom(tc.spec))
			want := all[tc.first:30]
			bodies, offsets := sk.wait(t, len(want))
			e2eWantBodies(t, tc.name, bodies, want)
			e2eWantOffsets(t, tc.name, offsets, int64(tc.first))
			c.Close()
		})
	}

	// Attached before batch D (30..34): next, a timestamp after every
	// chunk, last and first each receive it, after what they had.
	subs := map[string]*e2eSink{}
	for name, sp := range map[string]stream.OffsetSpecification{
		"next":             spec.Next(),
		"future timestamp": spec.Timestamp(5_000_000),
		"last":             spec.Last(),
		"first":            spec.First(),
	} {
		_, subs[name] = e2eSubscribe(t, env, "s", e2eFrom(sp))
	}
	// The first subscriber has read everything, so it is following the
	// end of the stream when D arrives.
	subs["first"].wait(t, 30)
	clock.ms.Store(4_000_000)
	p.send(t, all[30:35], nil)
	for name, from := range map[string]int{"next": 30, "future timestamp": 30, "last": 20, "first": 0} {
		bodies, offsets := subs[name].wait(t, 35-from)
		e2eWantBodies(t, name+" after D", bodies, all[from:35])
		e2eWantOffsets(t, name+" after D", offsets, int64(from))
	}
}

// Ensure tracking chunks (written for stored offsets) take an offset but
// are never delivered: last is the last chunk of messages, an offset that
// names a tracking chunk starts at the next messages, and consumers see the
// gap in offsets.
func TestE2ETrackingChunksAreSkipped(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	s, err := tb.broker.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	p := e2eNewProducer(t, env, "s", nil)
	p.send(t, seq("a", 0, 10), nil) // chunk 0
	p.send(t, seq("b", 0, 5), nil)  // chunk 10
	if err := env.StoreOffset("c", "s", 3); err != nil {
		t.Fatalf("StoreOffset: %v", err)
	}
	if got, err := env.QueryOffset("c", "s"); err != nil || got != 3 {
		t.Fatalf("QueryOffset = %d, %v; want 3", got, err)
	}
	// The stored offset is written by the writer's next cycle as a
	// tracking chunk at offset 15.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.LastChunkID != 15 || st.NextOffset != 16 {
		t.Fatalf("stats %+v: want a tracking chunk at 15", st)
	}
	spec := stream.OffsetSpecification{}
	_, last := e2eSubscribe(t, env, "s", e2eFrom(spec.Last()))
	bodies, offsets := last.wait(t, 5)
	e2eWantBodies(t, "last", bodies, seq("b", 0, 5))
	e2eWantOffsets(t, "last", offsets, 10)
	_, next := e2eSubscribe(t, env, "s", e2eFrom(spec.Next()))
	_, at15 := e2eSubscribe(t, env, "s", e2eFrom(spec.Offset(15)))

	p.send(t, seq("c", 0, 3), nil) // chunk 16
	wantAll := slices.Concat(seq("a", 0, 10), seq("b", 0, 5), seq("c", 0, 3))
	wantOffsets := append(e2eIDs(0, 15), 16, 17, 18)
	for name, tc := range map[string]struct {
		sk   *e2eSink
		from int
	}{"last": {last, 10}, "next": {next, 15}, "offset 15": {at15, 15}} {
		bodies, offsets := tc.sk.wait(t, 18-tc.from)
		e2eWantBodies(t, name, bodies, wantAll[tc.from:])
		if !slices.Equal(offsets, wantOffsets[tc.from:]) {
			t.Fatalf("%s: offsets %v, want %v", name, offsets, wantOffsets[tc.from:])
		}
	}
	_, first := e2eSubscribe(t, env, "s", e2eFrom(spec.First()))
	bodies, offsets = first.wait(t, 18)
	e2eWantBodies(t, "first", bodies, wantAll)
	if !slices.Equal(offsets, wantOffsets) {
		t.Fatalf("first: offsets %v, want %v", offsets, wantOffsets)
	}
}

// Ensure consumers read independently: two consumers on one connection and
// one on another all get every message, including those published while
// they are attached, and a subscriber that comes late replays the whole
// history.
func TestE2EIndependentAndLateConsumers(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	shared := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetMaxConsumersPerClient(2) })
	e2eDeclare(t, env, "s", nil)
	p := e2eNewProducer(t, env, "s", nil)
	want := seq("m", 0, 100)
	p.send(t, want[:50], nil)

	first := stream.OffsetSpecification{}.First()
	c1, s1 := e2eSubscribe(t, shared, "s", e2eFrom(first))
	_, s2 := e2eSubscribe(t, shared, "s", e2eFrom(first))
	_, s3 := e2eSubscribe(t, env, "s", e2eFrom(first))
	for i, sk := range []*e2eSink{s1, s2, s3} {
		bodies, offsets := sk.wait(t, 50)
		e2eWantBodies(t, fmt.Sprintf("consumer %d, history", i+1), bodies, want[:50])
		e2eWantOffsets(t, fmt.Sprintf("consumer %d, history", i+1), offsets, 0)
	}
	// Closing one consumer does not disturb the other on its connection.
	if err := c1.Close(); err != nil {
		t.Fatalf("consumer Close: %v", err)
	}
	p.send(t, want[50:], nil)
	for i, sk := range []*e2eSink{s2, s3} {
		bodies, offsets := sk.wait(t, 100)
		e2eWantBodies(t, fmt.Sprintf("consumer %d, live", i+2), bodies, want)
		e2eWantOffsets(t, fmt.Sprintf("consumer %d, live", i+2), offsets, 0)
	}
	if bodies, _ := s1.snapshot(); len(bodies) != 50 {
		t.Fatalf("closed consumer got %d messages, want 50", len(bodies))
	}

	_, late := e2eSubscribe(t, env, "s", e2eFrom(first))
	bodies, offsets := late.wait(t, 100)
	e2eWantBodies(t, "late consumer", bodies, want)
	e2eWantOffsets(t, "late consumer", offsets, 0)
}

// Ensure stored offsets are kept per consumer name and stream, are
// visible to QueryOffset on every connection, and that a consumer
// restarted from its stored offset gets exactly the rest.
func TestE2EStoreAndQueryOffset(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	p := e2eNewProducer(t, env, "s", nil)
	want := seq("m", 0, 100)
	p.send(t, want, nil)
	spec := stream.OffsetSpecification{}

	c, sk := e2eSubscribe(t, env, "s", e2eFrom(spec.First()).SetConsumerName("reader"))
	sk.wait(t, 100)
	_, err := c.QueryOffset()
	e2eWantErr(t, "QueryOffset before a store", err, stream.OffsetNotFoundError)
	_, err = env.QueryOffset("reader", "s")
	e2eWantErr(t, "env QueryOffset before a store", err, stream.OffsetNotFoundError)

	// StoreOffset has no reply; a query on the same connection comes after it.
	if err := c.StoreCustomOffset(41); err != nil {
		t.Fatalf("StoreCustomOffset: %v", err)
	}
	if got, err := c.QueryOffset(); err != nil || got != 41 {
		t.Fatalf("QueryOffset = %d, %v; want 41", got, err)
	}
	if got, err := env.QueryOffset("reader", "s"); err != nil || got != 41 {
		t.Fatalf("env QueryOffset = %d, %v; want 41", got, err)
	}
	_, err = env.QueryOffset("someone-else", "s")
	e2eWantErr(t, "QueryOffset of another name", err, stream.OffsetNotFoundError)
	if err := c.Close(); err != nil {
		t.Fatalf("consumer Close: %v", err)
	}

	// Restarted at the stored offset + 1: exactly the rest.
	stored, err := env.QueryOffset("reader", "s")
	if err != nil {
		t.Fatal(err)
	}
	c2, sk2 := e2eSubscribe(t, env, "s", e2eFrom(spec.Offset(stored+1)).SetConsumerName("reader"))
	bodies, offsets := sk2.wait(t, 58)
	e2eWantBodies(t, "restart at stored+1", bodies, want[42:])
	e2eWantOffsets(t, "restart at stored+1", offsets, 42)

	// StoreOffset stores the offset of the last message handled.
	if err := c2.StoreOffset(); err != nil {
		t.Fatalf("StoreOffset: %v", err)
	}
	if got, err := c2.QueryOffset(); err != nil || got != 99 {
		t.Fatalf("QueryOffset after StoreOffset = %d, %v; want 99", got, err)
	}

	// The deprecated LastConsumed asks for the stored offset itself, so the
	// stored message comes again.
	if err := env.StoreOffset("other", "s", 96); err != nil {
		t.Fatalf("env StoreOffset: %v", err)
	}
	if got, err := env.QueryOffset("other", "s"); err != nil || got != 96 {
		t.Fatalf("QueryOffset(other) = %d, %v; want 96", got, err)
	}
	_, sk3 := e2eSubscribe(t, env, "s", e2eFrom(spec.LastConsumed()).SetConsumerName("other"))
	bodies, offsets = sk3.wait(t, 4)
	e2eWantBodies(t, "LastConsumed", bodies, want[96:])
	e2eWantOffsets(t, "LastConsumed", offsets, 96)
	if got, err := env.QueryOffset("reader", "s"); err != nil || got != 99 {
		t.Fatalf("QueryOffset(reader) = %d, %v; want 99", got, err)
	}
}

// Ensure a named producer's publishing ids deduplicate: ids at or below
// the last one written are confirmed but not stored, the sequence is
// reported by QueryPublisherSequence, and a new producer with the same
// name continues after it.
func TestE2ENamedProducerDeduplication(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	named := stream.NewProducerOptions().SetProducerName("p1")
	p := e2eNewProducer(t, env, "s", named)
	if last, err := p.GetLastPublishingId(); err != nil || last != 0 {
		t.Fatalf("GetLastPublishingId of a new name = %d, %v; want 0", last, err)
	}
	confirmed := func(bodies []string, pubIDs []int64) {
		t.Helper()
		got := p.send(t, bodies, pubIDs)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(pubIDs))
		if !slices.Equal(got, want) {
			t.Fatalf("confirmed ids %v, want %v", got, want)
		}
	}
	confirmed(seq("a", 1, 11), e2eIDs(1, 11))
	// 6..10 again, with new bodies, and 11..15.
	confirmed(seq("b", 6, 16), e2eIDs(6, 16))
	// 19 comes after 20 in one frame, so it is a duplicate too.
	confirmed([]string{"c-20", "c-19", "c-21"}, []int64{20, 19, 21})
	// A frame of nothing but duplicates is confirmed and stores nothing.
	confirmed(seq("e", 1, 6), e2eIDs(1, 6))

	if last, err := p.GetLastPublishingId(); err != nil || last != 21 {
		t.Fatalf("GetLastPublishingId = %d, %v; want 21", last, err)
	}
	if seqNo, err := env.QuerySequence("p1", "s"); err != nil || seqNo != 21 {
		t.Fatalf("QuerySequence = %d, %v; want 21", seqNo, err)
	}
	if seqNo, err := env.QuerySequence("nobody", "s"); err != nil || seqNo != 0 {
		t.Fatalf("QuerySequence of an unknown name = %d, %v; want 0", seqNo, err)
	}
	s, err := tb.broker.Stream("/", "s")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.NextOffset != 17 || st.Duplicates != 11 {
		t.Fatalf("stream holds %d records with %d duplicates dropped, want 17 and 11", st.NextOffset, st.Duplicates)
	}

	// A producer declared again with the name starts after the sequence.
	if err := p.Close(); err != nil {
		t.Fatalf("producer Close: %v", err)
	}
	p = e2eNewProducer(t, env, "s", named)
	if got := p.send(t, seq("d", 0, 3), nil); !slices.Equal(got, []int64{22, 23, 24}) {
		t.Fatalf("continuing producer confirmed %v, want [22 23 24]", got)
	}
	if seqNo, err := env.QuerySequence("p1", "s"); err != nil || seqNo != 24 {
		t.Fatalf("QuerySequence = %d, %v; want 24", seqNo, err)
	}

	want := slices.Concat(seq("a", 1, 11), seq("b", 11, 16), []string{"c-20", "c-21"}, seq("d", 0, 3))
	_, sk := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets := sk.wait(t, len(want))
	e2eWantBodies(t, "deduplicated stream", bodies, want)
	e2eWantOffsets(t, "deduplicated stream", offsets, 0)
	if n := s.Stats().NextOffset; n != uint64(len(want)) {
		t.Fatalf("stream holds %d records, want %d", n, len(want))
	}
}

// Ensure sub-entry batches with each compression the client offers are
// stored as sub-entries and delivered back message by message, in order.
func TestE2ESubEntryCompression(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	c := stream.Compression{}
	for _, tc := range []struct {
		name string
		comp stream.Compression
		code byte
	}{
		{"none", c.None(), 0},
		{"gzip", c.Gzip(), 1},
		{"snappy", c.Snappy(), 2},
		{"lz4", c.Lz4(), 3},
		{"zstd", c.Zstd(), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "sub-" + tc.name
			e2eDeclare(t, env, name, nil)
			var want []string
			for i := range 250 {
				want = append(want, fmt.Sprintf("%s-%03d-%s", tc.name, i, strings.Repeat("x", i%40)))
			}
			p := e2eNewProducer(t, env, name, stream.NewProducerOptions().SetSubEntrySize(100).SetCompression(tc.comp))
			p.send(t, want, nil)

			// Stored as one chunk of three sub-entries (100 + 100 + 50).
			s, err := tb.broker.Stream("/", name)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := s.NewReader(osiris.First(), osiris.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			ch, ok, err := rd.TryNext()
			if err != nil || !ok {
				t.Fatalf("first chunk: %v, %v", ok, err)
			}
			if ch.Header.NumEntries != 3 || ch.Header.NumRecords != 250 {
				t.Fatalf("chunk has %d entries and %d records, want 3 and 250", ch.Header.NumEntries, ch.Header.NumRecords)
			}
			data, err := ch.ReadData(nil)
			if err != nil {
				t.Fatal(err)
			}
			e, _, err := segment.ParseEntry(data)
			if err != nil || !e.SubBatch || data[0] != 0x80|tc.code<<4 {
				t.Fatalf("first entry: type byte %#x, sub-batch %v, %v; want %#x", data[0], e.SubBatch, err, 0x80|tc.code<<4)
			}

			_, sk := e2eSubscribe(t, env, name, e2eFrom(stream.OffsetSpecification{}.First()))
			bodies, offsets := sk.wait(t, len(want))
			e2eWantBodies(t, tc.name, bodies, want)
			e2eWantOffsets(t, tc.name, offsets, 0)
			// From an offset inside the second sub-entry.
			_, sk = e2eSubscribe(t, env, name, e2eFrom(stream.OffsetSpecification{}.Offset(150)))
			bodies, offsets = sk.wait(t, 100)
			e2eWantBodies(t, tc.name+" from 150", bodies, want[150:])
			e2eWantOffsets(t, tc.name+" from 150", offsets, 150)
		})
	}
}

// Ensure size retention with small segments drops the oldest segments:
// the first offset moves forward, consumers from first (or from an offset
// before it) start at the oldest message kept and get everything after it
// in order, and a consumer reading while segments are deleted behind it
// loses nothing that is kept.
func TestE2ERetentionMovesFirstOffset(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "r", &stream.StreamOptions{
		MaxSegmentSizeBytes: stream.ByteCapacity{}.KB(4), // 4000, raised to the 4096 minimum
		MaxLengthBytes:      stream.ByteCapacity{}.KB(12),
	})
	s, err := tb.broker.Stream("/", "r")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.Config(); cfg.MaxSegmentSize != 4096 || cfg.MaxLengthBytes != 12000 {
		t.Fatalf("config: segment %d, max length %d; want 4096 and 12000", cfg.MaxSegmentSize, cfg.MaxLengthBytes)
	}
	// A consumer reading from the start while retention deletes behind it.
	_, live := e2eSubscribe(t, env, "r", e2eFrom(stream.OffsetSpecification{}.First()))
	p := e2eNewProducer(t, env, "r", nil)
	const total = 400
	var all []string
	for i := range total {
		all = append(all, fmt.Sprintf("r-%03d-%s", i, strings.Repeat("y", 90)))
	}
	for i := 0; i < total; i += 100 {
		p.send(t, all[i:i+100], nil)
	}
	// Retention runs on the writer after the cycle that rolled a segment,
	// so after the confirms; Flush waits for that cycle to finish.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}

	st, err := env.StreamStats("r")
	if err != nil {
		t.Fatalf("StreamStats: %v", err)
	}
	first, err := st.FirstOffset()
	if err != nil || first <= 0 {
		t.Fatalf("first offset %d, %v; want > 0", first, err)
	}
	if ss := s.Stats(); ss.Segments < 2 || ss.Bytes > 12000+4096 || int64(ss.FirstOffset) != first {
		t.Fatalf("stats %+v: want at least 2 segments, at most 16096 bytes, first offset %d", ss, first)
	}

	tail := func(bodies []string) bool { return len(bodies) > 0 && bodies[len(bodies)-1] == all[total-1] }
	_, fromFirst := e2eSubscribe(t, env, "r", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets := fromFirst.waitUntil(t, "the last message", tail)
	k := slices.Index(all, bodies[0])
	if k <= 0 {
		t.Fatalf("first message delivered %q, want a later one than %q", bodies[0], all[0])
	}
	e2eWantBodies(t, "from first after retention", bodies, all[k:])
	if offsets[0] < first {
		t.Fatalf("first offset delivered %d, below the stream's first offset %d", offsets[0], first)
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i] <= offsets[i-1] {
			t.Fatalf("offsets not increasing at %d: %v", i, offsets)
		}
	}

	// The live consumer got every message still kept, and before them an
	// increasing run of older ones (those it read before retention).
	liveBodies, liveOffsets := live.waitUntil(t, "the last message", tail)
	if n := len(liveBodies); n < total-k {
		t.Fatalf("live consumer got %d messages, want at least %d", n, total-k)
	}
	e2eWantBodies(t, "live consumer, kept messages", liveBodies[len(liveBodies)-(total-k):], all[k:])
	for i := 1; i < len(liveBodies); i++ {
		if slices.Index(all, liveBodies[i]) <= slices.Index(all, liveBodies[i-1]) || liveOffsets[i] <= liveOffsets[i-1] {
			t.Fatalf("live consumer out of order at %d: %q after %q", i, liveBodies[i], liveBodies[i-1])
		}
	}

	// An offset below the first one starts at the first one.
	_, fromZero := e2eSubscribe(t, env, "r", e2eFrom(stream.OffsetSpecification{}.Offset(0)))
	bodies0, offsets0 := fromZero.waitUntil(t, "the last message", tail)
	e2eWantBodies(t, "from offset 0 after retention", bodies0, all[k:])
	if !slices.Equal(offsets0, offsets) {
		t.Fatalf("offsets from 0 %v, want %v", offsets0, offsets)
	}
}

// Ensure StreamStats reports the first and committed chunk ids: none for
// an empty stream, then the first and the last chunk.
func TestE2EStreamStats(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	st, err := env.StreamStats("s")
	if err != nil {
		t.Fatalf("StreamStats: %v", err)
	}
	if v, err := st.FirstOffset(); err == nil {
		t.Fatalf("empty stream first offset %d, want none", v)
	}
	if v, err := st.CommittedChunkId(); err == nil {
		t.Fatalf("empty stream committed chunk id %d, want none", v)
	}

	p := e2eNewProducer(t, env, "s", nil)
	p.send(t, seq("a", 0, 10), nil) // chunk 0
	p.send(t, seq("b", 0, 5), nil)  // chunk 10
	p.send(t, seq("c", 0, 7), nil)  // chunk 15
	st, err = env.StreamStats("s")
	if err != nil {
		t.Fatalf("StreamStats: %v", err)
	}
	first, err1 := st.FirstOffset()
	committed, err2 := st.CommittedChunkId()
	last, err3 := st.LastOffset()
	if err := errors.Join(err1, err2, err3); err != nil || first != 0 || committed != 15 || last != 15 {
		t.Fatalf("first %d, committed %d, last %d (%v); want 0, 15, 15", first, committed, last, err)
	}
	_, err = env.StreamStats("missing")
	e2eWantErr(t, "StreamStats on a missing stream", err, stream.StreamDoesNotExist)
}
