package osiris

import (
	"errors"
	"io/fs"
	"time"
)

// enforceRetention deletes whole segments, oldest first, that exceed the
// size limit or whose newest chunk is older than the age limit. The active
// segment is never deleted. Runs with the writer role.
func (w *writer) enforceRetention() error {
	cfg := w.s.cfg.Load()
	drop, err := retentionDrop(cfg, w.segs, w.activeTail().Size, w.s.opts.Now())
	if drop == 0 {
		return err
	}
	errs := []error{err, w.dropOldest(drop)}
	w.s.opts.Logger.Info("osiris: retention deleted segments", "dir", w.s.dir, "segments", drop,
		"first_offset", w.segs[0].base)
	return errors.Join(errs...)
}

// dropOldest deletes the oldest drop segments. Readers see a tail without
// them before any is removed: a reader that finds its segment removed
// looks again at the tail (Reader.unpark, a few times) and must then find
// the segments that are kept. Removing first let a reader starved of CPU
// find the removed segment in every tail it looked at, and fail.
func (w *writer) dropOldest(drop int) error {
	if w.s.repl != nil {
		// Only what is committed (and so sealed) goes.
		drop = min(drop, w.committedSegs()-1)
		if drop <= 0 {
			return nil
		}
	}
	removed := w.segs[:drop]
	w.segs = append([]*segRef(nil), w.segs[drop:]...)
	w.publish()
	if w.s.repl != nil {
		w.publishWritten()
	}
	var errs []error
	for _, r := range removed {
		if w.s.removeHook != nil {
			w.s.removeHook(r.base)
		}
		size, _ := r.fileSize()
		if err := r.remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		Metrics.RetentionSegments.Add(1)
		Metrics.RetentionBytes.Add(uint64(size))
	}
	return errors.Join(errs...)
}

// retentionDrop returns how many of segs, oldest first, the limits of cfg
// delete at now; the last of segs is the active one, activeSize bytes
// long, and always stays. It reads only what sealed segments remember
// (sizes and newest timestamps) once they have been looked at, so that
// checking an idle stream opens no file.
func retentionDrop(cfg *Config, segs []*segRef, activeSize int64, now time.Time) (int, error) {
	if cfg.MaxLengthBytes <= 0 && cfg.MaxAge <= 0 {
		return 0, nil
	}
	n := len(segs) - 1 // candidates: all but the active segment
	drop := 0
	var errs []error
	if cfg.MaxLengthBytes > 0 {
		// Keep the newest segments whose total fits; drop the rest.
		total := activeSize
		for i := n - 1; i >= 0; i-- {
			size, err := segs[i].fileSize()
			if err != nil {
				errs = append(errs, err)
				break
			}
			total += size
			if total > cfg.MaxLengthBytes {
				drop = i + 1
				break
			}
		}
	}
	if cfg.MaxAge > 0 {
		cutoff := now.Add(-cfg.MaxAge).UnixMilli()
		for i := drop; i < n; i++ {
			ts, err := segs[i].lastTimestamp()
			if err != nil {
				errs = append(errs, err)
				break
			}
			if ts >= cutoff {
				break
			}
			drop = i + 1
		}
	}
	return drop, errors.Join(errs...)
}

// retentionTick is the retention timer (Options.RetentionInterval). It
// costs no goroutine between ticks, and it takes the writer role only when
// retention has something to delete, so an idle stream stays idle.
func (s *Stream) retentionTick() {
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return
	}
	s.wg.Add(1) // Close waits for the tick
	s.q.Unlock()
	defer s.wg.Done()

	if s.retentionDue() {
		var err error
		if e := s.do(func() { err = s.w.enforceRetention() }); e == nil && err != nil {
			s.opts.Logger.Error("osiris: retention", "dir", s.dir, "err", err)
		}
	}
	s.q.Lock()
	if !s.q.closed {
		s.retention.Reset(s.opts.RetentionInterval)
	}
	s.q.Unlock()
}

// retentionDue reports whether enforceRetention would delete a segment
// (or fail, so that the failure is logged), judging by the published tail.
func (s *Stream) retentionDue() bool {
	t := s.tail.Load()
	if len(t.segs) < 2 {
		return false
	}
	drop, err := retentionDrop(s.cfg.Load(), t.segs, t.active.Size, s.opts.Now())
	return drop > 0 || err != nil
}
