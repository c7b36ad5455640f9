package osiris

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/warren-mq/warren/segment"
)

// These constants are part of the on-disk format and must not be changed.
const (
	trackSequence  = 0
	trackOffset    = 1
	trackTimestamp = 2 // written by Osiris; read and ignored here
	// trackState is Warren's own: the stream's state blob (StoreState).
	// Its value is a u32 length and that many bytes instead of a u64.
	trackState = 3

	// maxSnapshotSequences is how many producer sequences a snapshot keeps
	// (the newest by chunk id), as Osiris does.
	maxSnapshotSequences = 255
)

// MaxStateLen bounds the state blob of StoreState: it must fit in a
// tracking chunk (segment.MaxDataLen) with the rest of a snapshot.
const MaxStateLen = 64 << 20

// Compile-time check: a snapshot holding the largest state still fits.
const _ = uint(segment.MaxDataLen - 2*MaxStateLen)

// Errors of tracking.
var (
	// ErrInvalidTracking marks tracking bytes that do not parse.
	ErrInvalidTracking = errors.New("osiris: invalid tracking data")
	// ErrStateTooLarge is returned by StoreState for a blob over
	// MaxStateLen bytes.
	ErrStateTooLarge = errors.New("osiris: state larger than MaxStateLen")
)

// sequence is a producer's last publishing id and the chunk that holds it.
type sequence struct {
	chunkID uint64
	seq     uint64
}

// tracking is the stream's tracking state. The writer changes sequences;
// StoreOffset changes offsets; queries read both.
type tracking struct {
	mu        sync.Mutex
	offsets   map[string]uint64   // consumer reference -> stored offset
	sequences map[string]sequence // producer reference -> last id
	dups      map[string]uint64   // producer reference -> duplicates dropped since open
	// state is the newest state blob (StoreState) written or replayed;
	// nil when the stream has none. Never changed in place: replaced.
	state []byte
}

func newTracking() *tracking {
	return &tracking{offsets: map[string]uint64{}, sequences: map[string]sequence{}, dups: map[string]uint64{}}
}

// ProducerState is a named producer's deduplication state.
type ProducerState struct {
	Reference        string
	LastPublishingID uint64
	Duplicates       uint64 // messages dropped as duplicates since the stream was opened
	LastChunkID      uint64 // the chunk that holds its last message
}

// Offsets returns the stored consumer offsets by reference.
func (s *Stream) Offsets() map[string]uint64 {
	t := s.track
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]uint64, len(t.offsets))
	for k, v := range t.offsets {
		out[k] = v
	}
	return out
}

// Producers returns the named producers' states, by reference.
func (s *Stream) Producers() []ProducerState {
	t := s.track
	t.mu.Lock()
	out := make([]ProducerState, 0, len(t.sequences))
	for ref, q := range t.sequences {
		out = append(out, ProducerState{Reference: ref, LastPublishingID: q.seq, Duplicates: t.dups[ref], LastChunkID: q.chunkID})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b ProducerState) int { return strings.Compare(a.Reference, b.Reference) })
	return out
}

// State returns the stream's newest state blob (see StoreState): on a
// leader or single node the last one written (replayed from the log at
// Open), on a replica the last one in the chunks it appended. nil when
// the stream has none. The caller must not modify it.
func (s *Stream) State() []byte {
	t := s.track
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// empty reports whether the tracking holds nothing: no offsets, no
// sequences, no state.
// REQUIRES: t.mu held.
func (t *tracking) emptyLocked() bool {
	return len(t.offsets) == 0 && len(t.sequences) == 0 && t.state == nil
}

// clearLocked empties the tracking (dups, counted since open, stay).
// REQUIRES: t.mu held.
func (t *tracking) clearLocked() {
	clear(t.offsets)
	clear(t.sequences)
	t.state = nil
}

func (t *tracking) offset(ref string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.offsets[ref]
	return o, ok
}

func (t *tracking) sequence(ref string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sequences[ref].seq
}

// appendRecord appends one trailer/delta record.
func appendRecord(dst []byte, typ byte, id string, v uint64) []byte {
	dst = append(dst, typ, byte(len(id)))
	dst = append(dst, id...)
	return binary.BigEndian.AppendUint64(dst, v)
}

// appendStateRecord appends a state record (trackState) holding blob,
// with an empty reference.
func appendStateRecord(dst, blob []byte) []byte {
	dst = append(dst, trackState, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(blob)))
	return append(dst, blob...)
}

// parseState parses the value of a state record at the start of b (after
// its reference): it returns a copy of the blob and the bytes after it.
func parseState(b []byte) (blob, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, b, false
	}
	return append([]byte{}, b[4:4+n]...), b[4+n:], true
}

