package amqptab

import "errors"

// Sentinel errors. Errors wrap them with the operation and, where there
// is one, the table key or array element; callers classify with
// errors.Is. amqp/wire uses the same two, so a malformed table inside a
// method or content header classifies as the frame does.
var (
	// ErrMalformed marks bytes that do not decode: truncated or trailing
	// data, a length past its container, an unknown field-table tag, or
	// nesting deeper than MaxDepth.
	ErrMalformed = errors.New("amqptab: malformed data")

	// ErrFieldType marks a value that cannot be encoded: a Go type with
	// no field-table tag, a uint64 above math.MaxInt64, a table key
	// longer than 255 bytes, or nesting deeper than MaxDepth.
	ErrFieldType = errors.New("amqptab: value cannot be encoded")
)
