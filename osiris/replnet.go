package osiris

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"sort"

	"github.com/warren-mq/warren/segment"
)

// The pull protocol over a connection the caller provides (nodenet, a
// TCP connection, net.Pipe in tests):
//
//	replica                                 leader
//	Hello{member, epoch history, log end} →
//	                                      ← Start{offset, reset}
//	(truncate to offset, or reset to it)
//	Ack{last chunk}                        →
//	                                      ← Chunks{commit, chunks...}
//	Ack{last chunk written}                →
//	                                      ← Commit{commit}
//	...
//
// The leader streams every chunk it has written from the offset on, as
// stored, as soon as it is written, reading it from its segment files
// (so a replica far behind catches up from disk), and sends the commit
// offset with each Chunks frame and alone when only it moved. The
// replica appends the chunks (AppendChunks) and acknowledges the last
// chunk written (after fsync with Replication.SyncBeforeAck); the leader
// commits what a majority holds (Acknowledge). A segment the replica
// would need that the leader's retention has deleted ends the exchange;
// at the next Hello the leader answers with a reset.

const (
	// shipBytes is how many bytes of chunks a Chunks frame carries at
	// most, unless one chunk is larger.
	shipBytes = 256 << 10
	// connBuffer is the size of the connection's read and write buffers.
	connBuffer = 64 << 10
)

// ServeReplica serves one replica of the leader s over conn until ctx
// ends, the stream closes or the connection fails, and returns why. It
// closes conn when it returns if conn is an io.Closer (a net.Conn is);
// it reads the replica's acknowledgements on a goroutine of its own,
// which ends only when conn is closed.
func ServeReplica(ctx context.Context, s *Stream, conn io.ReadWriter) error {
	if s.repl == nil || s.repl.role != RoleLeader {
		// Closed as on every return: a replica waiting for Start must
		// learn at once that this member does not lead (it may not yet
		// have applied the move that makes it leader).
		if closer, ok := conn.(io.Closer); ok {
			closer.Close()
		}
		return ErrNotLeader
	}
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	closer, _ := conn.(io.Closer)
	if closer != nil {
		context.AfterFunc(ctx, func() { closer.Close() }) // on return at the latest (cancel)
	}
	member, err := serveReplica(ctx, cancel, s, conn, closer != nil)
	if parent.Err() != nil {
		err = parent.Err() // the connection failed because of it
	}
	return fmt.Errorf("osiris: %s: serve replica %q: %w", s.dir, member, err)
}

// serveReplica is ServeReplica after the setup; it returns the replica's
// name and why it ended. cancel cancels ctx; waitAcks says the
// acknowledgement reader ends when ctx does (conn is closed then).
func serveReplica(ctx context.Context, cancel context.CancelFunc, s *Stream, conn io.ReadWriter, waitAcks bool) (string, error) {
	br := bufio.NewReaderSize(conn, connBuffer)
	bw := bufio.NewWriterSize(conn, connBuffer)
	typ, p, buf, err := readFrame(br, nil)
	if err != nil {
		return "", err
	}
	var hello Hello
	if typ != FrameHello {
		return "", fmt.Errorf("%s frame first: %w", typ, ErrFrame)
	}
	if err := hello.ReadFrom(p); err != nil {
		return "", err
	}
	if e, mine := hello.History.LastEpoch(), s.Config().Epoch; e > mine {
		return hello.Member, fmt.Errorf("replica holds epoch %d, leader's is %d: %w", e, mine, ErrStaleEpoch)
	}
	lh, err := s.EpochHistory()
	if err != nil {
		return hello.Member, err
	}
	offset, reset := FollowPoint(lh, hello.History)
	if _, err := bw.Write(appendStart(nil, offset, reset)); err != nil {
		return hello.Member, err
	}
	if err := bw.Flush(); err != nil {
		return hello.Member, err
	}
	acks := make(chan error, 1)
	go pprof.Do(ctx, pprof.Labels("osiris-replica-acks", s.dir), func(context.Context) {
		acks <- s.readAcks(br, buf, hello.Member)
		cancel() // the replica went away: stop shipping
	})
	err = s.ship(ctx, bw, offset)
	cancel()
	if waitAcks {
		if ackErr := <-acks; errors.Is(err, context.Canceled) {
			err = ackErr // why ship was cancelled
		}
	}
	return hello.Member, err
}