// appendSnapshot appends the snapshot body of t. Offsets below first are
// dropped; at most maxSnapshotSequences sequences are kept, newest first.
// REQUIRES: t.mu held.
func (t *tracking) appendSnapshotLocked(dst []byte, first uint64) []byte {
	refs := make([]string, 0, len(t.sequences))
	for ref := range t.sequences {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b string) int {
		ca, cb := t.sequences[a].chunkID, t.sequences[b].chunkID
		switch {
		case ca > cb:
			return -1
		case ca < cb:
			return 1
		}
		return compareStrings(a, b)
	})
	if len(refs) > maxSnapshotSequences {
		for _, ref := range refs[maxSnapshotSequences:] {
			delete(t.sequences, ref)
		}
		refs = refs[:maxSnapshotSequences]
	}
	for _, ref := range refs {
		s := t.sequences[ref]
		dst = append(dst, trackSequence, byte(len(ref)))
		dst = append(dst, ref...)
		dst = binary.BigEndian.AppendUint64(dst, s.chunkID)
		dst = binary.BigEndian.AppendUint64(dst, s.seq)
	}
	offs := make([]string, 0, len(t.offsets))
	for ref, o := range t.offsets {
		if o < first {
			delete(t.offsets, ref)
			continue
		}
		offs = append(offs, ref)
	}
	slices.Sort(offs)
	for _, ref := range offs {
		dst = appendRecord(dst, trackOffset, ref, t.offsets[ref])
	}
	if t.state != nil {
		dst = appendStateRecord(dst, t.state)
	}
	return dst
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// applyRecords applies trailer or delta records found in chunk chunkID.
// REQUIRES: t.mu held.
func (t *tracking) applyRecordsLocked(b []byte, chunkID uint64) error {
	for len(b) > 0 {
		if len(b) >= 2 && b[0] == trackState && len(b) >= 2+int(b[1]) {
			blob, rest, ok := parseState(b[2+int(b[1]):])
			if !ok {
				return fmt.Errorf("chunk %d: state record of %d bytes: %w", chunkID, len(b), ErrInvalidTracking)
			}
			t.state, b = blob, rest
			continue
		}
		if len(b) < 2 || len(b) < 2+int(b[1])+8 {
			return fmt.Errorf("chunk %d: tracking record of %d bytes: %w", chunkID, len(b), ErrInvalidTracking)
		}
		typ, id := b[0], string(b[2:2+int(b[1])])
		v := binary.BigEndian.Uint64(b[2+len(id):])
		b = b[2+len(id)+8:]
		switch typ {
		case trackSequence:
			t.sequences[id] = sequence{chunkID: chunkID, seq: v}
		case trackOffset:
			t.offsets[id] = v
		case trackTimestamp:
		default:
			return fmt.Errorf("chunk %d: tracking record type %d: %w", chunkID, typ, ErrInvalidTracking)
		}
	}
	return nil
}

// loadSnapshot replaces the state with a snapshot body.
// REQUIRES: t.mu held.
func (t *tracking) loadSnapshotLocked(b []byte, chunkID uint64) error {
	t.clearLocked()
	for len(b) > 0 {
		if len(b) < 2 {
			return fmt.Errorf("chunk %d: snapshot record of %d bytes: %w", chunkID, len(b), ErrInvalidTracking)
		}
		typ, n := b[0], int(b[1])
		if typ == trackState && len(b) >= 2+n {
			blob, rest, ok := parseState(b[2+n:])
			if !ok {
				return fmt.Errorf("chunk %d: state record of %d bytes: %w", chunkID, len(b), ErrInvalidTracking)
			}
			t.state, b = blob, rest
			continue
		}
		size := 2 + n + 8
		if typ == trackSequence {
			size += 8
		}
		if len(b) < size {
			return fmt.Errorf("chunk %d: snapshot record of %d bytes: %w", chunkID, len(b), ErrInvalidTracking)
		}
		id := string(b[2 : 2+n])
		v := b[2+n:]
		switch typ {
		case trackSequence:
			t.sequences[id] = sequence{chunkID: binary.BigEndian.Uint64(v), seq: binary.BigEndian.Uint64(v[8:])}
		case trackOffset:
			t.offsets[id] = binary.BigEndian.Uint64(v)
		case trackTimestamp:
		default:
			return fmt.Errorf("chunk %d: snapshot record type %d: %w", chunkID, typ, ErrInvalidTracking)
		}
		b = b[size:]
	}
	return nil
}

// replayChunk applies the tracking carried by one chunk whose header is h;
// body is the chunk's entry data for tracking chunks and trailer its
// trailer.
// REQUIRES: t.mu held.
func (t *tracking) replayChunkLocked(h *segment.Header, data, trailer []byte) error {
	switch h.Type {
	case segment.ChunkTrackingSnapshot, segment.ChunkTrackingDelta:
		e, _, err := segment.ParseEntry(data)
		if err != nil || e.SubBatch {
			return fmt.Errorf("chunk %d: tracking entry: %w", h.ChunkID, ErrInvalidTracking)
		}
		if h.Type == segment.ChunkTrackingSnapshot {
			return t.loadSnapshotLocked(e.Data, h.ChunkID)
		}
		return t.applyRecordsLocked(e.Data, h.ChunkID)
	}
	return t.applyRecordsLocked(trailer, h.ChunkID)
}
