package osiris

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"
)

// Fuzz targets for the tracking decoders and for opening a stream whose
// last segment has a damaged tail. Crashers the fuzzer finds are kept in
// testdata/fuzz/<target> and run as regression tests by go test.

// trackingState is a comparable copy of a tracking's maps and state.
type trackingState struct {
	offsets   map[string]uint64
	sequences map[string]sequence
	state     []byte
}

// REQUIRES: t.mu held.
func (t *tracking) stateLocked() trackingState {
	return trackingState{maps.Clone(t.offsets), maps.Clone(t.sequences), t.state}
}

func (s trackingState) equal(o trackingState) bool {
	return maps.Equal(s.offsets, o.offsets) && maps.Equal(s.sequences, o.sequences) &&
		(s.state == nil) == (o.state == nil) && bytes.Equal(s.state, o.state)
}

// snapshotSeed encodes a snapshot of the given state.
func snapshotSeed(seqs map[string]sequence, offs map[string]uint64) []byte {
	t := newTracking()
	maps.Copy(t.sequences, seqs)
	maps.Copy(t.offsets, offs)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.appendSnapshotLocked(nil, 0)
}

// Ensure the snapshot decoder never panics, fails only with
// ErrInvalidTracking, and that what it decodes encodes to a snapshot that
// decodes to the same state and encodes to the same bytes.
func FuzzTrackingSnapshot(f *testing.F) {
	f.Add([]byte{})
	f.Add(snapshotSeed(map[string]sequence{"p": {chunkID: 10, seq: 3}}, map[string]uint64{"c": 7}))
	f.Add(snapshotSeed(map[string]sequence{"": {1, 2}, "a": {1, 1}, "b": {9, 0}}, map[string]uint64{"": 0, "x": 1 << 63}))
	f.Add(appendRecord(nil, trackTimestamp, "ts", 12345))
	f.Add([]byte{trackSequence, 3, 'a', 'b'})
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(appendStateRecord(snapshotSeed(nil, map[string]uint64{"c": 7}), []byte("queue state")))
	f.Add(appendStateRecord(nil, nil))
	f.Add([]byte{trackState, 0, 0, 0, 0, 9, 'x'})
	f.Add([]byte{trackState, 2, 'i', 'd', 0, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := newTracking()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if err := tr.loadSnapshotLocked(b, 42); err != nil {
			if !errors.Is(err, ErrInvalidTracking) {
				t.Fatalf("error %v is not ErrInvalidTracking", err)
			}
			return
		}
		enc := tr.appendSnapshotLocked(nil, 0) // keeps the newest 255 sequences
		if len(tr.sequences) > maxSnapshotSequences {
			t.Fatalf("snapshot kept %d sequences", len(tr.sequences))
		}
		want := tr.stateLocked()
		tr2 := newTracking()
		tr2.mu.Lock()
		defer tr2.mu.Unlock()
		if err := tr2.loadSnapshotLocked(enc, 43); err != nil {
			t.Fatalf("decoding an encoded snapshot: %v", err)
		}
		if got := tr2.stateLocked(); !got.equal(want) {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
		if enc2 := tr2.appendSnapshotLocked(nil, 0); !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding: got %x, want %x", enc2, enc)
		}
	})
}

// Ensure the trailer and delta decoder, and the replay of tracking chunks,
// never panic and fail only with ErrInvalidTracking, and that decoded
// records encode to records that decode to the same state.
func FuzzTrackingRecords(f *testing.F) {
	var seed []byte
	seed = appendRecord(seed, trackSequence, "producer-1", 99)
	seed = appendRecord(seed, trackOffset, "consumer-1", 1234)
	seed = appendRecord(seed, trackTimestamp, "consumer-1", 1700000000000)
	f.Add(seed, uint64(5))
	f.Add([]byte{}, uint64(0))
	f.Add([]byte{trackOffset, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint64(1<<63))
	f.Add([]byte{trackOffset, 200, 'x'}, uint64(0))
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint64(0))
	f.Add(appendStateRecord(appendRecord(nil, trackOffset, "c", 3), []byte("s")), uint64(9))
	f.Add(appendStateRecord(appendStateRecord(nil, []byte("old")), []byte{}), uint64(9))
	f.Add([]byte{trackState, 0, 0xff, 0xff, 0xff, 0xff}, uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, chunkID uint64) {
		tr := newTracking()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		err := tr.applyRecordsLocked(b, chunkID)
		if err != nil && !errors.Is(err, ErrInvalidTracking) {
			t.Fatalf("error %v is not ErrInvalidTracking", err)
		}
		// The same bytes as the entry of a tracking chunk of each type.
		entry := segment.AppendSimpleEntry(nil, b)
		for _, typ := range []segment.ChunkType{segment.ChunkTrackingDelta, segment.ChunkTrackingSnapshot} {
			h := segment.Header{Type: typ, ChunkID: chunkID, NumEntries: 1, NumRecords: 1}
			if err := newTracking().replayChunkLocked(&h, entry, nil); err != nil && !errors.Is(err, ErrInvalidTracking) {
				t.Fatalf("replay %v chunk: error %v is not ErrInvalidTracking", typ, err)
			}
			if err := newTracking().replayChunkLocked(&h, b, nil); err != nil && !errors.Is(err, ErrInvalidTracking) {
				t.Fatalf("replay %v chunk with raw data: error %v is not ErrInvalidTracking", typ, err)
			}
		}
		if err != nil {
			return
		}
		want := tr.stateLocked()
		var enc []byte
		for _, ref := range slices.Sorted(maps.Keys(want.sequences)) {
			s := want.sequences[ref]
			if s.chunkID != chunkID {
				t.Fatalf("sequence of %q in chunk %d, decoded from chunk %d", ref, s.chunkID, chunkID)
			}
			enc = appendRecord(enc, trackSequence, ref, s.seq)
		}
		for _, ref := range slices.Sorted(maps.Keys(want.offsets)) {
			enc = appendRecord(enc, trackOffset, ref, want.offsets[ref])
		}
		if want.state != nil {
			enc = appendStateRecord(enc, want.state)
		}
		tr2 := newTracking()
		if err := tr2.applyRecordsLocked(enc, chunkID); err != nil {
			t.Fatalf("decoding encoded records: %v", err)
		}
		if got := tr2.stateLocked(); !got.equal(want) {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	})
}

