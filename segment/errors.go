package segment

import "errors"

// Errors returned by this package. Callers classify with errors.Is.
var (
	// ErrCorrupt marks data that fails a structural or checksum check.
	ErrCorrupt = errors.New("segment: corrupt data")
	// ErrInvalidEntry marks an entry that does not follow the entry format.
	ErrInvalidEntry = errors.New("segment: invalid entry")
	// ErrChunkFull is returned when an entry does not fit the chunk being built.
	ErrChunkFull = errors.New("segment: chunk full")
	// ErrClosed is returned by operations on a closed segment.
	ErrClosed = errors.New("segment: closed")
	// ErrReadOnly is returned by Append to a segment of an older format
	// version, whose chunk filters this code reads but no longer writes.
	ErrReadOnly = errors.New("segment: older format version, read-only")
)
