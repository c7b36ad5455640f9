package leanstream

import (
	"encoding/binary"
	"fmt"
)

// Command keys of the stream protocol (PROTOCOL.adoc). A response carries
// its request's key with the top bit set.
const (
	keyDeclarePublisher uint16 = 0x0001
	keyPublish          uint16 = 0x0002
	keyPublishConfirm   uint16 = 0x0003
	keyPublishError     uint16 = 0x0004
	keyDeletePublisher  uint16 = 0x0006
	keySubscribe        uint16 = 0x0007
	keyDeliver          uint16 = 0x0008
	keyCredit           uint16 = 0x0009
	keyUnsubscribe      uint16 = 0x000c
	keyCreate           uint16 = 0x000d
	keyDelete           uint16 = 0x000e
	keyMetadataUpdate   uint16 = 0x0010
	keyPeerProperties   uint16 = 0x0011
	keySaslHandshake    uint16 = 0x0012
	keySaslAuthenticate uint16 = 0x0013
	keyTune             uint16 = 0x0014
	keyOpen             uint16 = 0x0015
	keyClose            uint16 = 0x0016
	keyHeartbeat        uint16 = 0x0017
	keyConsumerUpdate   uint16 = 0x001a

	responseBit uint16 = 0x8000
)

// Code is a stream protocol response code. A Code is also an error, so
// that errors.Is(err, CodeStreamAlreadyExists) tells a ResponseError's
// cause.
type Code uint16

// Response codes (PROTOCOL.adoc).
const (
	CodeOK                         Code = 0x01
	CodeStreamDoesNotExist         Code = 0x02
	CodeSubscriptionIDExists       Code = 0x03
	CodeSubscriptionIDDoesNotExist Code = 0x04
	CodeStreamAlreadyExists        Code = 0x05
	CodeStreamNotAvailable         Code = 0x06
	CodeSASLMechanismNotSupported  Code = 0x07
	CodeAuthenticationFailure      Code = 0x08
	CodeSASLError                  Code = 0x09
	CodeSASLChallenge              Code = 0x0a
	CodeSASLAuthFailureLoopback    Code = 0x0b
	CodeVirtualHostAccessFailure   Code = 0x0c
	CodeUnknownFrame               Code = 0x0d
	CodeFrameTooLarge              Code = 0x0e
	CodeInternalError              Code = 0x0f
	CodeAccessRefused              Code = 0x10
	CodePreconditionFailed         Code = 0x11
	CodePublisherDoesNotExist      Code = 0x12
	CodeNoOffset                   Code = 0x13
)

var codeText = map[Code]string{
	CodeOK:                         "ok",
	CodeStreamDoesNotExist:         "stream does not exist",
	CodeSubscriptionIDExists:       "subscription id already exists",
	CodeSubscriptionIDDoesNotExist: "subscription id does not exist",
	CodeStreamAlreadyExists:        "stream already exists",
	CodeStreamNotAvailable:         "stream not available",
	CodeSASLMechanismNotSupported:  "sasl mechanism not supported",
	CodeAuthenticationFailure:      "authentication failure",
	CodeSASLError:                  "sasl error",
	CodeSASLChallenge:              "sasl challenge",
	CodeSASLAuthFailureLoopback:    "sasl authentication failure loopback",
	CodeVirtualHostAccessFailure:   "virtual host access failure",
	CodeUnknownFrame:               "unknown frame",
	CodeFrameTooLarge:              "frame too large",
	CodeInternalError:              "internal error",
	CodeAccessRefused:              "access refused",
	CodePreconditionFailed:         "precondition failed",
	CodePublisherDoesNotExist:      "publisher does not exist",
	CodeNoOffset:                   "no offset",
}

// Error returns the code's name and number.
func (c Code) Error() string {
	if s, ok := codeText[c]; ok {
		return fmt.Sprintf("%s (code %#02x)", s, uint16(c))
	}
	return fmt.Sprintf("unknown response code %#02x", uint16(c))
}

// ResponseError is a response with a code other than OK.
type ResponseError struct {
	Op   string // the request, such as "create stream \"s\""
	Code Code
}

func (e *ResponseError) Error() string { return "leanstream: " + e.Op + ": " + e.Code.Error() }

// Unwrap returns the Code, for errors.Is.
func (e *ResponseError) Unwrap() error { return e.Code }

// Appenders for big-endian protocol types.

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// appendString appends a protocol string (int16 length + bytes).
func appendString(b []byte, s string) []byte {
	b = appendU16(b, uint16(len(s)))
	return append(b, s...)
}

// appendBytes appends protocol bytes (int32 length + bytes).
func appendBytes(b []byte, p []byte) []byte {
	b = appendU32(b, uint32(len(p)))
	return append(b, p...)
}

// appendMap appends a protocol map (int32 count + string pairs).
func appendMap(b []byte, m map[string]string) []byte {
	b = appendU32(b, uint32(len(m)))
	for k, v := range m {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return b
}

// beginFrame appends a size placeholder, key and version; finishFrame
// fills in the size once the body is complete.
func beginFrame(b []byte, key, version uint16) (out []byte, start int) {
	start = len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendU16(b, key)
	return appendU16(b, version), start
}

func finishFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// decoder reads protocol types from a frame body. The first read past the
// end sets err; later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("leanstream: truncated frame reading %s", what)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail(what)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8(what string) uint8 {
	if p := d.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16(what string) uint16 {
	if p := d.take(2, what); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// str reads a protocol string; the null string (-1) reads as "".
func (d *decoder) str(what string) string {
	n := int16(d.u16(what))
	if n <= 0 {
		return ""
	}
	return string(d.take(int(n), what))
}

// strings reads an array of strings.
func (d *decoder) strings(what string) []string {
	n := int32(d.u32(what))
	if n < 0 || int(n) > len(d.b)/2 {
		if n != 0 {
			d.fail(what)
		}
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, d.str(what))
	}
	return out
}

// strMap reads a protocol map.
func (d *decoder) strMap(what string) map[string]string {
	n := int32(d.u32(what))
	if n < 0 || int(n) > len(d.b)/4 {
		if n != 0 {
			d.fail(what)
		}
		return nil
	}
	out := make(map[string]string, n)
	for range n {
		k := d.str(what)
		out[k] = d.str(what)
	}
	return out
}
