package frame

import (
	"errors"

	"github.com/warren-mq/warren/internal/amqp10"
)

// Errors of the codec. A front end closes the connection with the
// condition ConditionOf gives: amqp:connection:framing-error for
// ErrFraming, amqp:decode-error for ErrDecode.
var (
	// ErrFraming marks bytes that are not a frame: a size below 8, a data
	// offset below 2 or beyond the frame, a frame larger than the
	// negotiated maximum (ErrFrameTooLarge), an unknown frame type.
	ErrFraming = errors.New("amqp10/frame: framing error")
	// ErrFrameTooLarge marks a frame larger than the maximum frame size.
	// It wraps ErrFraming.
	ErrFrameTooLarge = errors.New("amqp10/frame: frame too large")
	// ErrDecode marks a frame body that does not decode: a malformed
	// value, an unknown descriptor, a field of the wrong type, a missing
	// mandatory field, bytes after a performative that takes no payload.
	ErrDecode = errors.New("amqp10/frame: decode error")
	// ErrNotAMQP marks a protocol header that does not start with "AMQP".
	ErrNotAMQP = errors.New("amqp10/frame: not an AMQP protocol header")
)

// Descriptor codes of the performatives, the types they carry and the
// SASL frames (core §2.7, §2.8, §3.4, §3.5, §5.3; domain 0x00000000).
// These constants are part of the wire format and must not be changed.
const (
	CodeOpen        = 0x10 // amqp:open:list
	CodeBegin       = 0x11 // amqp:begin:list
	CodeAttach      = 0x12 // amqp:attach:list
	CodeFlow        = 0x13 // amqp:flow:list
	CodeTransfer    = 0x14 // amqp:transfer:list
	CodeDisposition = 0x15 // amqp:disposition:list
	CodeDetach      = 0x16 // amqp:detach:list
	CodeEnd         = 0x17 // amqp:end:list
	CodeClose       = 0x18 // amqp:close:list

	CodeError = 0x1d // amqp:error:list

	CodeReceived = 0x23 // amqp:received:list
	CodeAccepted = 0x24 // amqp:accepted:list
	CodeRejected = 0x25 // amqp:rejected:list
	CodeReleased = 0x26 // amqp:released:list
	CodeModified = 0x27 // amqp:modified:list

	CodeSource = 0x28 // amqp:source:list
	CodeTarget = 0x29 // amqp:target:list

	CodeDeleteOnClose             = 0x2b // amqp:delete-on-close:list
	CodeDeleteOnNoLinks           = 0x2c // amqp:delete-on-no-links:list
	CodeDeleteOnNoMessages        = 0x2d // amqp:delete-on-no-messages:list
	CodeDeleteOnNoLinksOrMessages = 0x2e // amqp:delete-on-no-links-or-messages:list

	CodeCoordinator = 0x30 // amqp:coordinator:list (transactions, §4.5)

	CodeSASLMechanisms = 0x40 // amqp:sasl-mechanisms:list
	CodeSASLInit       = 0x41 // amqp:sasl-init:list
	CodeSASLChallenge  = 0x42 // amqp:sasl-challenge:list
	CodeSASLResponse   = 0x43 // amqp:sasl-response:list
	CodeSASLOutcome    = 0x44 // amqp:sasl-outcome:list
)

