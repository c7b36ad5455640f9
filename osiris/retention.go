package osiris

import (
	"errors"
	"io/fs"
)

// enforceRetention deletes whole segments, oldest first, that exceed the
// size limit or whose newest chunk is older than the age limit. The active
// segment is never deleted. Runs on the writer goroutine.
func (w *writer) enforceRetention() error {
	cfg := w.s.cfg.Load()
	if cfg.MaxLengthBytes <= 0 && cfg.MaxAge <= 0 {
		return nil
	}
	n := len(w.segs) - 1 // candidates: all but the active segment
	drop := 0
	var errs []error
	if cfg.MaxLengthBytes > 0 {
		// Keep the newest segments whose total fits; drop the rest.
		total, err := w.active.Size(), error(nil)
		for i := n - 1; i >= 0; i-- {
			var size int64
			if size, err = w.segs[i].fileSize(); err != nil {
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
		cutoff := w.s.opts.Now().Add(-cfg.MaxAge).UnixMilli()
		for i := drop; i < n; i++ {
			ts, err := w.segs[i].lastTimestamp()
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
	if drop == 0 {
		return errors.Join(errs...)
	}
	removed := w.segs[:drop]
	w.segs = append([]*segRef(nil), w.segs[drop:]...)
	for _, r := range removed {
		if err := r.remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	w.s.opts.Logger.Info("osiris: retention deleted segments", "dir", w.s.dir, "segments", len(removed),
		"first_offset", w.segs[0].base)
	w.publish()
	return errors.Join(errs...)
}