// readAcks reads Ack frames and applies them until the connection fails.
func (s *Stream) readAcks(br *bufio.Reader, buf []byte, member string) error {
	for {
		typ, p, b, err := readFrame(br, buf)
		buf = b
		if err != nil {
			return err
		}
		if typ != FrameAck {
			return fmt.Errorf("%s frame from a replica: %w", typ, ErrFrame)
		}
		c, err := parseOffsetFrame(p, typ)
		if err != nil {
			return err
		}
		s.Acknowledge(member, c)
	}
}

// ship streams the written log from offset from, and the commit offset.
func (s *Stream) ship(ctx context.Context, bw *bufio.Writer, from uint64) error {
	sh := shipper{s: s}
	defer sh.close()
	if err := sh.seek(from); err != nil {
		return err
	}
	sent := int64(-2) // commit offset last sent
	var hdr []byte
	for {
		v := s.wtail.Load()
		commit, commitWake := s.repl.commitState()
		data, err := sh.read(v)
		if err != nil {
			return err
		}
		if len(data) > 0 {
			hdr = appendChunksHeader(hdr[:0], commit, len(data))
			if _, err := bw.Write(hdr); err != nil {
				return err
			}
			if _, err := bw.Write(data); err != nil {
				return err
			}
			sent = commit
			continue
		}
		moved, err := sh.moveOn(v)
		if err != nil {
			return err
		}
		if moved {
			continue
		}
		if commit != sent {
			if _, err := bw.Write(appendOffsetFrame(hdr[:0], FrameCommit, commit)); err != nil {
				return err
			}
			sent = commit
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		select {
		case <-v.wake:
		case <-commitWake:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return ErrClosed
		}
	}
}

// shipper reads the written log in order, whole chunks at a time.
type shipper struct {
	s   *Stream
	ref *segRef          // the segment being read, held
	seg *segment.Segment // its open segment
	pos int64            // next chunk position
	buf []byte
}

// seek positions the shipper at chunk id from, which must start a chunk
// of the written log or be its end.
func (sh *shipper) seek(from uint64) error {
	v := sh.s.wtail.Load()
	i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].base > from }) - 1
	if i < 0 {
		return fmt.Errorf("offset %d before the log's first %d: %w", from, v.segs[0].base, errSegmentRemoved)
	}
	seg, err := v.segs[i].acquire()
	if err != nil {
		return err
	}
	sh.ref, sh.seg, sh.pos = v.segs[i], seg, segment.FileHeaderSize
	last := i == len(v.segs)-1
	n := v.active.Count
	if !last {
		ext, _ := sh.ref.writtenExtent()
		n = ext.Count
	}
	j, err := seg.SearchOffset(n, from)
	if err != nil || j < 0 {
		return err
	}
	rec, err := seg.Record(j)
	switch {
	case err != nil:
		return err
	case rec.ChunkID == from:
		sh.pos = int64(rec.Pos)
	case last && from == v.next:
		sh.pos = v.active.Size
	default:
		return fmt.Errorf("offset %d inside chunk %d: %w", from, rec.ChunkID, ErrNotContiguous)
	}
	return nil
}

// end returns the written extent of the shipper's segment in v and
// whether it is the active one.
func (sh *shipper) end(v *written) (int64, bool) {
	if v.segs[len(v.segs)-1] == sh.ref {
		return v.active.Size, true
	}
	ext, ok := sh.ref.writtenExtent()
	if !ok {
		return sh.pos, false // an older view: nothing to read in it yet
	}
	return ext.Size, false
}

// read returns the whole chunks that follow in the shipper's segment, up
// to shipBytes (or one larger chunk); nothing at its written end. The
// bytes are valid until the next read.
func (sh *shipper) read(v *written) ([]byte, error) {
	end, _ := sh.end(v)
	if sh.pos >= end {
		return nil, nil
	}
	n := min(end-sh.pos, shipBytes)
	if int64(cap(sh.buf)) < n {
		sh.buf = make([]byte, n)
	}
	b := sh.buf[:n]
	if err := sh.seg.ReadAt(b, sh.pos); err != nil {
		return nil, err
	}
	off := int64(0)
	for off+segment.HeaderSize <= n {
		h, err := segment.ParseHeader(b[off:])
		if err != nil {
			return nil, fmt.Errorf("segment %d at %d: %w", sh.ref.base, sh.pos+off, err)
		}
		if off+h.Size() > n {
			if off == 0 {
				// One chunk larger than shipBytes: read it alone.
				if sh.pos+h.Size() > end {
					return nil, fmt.Errorf("segment %d: chunk at %d passes %d: %w", sh.ref.base, sh.pos, end, segment.ErrCorrupt)
				}
				b = make([]byte, h.Size())
				if err := sh.seg.ReadAt(b, sh.pos); err != nil {
					return nil, err
				}
				off = h.Size()
			}
			break
		}
		off += h.Size()
	}
	sh.pos += off
	return b[:off], nil
}

