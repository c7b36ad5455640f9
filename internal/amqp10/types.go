package amqp10

import (
	"errors"
	"fmt"
)

// Errors of the codec.
var (
	// ErrMalformed marks bytes that are not a valid encoding: truncated,
	// an unknown constructor, a count that does not fit, nesting deeper
	// than MaxDepth.
	ErrMalformed = errors.New("amqp10: malformed")
	// ErrUnsupported marks a Go value with no AMQP 1.0 encoding.
	ErrUnsupported = errors.New("amqp10: unsupported value")
)

// Constructor codes of the AMQP 1.0 type system (core §1.6). These
// constants are part of the wire format and must not be changed.
const (
	codeDescribed  = 0x00
	codeNull       = 0x40 // null
	codeTrue       = 0x41 // boolean true, no value byte
	codeFalse      = 0x42 // boolean false, no value byte
	codeUint0      = 0x43 // uint 0
	codeUlong0     = 0x44 // ulong 0
	codeList0      = 0x45 // empty list
	codeUbyte      = 0x50 // u8
	codeByte       = 0x51 // i8
	codeSmallUint  = 0x52 // uint in u8
	codeSmallUlong = 0x53 // ulong in u8
	codeSmallInt   = 0x54 // int in i8
	codeSmallLong  = 0x55 // long in i8
	codeBool       = 0x56 // boolean: u8 0 or 1
	codeUshort     = 0x60 // u16
	codeShort      = 0x61 // i16
	codeUint       = 0x70 // u32
	codeInt        = 0x71 // i32
	codeFloat      = 0x72 // IEEE 754 binary32
	codeChar       = 0x73 // UTF-32BE code point
	codeDecimal32  = 0x74 // IEEE 754 decimal32
	codeUlong      = 0x80 // u64
	codeLong       = 0x81 // i64
	codeDouble     = 0x82 // IEEE 754 binary64
	codeTimestamp  = 0x83 // i64 milliseconds since the Unix epoch
	codeDecimal64  = 0x84 // IEEE 754 decimal64
	codeDecimal128 = 0x94 // IEEE 754 decimal128
	codeUUID       = 0x98 // 16 bytes
	codeVbin8      = 0xa0 // u8 size + bytes
	codeStr8       = 0xa1 // u8 size + UTF-8
	codeSym8       = 0xa3 // u8 size + ASCII
	codeVbin32     = 0xb0 // u32 size + bytes
	codeStr32      = 0xb1 // u32 size + UTF-8
	codeSym32      = 0xb3 // u32 size + ASCII
	codeList8      = 0xc0 // u8 size + u8 count + items
	codeMap8       = 0xc1 // u8 size + u8 count + keys and values
	codeList32     = 0xd0 // u32 size + u32 count + items
	codeMap32      = 0xd1 // u32 size + u32 count + keys and values
	codeArray8     = 0xe0 // u8 size + u8 count + constructor + values
	codeArray32    = 0xf0 // u32 size + u32 count + constructor + values
)

// Section descriptor codes (core §3.2; domain 0x00000000). These constants
// are part of the wire format and must not be changed.
const (
	DescHeader                = 0x70 // amqp:header:list
	DescDeliveryAnnotations   = 0x71 // amqp:delivery-annotations:map
	DescMessageAnnotations    = 0x72 // amqp:message-annotations:map
	DescProperties            = 0x73 // amqp:properties:list
	DescApplicationProperties = 0x74 // amqp:application-properties:map
	DescData                  = 0x75 // amqp:data:binary
	DescAMQPSequence          = 0x76 // amqp:amqp-sequence:list
	DescAMQPValue             = 0x77 // amqp:amqp-value:*
	DescFooter                = 0x78 // amqp:footer:map
)

// sectionSymbols are the symbolic descriptors of the sections, which a
// sender may use instead of the codes.
var sectionSymbols = map[string]uint64{
	"amqp:header:list":                DescHeader,
	"amqp:delivery-annotations:map":   DescDeliveryAnnotations,
	"amqp:message-annotations:map":    DescMessageAnnotations,
	"amqp:properties:list":            DescProperties,
	"amqp:application-properties:map": DescApplicationProperties,
	"amqp:data:binary":                DescData,
	"amqp:amqp-sequence:list":         DescAMQPSequence,
	"amqp:amqp-value:*":               DescAMQPValue,
	"amqp:footer:map":                 DescFooter,
}

// MaxDepth bounds the nesting of compound values (a top-level value is
// depth 1). Deeper data is malformed when decoded and unsupported when
// encoded.
const MaxDepth = 64

// Go representation of AMQP 1.0 values, decoded and encoded:
//
//	null nil              boolean bool         ubyte uint8
//	ushort uint16         uint uint32          ulong uint64
//	byte int8             short int16          int int32
//	long int64            float float32        double float64
//	decimal32 Decimal32   decimal64 Decimal64  decimal128 Decimal128
//	char Char             timestamp Timestamp  uuid UUID
//	binary []byte         string string        symbol Symbol
//	list []any            map Map              array Array
//	described Described
//
// AppendValue also takes int (as long).

// Symbol is an AMQP symbol: an ASCII name.
type Symbol string

// Timestamp is an AMQP timestamp: milliseconds since the Unix epoch.
type Timestamp int64

// UUID is an AMQP uuid (RFC 4122 byte order).
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 lower-case hex form.
func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Char is an AMQP char: a Unicode code point.
type Char rune

// Decimal32, Decimal64 and Decimal128 are IEEE 754 decimals, kept as
// their encoded bytes.
type (
	Decimal32  [4]byte
	Decimal64  [8]byte
	Decimal128 [16]byte
)

// Map is an AMQP map in encoded order. Keys may repeat on the wire; the
// lookups find the first.
type Map []MapEntry

// MapEntry is one key and its value.
type MapEntry struct {
	Key   any
	Value any
}

// Symbol returns the value of the first entry whose key is the symbol
// name.
func (m Map) Symbol(name string) (any, bool) {
	for _, e := range m {
		if k, ok := e.Key.(Symbol); ok && string(k) == name {
			return e.Value, true
		}
	}
	return nil, false
}

// String returns the value of the first entry whose key is the string
// name.
func (m Map) String(name string) (any, bool) {
	for _, e := range m {
		if k, ok := e.Key.(string); ok && k == name {
			return e.Value, true
		}
	}
	return nil, false
}

// Array is an AMQP array: values that share one constructor. The encoder
// takes the constructor from the first element (all must have its Go
// type); an empty array is encoded with the null constructor.
type Array []any

// Described is a value with a descriptor (a Symbol or a uint64 code).
type Described struct {
	Descriptor any
	Value      any
}