// symbolCodes maps the symbolic descriptors, which a peer may send
// instead of the codes, to the codes.
var symbolCodes = map[string]uint64{
	"amqp:open:list":        CodeOpen,
	"amqp:begin:list":       CodeBegin,
	"amqp:attach:list":      CodeAttach,
	"amqp:flow:list":        CodeFlow,
	"amqp:transfer:list":    CodeTransfer,
	"amqp:disposition:list": CodeDisposition,
	"amqp:detach:list":      CodeDetach,
	"amqp:end:list":         CodeEnd,
	"amqp:close:list":       CodeClose,
	"amqp:error:list":       CodeError,
	"amqp:received:list":    CodeReceived,
	"amqp:accepted:list":    CodeAccepted,
	"amqp:rejected:list":    CodeRejected,
	"amqp:released:list":    CodeReleased,
	"amqp:modified:list":    CodeModified,
	"amqp:source:list":      CodeSource,
	"amqp:target:list":      CodeTarget,

	"amqp:delete-on-close:list":                CodeDeleteOnClose,
	"amqp:delete-on-no-links:list":             CodeDeleteOnNoLinks,
	"amqp:delete-on-no-messages:list":          CodeDeleteOnNoMessages,
	"amqp:delete-on-no-links-or-messages:list": CodeDeleteOnNoLinksOrMessages,
	"amqp:coordinator:list":                    CodeCoordinator,

	"amqp:sasl-mechanisms:list": CodeSASLMechanisms,
	"amqp:sasl-init:list":       CodeSASLInit,
	"amqp:sasl-challenge:list":  CodeSASLChallenge,
	"amqp:sasl-response:list":   CodeSASLResponse,
	"amqp:sasl-outcome:list":    CodeSASLOutcome,
}

// Error conditions (core §2.8.15-§2.8.18).
const (
	CondInternalError         amqp10.Symbol = "amqp:internal-error"
	CondNotFound              amqp10.Symbol = "amqp:not-found"
	CondUnauthorizedAccess    amqp10.Symbol = "amqp:unauthorized-access"
	CondDecodeError           amqp10.Symbol = "amqp:decode-error"
	CondResourceLimitExceeded amqp10.Symbol = "amqp:resource-limit-exceeded"
	CondNotAllowed            amqp10.Symbol = "amqp:not-allowed"
	CondInvalidField          amqp10.Symbol = "amqp:invalid-field"
	CondNotImplemented        amqp10.Symbol = "amqp:not-implemented"
	CondResourceLocked        amqp10.Symbol = "amqp:resource-locked"
	CondPreconditionFailed    amqp10.Symbol = "amqp:precondition-failed"
	CondResourceDeleted       amqp10.Symbol = "amqp:resource-deleted"
	CondIllegalState          amqp10.Symbol = "amqp:illegal-state"
	CondFrameSizeTooSmall     amqp10.Symbol = "amqp:frame-size-too-small"

	CondConnectionForced amqp10.Symbol = "amqp:connection:forced"
	CondFramingError     amqp10.Symbol = "amqp:connection:framing-error"
	CondRedirect         amqp10.Symbol = "amqp:connection:redirect"

	CondWindowViolation  amqp10.Symbol = "amqp:session:window-violation"
	CondErrantLink       amqp10.Symbol = "amqp:session:errant-link"
	CondHandleInUse      amqp10.Symbol = "amqp:session:handle-in-use"
	CondUnattachedHandle amqp10.Symbol = "amqp:session:unattached-handle"

	CondDetachForced          amqp10.Symbol = "amqp:link:detach-forced"
	CondTransferLimitExceeded amqp10.Symbol = "amqp:link:transfer-limit-exceeded"
	CondMessageSizeExceeded   amqp10.Symbol = "amqp:link:message-size-exceeded"
	CondLinkRedirect          amqp10.Symbol = "amqp:link:redirect"
	CondStolen                amqp10.Symbol = "amqp:link:stolen"
)

// ConditionOf is the condition a connection closes with after err from
// the codec: framing-error, decode-error, or internal-error for others.
func ConditionOf(err error) amqp10.Symbol {
	switch {
	case errors.Is(err, ErrFraming):
		return CondFramingError
	case errors.Is(err, ErrDecode):
		return CondDecodeError
	}
	return CondInternalError
}

// Spec defaults of the fields a decoder fills in when they are absent.
const (
	DefaultMaxFrameSize = 4294967295 // open.max-frame-size
	DefaultChannelMax   = 65535      // open.channel-max
	DefaultHandleMax    = 4294967295 // begin.handle-max
	// MinMaxFrameSize is the largest frame a peer must accept before
	// open: every max-frame-size is at least this.
	MinMaxFrameSize = 512
)