// moveOn moves the shipper to the next segment of v when it has read all
// of a segment the writer has moved on from, and reports whether it did.
func (sh *shipper) moveOn(v *written) (bool, error) {
	end, active := sh.end(v)
	if active || sh.pos < end {
		return false, nil
	}
	if _, rolled := sh.ref.writtenExtent(); !rolled {
		return false, nil
	}
	i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].base > sh.ref.base })
	if i == len(v.segs) {
		return false, nil
	}
	seg, err := v.segs[i].acquire()
	if err != nil {
		return false, err
	}
	sh.ref.release()
	sh.ref, sh.seg, sh.pos = v.segs[i], seg, segment.FileHeaderSize
	return true, nil
}

func (sh *shipper) close() {
	if sh.ref != nil {
		sh.ref.release()
		sh.ref = nil
	}
}

// Follow follows the leader at the other end of conn as the replica s:
// it says what its log holds, truncates or resets it as the leader
// answers, then appends the chunks the leader sends, acknowledging each
// frame's, and learns the commit offset, until ctx ends or the connection
// fails; then it returns why. The caller calls it again to reconnect
// (with a new connection to the same or a new leader). It closes conn
// when it returns if conn is an io.Closer.
func Follow(ctx context.Context, s *Stream, conn io.ReadWriter) error {
	if !s.isReplica() {
		return ErrNotReplica
	}
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if closer, ok := conn.(io.Closer); ok {
		context.AfterFunc(ctx, func() { closer.Close() }) // on return at the latest (cancel)
	}
	go func() {
		// The stream closing ends the exchange too.
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := follow(ctx, s, conn)
	select {
	case <-s.closed:
		err = ErrClosed
	default:
	}
	if parent.Err() != nil {
		err = parent.Err()
	}
	return fmt.Errorf("osiris: %s: follow: %w", s.dir, err)
}

func follow(ctx context.Context, s *Stream, conn io.ReadWriter) error {
	br := bufio.NewReaderSize(conn, connBuffer)
	bw := bufio.NewWriterSize(conn, connBuffer)
	h, err := s.EpochHistory()
	if err != nil {
		return err
	}
	hello := Hello{Member: s.repl.member, History: h}
	out := hello.AppendTo(nil)
	if _, err := bw.Write(out); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	typ, p, buf, err := readFrame(br, nil)
	if err != nil {
		return err
	}
	if typ != FrameStart {
		return fmt.Errorf("%s frame before start: %w", typ, ErrFrame)
	}
	offset, reset, err := parseStart(p)
	if err != nil {
		return err
	}
	if reset {
		err = s.ResetTo(offset)
	} else {
		err = s.TruncateTail(offset)
	}
	if err != nil {
		return err
	}
	ack := func(last int64) error {
		out = appendOffsetFrame(out[:0], FrameAck, last)
		if _, err := bw.Write(out); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := ack(s.lastWritten.Load()); err != nil {
		return err
	}
	for {
		if typ, p, buf, err = readFrame(br, buf); err != nil {
			return err
		}
		switch typ {
		case FrameChunks:
			commit, chunks, err := parseChunks(p)
			if err != nil {
				return err
			}
			s.repl.raiseLeaderCommit(commit)
			last, err := s.AppendChunks(chunks)
			if err != nil {
				return err
			}
			if err := ack(last); err != nil {
				return err
			}
		case FrameCommit:
			commit, err := parseOffsetFrame(p, typ)
			if err != nil {
				return err
			}
			if err := s.SetCommit(commit); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s frame from the leader: %w", typ, ErrFrame)
		}
	}
}
