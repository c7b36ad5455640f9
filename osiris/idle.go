package osiris

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/warren-mq/warren/segment"
)

// Idle streams cost no goroutine and no open file.
//
// The writer role. Everything that changes the log runs with the writer
// role, which one party at a time holds (s.q.running says it is held):
// the writer goroutine while it runs, or, while the writer is idle, a
// caller that runs a request inline (TruncateBefore, SetRetention, the
// retention timer). Appenders queue their work under s.q; the first to
// find the role free claims it and starts the writer goroutine. The
// goroutine gives the role back when it has found nothing queued for
// Options.IdleTimeout: it first closes its hold on the active segment
// (suspend), whose files close unless a reader holds them, and keeps in
// memory all it needs to go on (the tail, the next offset, the tracking
// state), so the next write reopens the files without any recovery.
//
// Every holder of the role counts in s.wg; the role is claimed only under
// s.q and while the stream is open, so that Close, which marks the
// stream closed under s.q and then waits for s.wg, knows that nobody
// holds it afterwards.

// idleBufBytes is the largest chunk buffer an idle writer keeps.
const idleBufBytes = 64 << 10

// claimWriterLocked takes the writer role if it is free and reports
// whether it did.
// REQUIRES: s.q held, the stream not closed.
func (s *Stream) claimWriterLocked() bool {
	if s.q.running {
		return false
	}
	s.q.running = true
	s.wg.Add(1)
	return true
}

// pendingLocked reports whether work is queued for the writer.
// REQUIRES: s.q held.
func (s *Stream) pendingLocked() bool {
	return len(s.q.batches) > 0 || len(s.q.offsets) > 0 || s.q.state.set || len(s.q.requests) > 0
}

// notify wakes the writer after work was queued: it starts the writer
// goroutine when the queuer claimed the role (start) and signals it.
func (s *Stream) notify(start bool) {
	if start {
		s.startWriter()
	}
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// startWriter starts the writer goroutine, which takes over a role
// already claimed (and counted in s.wg) for it.
func (s *Stream) startWriter() {
	go pprof.Do(context.Background(), pprof.Labels("osiris-writer", s.dir), func(context.Context) { s.w.run() })
}

// releaseWriter gives back a role claimed for inline work, handing it to
// a new writer goroutine if work was queued meanwhile.
func (s *Stream) releaseWriter() {
	s.q.Lock()
	start := s.pendingLocked()
	if start {
		s.wg.Add(1) // the goroutine's count; this one's goes below
	} else {
		s.q.running = false
	}
	s.q.Unlock()
	if start {
		s.notify(true)
	}
	s.wg.Done()
}

// goIdle suspends the writer and gives the role back unless work arrived
// meanwhile; it reports whether the writer goroutine is to exit. Called by
// the writer goroutine when its idle timer finds it had nothing to do.
func (w *writer) goIdle() bool {
	w.suspend()
	q := &w.s.q
	q.Lock()
	defer q.Unlock()
	if q.closed || w.s.pendingLocked() {
		return false // the loop takes it; the next cycle resumes
	}
	q.running = false
	w.s.idles.Add(1)
	return true
}

// suspend lets go of the active segment: its files close unless a reader
// holds them. Unsynced data is synced first when the policy promised a
// sync (FsyncInterval); under FsyncNone it stays for Close to sync.
func (w *writer) suspend() {
	if w.dirty && w.werr == nil && w.s.cfg.Load().Fsync != FsyncNone {
		w.sync()
	}
	if cap(w.buf) > idleBufBytes && len(w.buf) == 0 && !w.open {
		// Do not keep a burst's chunk buffer (up to flushBytes) per idle
		// stream; the builder aliases it.
		w.buf, w.b = nil, segment.Builder{}
	}
	if w.active == nil {
		return
	}
	w.idleTail = w.active.Tail()
	w.active = nil
	w.activeRef.release()
}

// resume takes the active segment back after suspend, reopening its files
// if nobody held them. The reopened files must end where the writer left
// them; anything else is outside damage, and the writer stops.
func (w *writer) resume() error {
	if w.werr != nil {
		return w.werr
	}
	if w.active != nil {
		return nil
	}
	seg, err := w.activeRef.acquire()
	if err != nil {
		// Not sticky: running out of file descriptors passes.
		return fmt.Errorf("osiris: %s: reopen active segment: %w", w.s.dir, err)
	}
	if got := seg.Tail(); got != w.idleTail {
		w.activeRef.release()
		w.werr = fmt.Errorf("osiris: %s: segment %d reopened with %d bytes, %d chunks; want %d, %d: %w",
			w.s.dir, w.activeRef.base, got.Size, got.Count, w.idleTail.Size, w.idleTail.Count, segment.ErrCorrupt)
		return w.werr
	}
	w.active = seg
	return nil
}

// activeTail is the extent of the active segment, open or not.
func (w *writer) activeTail() segment.Tail {
	if w.active != nil {
		return w.active.Tail()
	}
	return w.idleTail
}

// syncFiles fsyncs the files at paths.
func syncFiles(paths ...string) error {
	var errs []error
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("osiris: sync %s: %w", p, err))
			continue
		}
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("osiris: sync %s: %w", p, err))
		}
		f.Close()
	}
	return errors.Join(errs...)
}
