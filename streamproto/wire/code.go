package wire

import "fmt"

// Code is a response code. A Code is also an error, so that a client can
// tell a failed request's cause with errors.Is(err, CodeStreamAlreadyExists).
type Code uint16

// Response codes. These are part of the wire protocol.
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
	CodeAuthenticationLoopback     Code = 0x0b
	CodeVirtualHostAccessFailure   Code = 0x0c
	CodeUnknownFrame               Code = 0x0d
	CodeFrameTooLarge              Code = 0x0e
	CodeInternalError              Code = 0x0f
	CodeAccessRefused              Code = 0x10
	CodePreconditionFailed         Code = 0x11
	CodePublisherDoesNotExist      Code = 0x12
	CodeNoOffset                   Code = 0x13
)

var codeText = [...]string{
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
	CodeAuthenticationLoopback:     "sasl authentication failure loopback",
	CodeVirtualHostAccessFailure:   "virtual host access failure",
	CodeUnknownFrame:               "unknown frame",
	CodeFrameTooLarge:              "frame too large",
	CodeInternalError:              "internal error",
	CodeAccessRefused:              "access refused",
	CodePreconditionFailed:         "precondition failed",
	CodePublisherDoesNotExist:      "publisher does not exist",
	CodeNoOffset:                   "no offset",
}

// Error returns the code's name and number, such as
// "stream does not exist (code 0x02)".
func (c Code) Error() string {
	if int(c) < len(codeText) && codeText[c] != "" {
		return fmt.Sprintf("%s (code %#02x)", codeText[c], uint16(c))
	}
	return fmt.Sprintf("unknown response code %#02x", uint16(c))
}