// openFuzzFixture is a closed stream FuzzOpenStream damages copies of.
type openFuzzFixture struct {
	dir       string
	last      string   // name of the last segment file
	index     string   // name of its index file
	records   []record // what the stream holds
	ends      []int64  // per record: end of its chunk if in the last segment, else 0
	producers []string
}

// buildOpenFuzzFixture writes a stream of three segments with tracking:
// producers p0..p2, consumers c-p0..c-p2. The clock is fake and every
// append is one writer cycle, so the files are the same on every run and
// saved crashers replay.
func buildOpenFuzzFixture(f *testing.F) *openFuzzFixture {
	fx := &openFuzzFixture{dir: f.TempDir(), producers: []string{"p0", "p1", "p2"}}
	clk := newFakeClock()
	s, err := Create(fx.dir, Config{MaxSegmentSize: 4096}, Options{Now: clk.Now, RetentionInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	seqs := map[string]uint64{}
	for i := 0; s.Stats().Segments < 3 || i%8 != 0; i++ {
		p := fx.producers[i%3]
		var batch []Message
		for range 1 + i%3 {
			seqs[p]++
			batch = append(batch, Message{Entry: crashEntry(crashBody(p, seqs[p], "fuzz")), PublishingID: seqs[p]})
		}
		if i%5 == 0 {
			appendWithOffset(f, s, crashConsumer(p), s.Stats().NextOffset, p, batch...)
		} else if _, err := s.Append(context.Background(), p, batch...); err != nil {
			f.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	if _, err := s.Append(context.Background(), "", msg("anonymous")); err != nil {
		f.Fatal(err)
	}
	fx.records = readVerified(f, s)
	segs := s.tail.Load().segs
	base := segs[len(segs)-1].base
	fx.last, fx.index = segment.SegmentFileName(base), segment.IndexFileName(base)

	// Where each record's chunk ends in the last segment.
	r, err := s.NewReader(First(), ReaderOptions{})
	if err != nil {
		f.Fatal(err)
	}
	defer r.Close()
	var data, scratch []byte
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			f.Fatal(err)
		}
		if !ok {
			break
		}
		end := int64(0)
		if filepath.Base(c.File.Name()) == fx.last {
			end = c.Pos + c.Header.Size()
		}
		if data, err = c.ReadData(data); err != nil {
			f.Fatal(err)
		}
		if scratch, err = segment.Records(data, scratch, func([]byte) bool { fx.ends = append(fx.ends, end); return true }); err != nil {
			f.Fatal(err)
		}
	}
	if len(fx.ends) != len(fx.records) {
		f.Fatalf("%d chunk ends for %d records", len(fx.ends), len(fx.records))
	}
	r.Close()
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	return fx
}

// kept is how many records must survive damage to the last segment from
// position pos on: those of the chunks that end by pos.
func (fx *openFuzzFixture) kept(pos int64) int {
	n := 0
	for n < len(fx.ends) && fx.ends[n] <= pos {
		n++
	}
	return n
}

// How FuzzOpenStream damages a file. The damage always reaches the end of
// the file, as a torn write does: recovery validates only the tail, so
// bytes changed before an intact last chunk are out of its scope.
const (
	damageReplace  = iota // the bytes from size-back on become the fuzz bytes
	damageAppend          // the fuzz bytes are appended
	damageZeroTail        // the fuzz bytes at size-back, then zeros to the old end
	damageModes
)

// Ensure that opening a stream whose last segment (or its index) has a
// damaged tail never panics or hangs, that readers from First then return
// only whole, valid, consecutive chunks holding a prefix of what was
// written, that tracking matches the records that are left, and that the
// stream accepts appends and reopens the same.
func FuzzOpenStream(f *testing.F) {
	fx := buildOpenFuzzFixture(f)
	seg, err := os.ReadFile(filepath.Join(fx.dir, fx.last))
	if err != nil {
		f.Fatal(err)
	}
	// Seeds: the last chunk (found by walking the headers) as it is, with
	// a byte changed, and appended again; garbage; a bare header.
	var lastPos int
	for pos := segment.FileHeaderSize; pos < len(seg); {
		h, err := segment.ParseHeader(seg[pos:])
		if err != nil {
			f.Fatal(err)
		}
		lastPos, pos = pos, pos+int(h.Size())
	}
	lastChunk := slices.Clone(seg[lastPos:])
	back := uint16(len(lastChunk))
	f.Add(lastChunk, back, uint8(damageReplace))
	for _, i := range []int{0, 1, 7, 24, 33, 37, 41, 44, 45, 47, 48, len(lastChunk) - 1} {
		b := slices.Clone(lastChunk)
		b[i] ^= 0x10
		f.Add(b, back, uint8(damageReplace))
	}
	f.Add(lastChunk, uint16(0), uint8(damageAppend))
	f.Add(lastChunk[:segment.HeaderSize], back, uint8(damageReplace))
	f.Add(lastChunk[:segment.HeaderSize+3], back, uint8(damageZeroTail))
	f.Add([]byte("garbage"), uint16(3), uint8(damageReplace))
	f.Add(bytes.Repeat([]byte{0}, 100), uint16(40), uint8(damageReplace))
	f.Add(binary.BigEndian.AppendUint64(nil, 1<<40), uint16(29), uint8(damageModes+damageReplace)) // index
	f.Add([]byte{1, 2, 3}, uint16(40), uint8(damageModes+damageZeroTail))                          // index
	f.Add([]byte{}, uint16(len(seg)), uint8(damageReplace))

	f.Fuzz(func(t *testing.T, data []byte, back uint16, mode uint8) {
		dir := copyDir(t, fx.dir)
		// Damage to the index loses no data: the segment file is the truth.
		need := len(fx.records)
		if mode/damageModes%2 == 1 {
			damageFile(t, filepath.Join(dir, fx.index), data, int64(back), mode%damageModes)
		} else {
			pos := damageFile(t, filepath.Join(dir, fx.last), data, int64(back), mode%damageModes)
			need = fx.kept(pos)
		}

		watchdog := time.AfterFunc(20*time.Second, func() {
			panic(fmt.Sprintf("FuzzOpenStream: open, read, append and close of %s took over 20s", dir))
		})
		defer watchdog.Stop()

		s, err := Open(dir, Options{RetentionInterval: -1})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		// Every chunk read is valid and follows on (readVerified), and
		// nothing before the damage is lost. What follows it is whatever
		// valid chunks the fuzz bytes hold, if any.
		got := readVerified(t, s)
		if len(got) < need || !slices.Equal(got[:need], fx.records[:need]) {
			i := 0
			for i < min(len(got), need) && got[i] == fx.records[i] {
				i++
			}
			t.Fatalf("read %d records; want the first %d of the %d written, first difference at %d", len(got), need, len(fx.records), i)
		}
		last := map[string]uint64{}
		for _, rec := range got {
			if p, seq, err := parseCrashBody(rec.body); err == nil {
				last[p] = seq
			}
		}
		for _, p := range fx.producers {
			if seq := s.PublisherSequence(p); seq != last[p] {
				t.Fatalf("PublisherSequence(%s) = %d; the records left end at %d", p, seq, last[p])
			}
		}
		st := s.Stats()
		seq := last["p0"] + 1
		r, err := s.Append(context.Background(), "p0", Message{Entry: crashEntry(crashBody("p0", seq, "")), PublishingID: seq})
		if err != nil || r.Written != 1 || r.LastOffset < st.NextOffset || r.LastOffset > st.NextOffset+1 {
			t.Fatalf("append: %+v, %v; next offset was %d", r, err, st.NextOffset)
		}
		after := readVerified(t, s)
		if len(after) != len(got)+1 || after[len(got)].offset != r.LastOffset {
			t.Fatalf("after append: %d records, want %d", len(after), len(got)+1)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		s2, err := Open(dir, Options{RetentionInterval: -1})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s2.Close()
		if again := readVerified(t, s2); !slices.Equal(again, after) || s2.PublisherSequence("p0") != seq {
			t.Fatalf("reopen: %d records, sequence %d; want %d, %d", len(again), s2.PublisherSequence("p0"), len(after), seq)
		}
	})
}

// damageFile writes data into the file at path as mode says, never over
// its 8-byte file header (a foreign header is refused, not repaired), and
// returns the position where the damage starts.
func damageFile(t *testing.T, path string, data []byte, back int64, mode uint8) int64 {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	pos := max(size-back, segment.FileHeaderSize)
	switch mode {
	case damageAppend:
		pos = size
	case damageReplace:
		if err := fh.Truncate(pos); err != nil {
			t.Fatal(err)
		}
	case damageZeroTail:
		if end := pos + int64(len(data)); end < size {
			data = append(slices.Clone(data), make([]byte, size-end)...)
		}
	}
	if _, err := fh.WriteAt(data, pos); err != nil {
		t.Fatal(err)
	}
	return pos
}