// Role is a link endpoint's role (attach.role, disposition.role).
type Role bool

// Roles, as encoded.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// SenderSettleMode is attach.snd-settle-mode.
type SenderSettleMode uint8

// Sender settle modes, as encoded. Mixed is the default.
const (
	SndUnsettled SenderSettleMode = 0
	SndSettled   SenderSettleMode = 1
	SndMixed     SenderSettleMode = 2
)

// ReceiverSettleMode is attach.rcv-settle-mode and transfer.rcv-settle-mode.
type ReceiverSettleMode uint8

// Receiver settle modes, as encoded. First is the default.
const (
	RcvFirst  ReceiverSettleMode = 0
	RcvSecond ReceiverSettleMode = 1
)

// Terminus durability (source.durable, target.durable), as encoded.
const (
	DurableNone          = 0
	DurableConfiguration = 1
	DurableUnsettled     = 2
)

// Terminus expiry policies (source.expiry-policy, target.expiry-policy).
// Session-end is the default.
const (
	ExpiryLinkDetach amqp10.Symbol = "link-detach"
	ExpirySessionEnd amqp10.Symbol = "session-end"
	ExpiryConnClose  amqp10.Symbol = "connection-close"
	ExpiryNever      amqp10.Symbol = "never"
)

// LifetimePolicy returns the code of a lifetime policy (the value of a
// dynamic node's "lifetime-policy" property): one of CodeDeleteOnClose
// to CodeDeleteOnNoLinksOrMessages, or false.
func LifetimePolicy(v any) (uint64, bool) {
	d, ok := v.(amqp10.Described)
	if !ok {
		return 0, false
	}
	var code uint64
	switch desc := d.Descriptor.(type) {
	case uint64:
		code = desc
	case amqp10.Symbol:
		code = symbolCodes[string(desc)]
	}
	if code < CodeDeleteOnClose || code > CodeDeleteOnNoLinksOrMessages {
		return 0, false
	}
	return code, true
}

// AppendLifetimePolicy appends the lifetime policy with code (an empty
// described list).
func AppendLifetimePolicy(dst []byte, code uint64) []byte {
	return append(amqp10.AppendDescriptor(dst, code), cList0)
}

// Error is an AMQP error (core §2.8.14), carried by detach, end, close
// and rejected.
type Error struct {
	Condition   amqp10.Symbol // mandatory
	Description string
	Info        amqp10.Map // fields
}

// Error formats e as "condition: description".
func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return string(e.Condition) + ": " + e.Description
}

func (e *Error) decode(d *dec) {
	if code, _ := d.descriptor(); d.err == nil && code != CodeError {
		d.failf("descriptor 0x%x where an error is due", code)
		return
	}
	l := d.list()
	e.Condition = d.symbol(&l, "condition", true, "")
	e.Description = d.str(&l, "description", false)
	e.Info = d.fields(&l, "info", true, false)
	d.close(&l)
}

// AppendTo appends e.
func (e *Error) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeError)
	dst = l.present(amqp10.AppendSymbol(dst, string(e.Condition)))
	dst, err := l.str(dst, e.Description, false)
	if err != nil {
		return dst, err
	}
	if dst, err = l.value(dst, e.Info); err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// errorField reads an optional error field.
func (d *dec) errorField(l *list, field string) *Error {
	if !d.next(l, field, false) {
		return nil
	}
	e := &Error{}
	e.decode(d)
	if d.err != nil {
		return nil
	}
	return e
}

func (e *enc) errorField(dst []byte, v *Error) ([]byte, error) {
	if v == nil {
		return e.null(dst), nil
	}
	dst, err := v.AppendTo(dst)
	if err != nil {
		return dst, err
	}
	return e.present(dst), nil
}

// DeliveryState is the state of a delivery (core §3.4): Received, or an
// outcome (Accepted, Rejected, Released, Modified), or another state
// kept as it came (OtherState: a transactional state, §4.5.5).
type DeliveryState interface {
	// AppendTo appends the state as a described list.
	AppendTo(dst []byte) ([]byte, error)
	isDeliveryState()
}

