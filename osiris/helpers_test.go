package osiris

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"
)

// fakeClock is an injected clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func msg(s string) Message { return Message{Entry: segment.AppendSimpleEntry(nil, []byte(s))} }

func msgs(prefix string, from, to int) []Message {
	var out []Message
	for i := from; i < to; i++ {
		out = append(out, msg(fmt.Sprintf("%s-%d", prefix, i)))
	}
	return out
}

func mustCreate(t *testing.T, dir string, cfg Config, opts Options) *Stream {
	t.Helper()
	s, err := Create(dir, cfg, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustOpen(t *testing.T, dir string, opts Options) *Stream {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustAppend(t *testing.T, s *Stream, producer string, m ...Message) Result {
	t.Helper()
	r, err := s.Append(context.Background(), producer, m...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return r
}

// record is one record read back with the offset it has.
type record struct {
	offset uint64
	body   string
}

// readAll reads every committed record from spec to the current end,
// without waiting.
func readAll(t *testing.T, s *Stream, spec OffsetSpec, opts ReaderOptions) []record {
	t.Helper()
	r, err := s.NewReader(spec, opts)
	if err != nil {
		t.Fatalf("NewReader(%v): %v", spec, err)
	}
	defer r.Close()
	var out []record
	var buf, scratch []byte
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatalf("TryNext: %v", err)
		}
		if !ok {
			return out
		}
		if buf, err = c.ReadData(buf); err != nil {
			t.Fatalf("ReadData: %v", err)
		}
		off := c.Header.ChunkID
		scratch, err = segment.Records(buf, scratch, func(rec []byte) bool {
			out = append(out, record{off, string(rec)})
			off++
			return true
		})
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
	}
}

func bodies(recs []record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.body)
	}
	return out
}

// chunkHeaders returns the headers of the committed chunks from spec on
// (tracking chunks too when all).
func chunkHeaders(t *testing.T, s *Stream, spec OffsetSpec, all bool) []segment.Header {
	t.Helper()
	r, err := s.NewReader(spec, ReaderOptions{AllChunks: all})
	if err != nil {
		t.Fatalf("NewReader(%v): %v", spec, err)
	}
	defer r.Close()
	var out []segment.Header
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatalf("TryNext: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, c.Header)
	}
}