// Received is the received state (0x23): how much of a message arrived,
// for resuming a delivery.
type Received struct {
	SectionNumber uint32 // mandatory
	SectionOffset uint64 // mandatory
}

// Accepted is the accepted outcome (0x24).
type Accepted struct{}

// Rejected is the rejected outcome (0x25): the message is invalid.
type Rejected struct {
	Error *Error
}

// Released is the released outcome (0x26): the message was not (and will
// not be) processed.
type Released struct{}

// Modified is the modified outcome (0x27): released, with changes.
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations amqp10.Map // fields
}

// OtherState is a delivery state of another descriptor, decoded as a
// value.
type OtherState amqp10.Described

func (Received) isDeliveryState()   {}
func (Accepted) isDeliveryState()   {}
func (Rejected) isDeliveryState()   {}
func (Released) isDeliveryState()   {}
func (Modified) isDeliveryState()   {}
func (OtherState) isDeliveryState() {}

// AppendTo appends s.
func (s Received) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeReceived)
	dst = l.uint(dst, s.SectionNumber, true)
	dst = l.ulong(dst, s.SectionOffset, true)
	return l.end(dst), nil
}

// AppendTo appends s.
func (Accepted) AppendTo(dst []byte) ([]byte, error) {
	return append(amqp10.AppendDescriptor(dst, CodeAccepted), cList0), nil
}

// AppendTo appends s.
func (s Rejected) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeRejected)
	dst, err := l.errorField(dst, s.Error)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// AppendTo appends s.
func (Released) AppendTo(dst []byte) ([]byte, error) {
	return append(amqp10.AppendDescriptor(dst, CodeReleased), cList0), nil
}

// AppendTo appends s.
func (s Modified) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeModified)
	dst = l.boolean(dst, s.DeliveryFailed)
	dst = l.boolean(dst, s.UndeliverableHere)
	dst, err := l.value(dst, s.MessageAnnotations)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// AppendTo appends s.
func (s OtherState) AppendTo(dst []byte) ([]byte, error) {
	return amqp10.AppendValue(dst, amqp10.Described(s))
}

// state reads a delivery state field (transfer.state, disposition.state,
// source.default-outcome); nil when absent.
func (d *dec) state(l *list, field string) DeliveryState {
	if !d.next(l, field, false) {
		return nil
	}
	return d.stateOf(field)
}

func (d *dec) stateOf(field string) DeliveryState {
	start := d.off
	code, _ := d.descriptor()
	if d.err != nil {
		return nil
	}
	var s DeliveryState
	switch code {
	case CodeReceived:
		l := d.list()
		number, _ := d.uint(&l, "section-number", true, 0)
		offset := d.ulong(&l, "section-offset", true)
		d.close(&l)
		s = Received{SectionNumber: number, SectionOffset: offset}
	case CodeAccepted, CodeReleased:
		l := d.list()
		d.close(&l)
		s = Accepted{}
		if code == CodeReleased {
			s = Released{}
		}
	case CodeRejected:
		l := d.list()
		e := d.errorField(&l, "error")
		d.close(&l)
		s = Rejected{Error: e}
	case CodeModified:
		l := d.list()
		var m Modified
		m.DeliveryFailed = d.boolean(&l, "delivery-failed", false)
		m.UndeliverableHere = d.boolean(&l, "undeliverable-here", false)
		m.MessageAnnotations = d.fields(&l, "message-annotations", false, false)
		d.close(&l)
		s = m
	default:
		d.off = start
		v, _ := d.value(field).(amqp10.Described)
		s = OtherState(v)
	}
	if d.err != nil {
		return nil
	}
	return s
}

func (e *enc) state(dst []byte, s DeliveryState) ([]byte, error) {
	if s == nil {
		return e.null(dst), nil
	}
	dst, err := s.AppendTo(dst)
	if err != nil {
		return dst, err
	}
	return e.present(dst), nil
}
