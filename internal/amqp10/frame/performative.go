package frame

import (
	"fmt"

	"github.com/warren-mq/warren/internal/amqp10"
)

// Performative is the body of a frame: the nine AMQP performatives and
// the five SASL frames. Decode reads one from the start of b and returns
// the bytes after it (a transfer's payload, aliasing b); fields that are
// absent or null take their spec defaults, binary fields (a delivery
// tag, a SASL response) alias b, strings and symbols are copies. AppendTo appends it in the
// compact form: fields holding their default are null, trailing nulls
// are left out, every value takes its smallest constructor.
type Performative interface {
	// Descriptor is the descriptor code (CodeOpen, ...).
	Descriptor() uint64
	// AppendTo appends the performative (the described list only).
	AppendTo(dst []byte) ([]byte, error)
	// Decode decodes the performative at the start of b, which may give
	// its descriptor as the code or the symbol, and returns the rest of b.
	Decode(b []byte) (rest []byte, err error)
}

// PeekCode returns the descriptor code of the performative at the start
// of a frame body, for a front end that decodes into a struct it reuses.
func PeekCode(body []byte) (uint64, error) {
	d := newDec(body, "frame body")
	code, sym := d.descriptor()
	if d.err != nil {
		return 0, d.err
	}
	if sym != "" {
		return 0, fmt.Errorf("amqp10/frame: unknown descriptor %q: %w", sym, ErrDecode)
	}
	return code, nil
}

// newPerformative returns a new performative for a descriptor code that
// may come in a frame of type typ.
func newPerformative(typ Type, code uint64) Performative {
	if typ == TypeAMQP {
		switch code {
		case CodeOpen:
			return &Open{}
		case CodeBegin:
			return &Begin{}
		case CodeAttach:
			return &Attach{}
		case CodeFlow:
			return &Flow{}
		case CodeTransfer:
			return &Transfer{}
		case CodeDisposition:
			return &Disposition{}
		case CodeDetach:
			return &Detach{}
		case CodeEnd:
			return &End{}
		case CodeClose:
			return &Close{}
		}
		return nil
	}
	switch code {
	case CodeSASLMechanisms:
		return &SASLMechanisms{}
	case CodeSASLInit:
		return &SASLInit{}
	case CodeSASLChallenge:
		return &SASLChallenge{}
	case CodeSASLResponse:
		return &SASLResponse{}
	case CodeSASLOutcome:
		return &SASLOutcome{}
	}
	return nil
}

// Decode decodes the body of a frame of type typ: the performative and,
// for a transfer, its payload (aliasing body). Only a transfer may have
// bytes after its performative.
func Decode(typ Type, body []byte) (Performative, []byte, error) {
	code, err := PeekCode(body)
	if err != nil {
		return nil, nil, err
	}
	p := newPerformative(typ, code)
	if p == nil {
		return nil, nil, fmt.Errorf("amqp10/frame: descriptor 0x%x in a frame of type %d: %w", code, typ, ErrDecode)
	}
	rest, err := p.Decode(body)
	if err != nil {
		return nil, nil, err
	}
	if code != CodeTransfer && len(rest) != 0 {
		return nil, nil, fmt.Errorf("amqp10/frame: %d bytes after %T: %w", len(rest), p, ErrDecode)
	}
	return p, rest, nil
}

// head starts decoding performative name with code want: it reads the
// descriptor and the list header.
func head(b []byte, want uint64, name string) (dec, list) {
	d := newDec(b, name)
	code, sym := d.descriptor()
	if d.err == nil && code != want {
		d.failf("descriptor 0x%x %q", code, sym)
	}
	return d, d.list()
}

// finish closes the list and returns the bytes after it.
func finish(d *dec, l *list) ([]byte, error) {
	d.close(l)
	if d.err != nil {
		return nil, d.err
	}
	return d.b[d.off:], nil
}

// Open is the open performative (0x10): the first frame of a
// connection, each side's limits.
type Open struct {
	ContainerID         string          // mandatory
	Hostname            string          // "" when absent
	MaxFrameSize        uint32          // default DefaultMaxFrameSize
	ChannelMax          uint16          // default DefaultChannelMax
	IdleTimeout         uint32          // milliseconds; 0 when absent: none
	OutgoingLocales     []amqp10.Symbol // ietf-language-tags
	IncomingLocales     []amqp10.Symbol
	OfferedCapabilities []amqp10.Symbol
	DesiredCapabilities []amqp10.Symbol
	Properties          amqp10.Map // fields
}

// Descriptor returns CodeOpen.
func (*Open) Descriptor() uint64 { return CodeOpen }

// Decode decodes o from the start of b.
func (o *Open) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeOpen, "open")
	o.ContainerID = d.str(&l, "container-id", true)
	o.Hostname = d.str(&l, "hostname", false)
	o.MaxFrameSize, _ = d.uint(&l, "max-frame-size", false, DefaultMaxFrameSize)
	o.ChannelMax, _ = d.ushort(&l, "channel-max", DefaultChannelMax)
	o.IdleTimeout, _ = d.uint(&l, "idle-time-out", false, 0)
	o.OutgoingLocales = d.symbols(&l, "outgoing-locales", false)
	o.IncomingLocales = d.symbols(&l, "incoming-locales", false)
	o.OfferedCapabilities = d.symbols(&l, "offered-capabilities", false)
	o.DesiredCapabilities = d.symbols(&l, "desired-capabilities", false)
	o.Properties = d.fields(&l, "properties", true, false)
	return finish(&d, &l)
}

// AppendTo appends o.
func (o *Open) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeOpen)
	dst, err := l.str(dst, o.ContainerID, true)
	if err != nil {
		return dst, err
	}
	if dst, err = l.str(dst, o.Hostname, false); err != nil {
		return dst, err
	}
	dst = l.uint(dst, o.MaxFrameSize, o.MaxFrameSize != DefaultMaxFrameSize)
	dst = l.ushort(dst, o.ChannelMax, o.ChannelMax != DefaultChannelMax)
	dst = l.uint(dst, o.IdleTimeout, o.IdleTimeout != 0)
	dst = l.symbols(dst, o.OutgoingLocales)
	dst = l.symbols(dst, o.IncomingLocales)
	dst = l.symbols(dst, o.OfferedCapabilities)
	dst = l.symbols(dst, o.DesiredCapabilities)
	if dst, err = l.value(dst, o.Properties); err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// Begin is the begin performative (0x11): a session starts on a channel.
type Begin struct {
	RemoteChannel       uint16 // the peer's channel, in a reply
	HasRemoteChannel    bool
	NextOutgoingID      uint32 // mandatory
	IncomingWindow      uint32 // mandatory
	OutgoingWindow      uint32 // mandatory
	HandleMax           uint32 // default DefaultHandleMax
	OfferedCapabilities []amqp10.Symbol
	DesiredCapabilities []amqp10.Symbol
	Properties          amqp10.Map
}

// Descriptor returns CodeBegin.
func (*Begin) Descriptor() uint64 { return CodeBegin }

// Decode decodes g from the start of b.
func (g *Begin) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeBegin, "begin")
	g.RemoteChannel, g.HasRemoteChannel = d.ushort(&l, "remote-channel", 0)
	g.NextOutgoingID, _ = d.uint(&l, "next-outgoing-id", true, 0)
	g.IncomingWindow, _ = d.uint(&l, "incoming-window", true, 0)
	g.OutgoingWindow, _ = d.uint(&l, "outgoing-window", true, 0)
	g.HandleMax, _ = d.uint(&l, "handle-max", false, DefaultHandleMax)
	g.OfferedCapabilities = d.symbols(&l, "offered-capabilities", false)
	g.DesiredCapabilities = d.symbols(&l, "desired-capabilities", false)
	g.Properties = d.fields(&l, "properties", true, false)
	return finish(&d, &l)
}

// AppendTo appends g.
func (g *Begin) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeBegin)
	dst = l.ushort(dst, g.RemoteChannel, g.HasRemoteChannel)
	dst = l.uint(dst, g.NextOutgoingID, true)
	dst = l.uint(dst, g.IncomingWindow, true)
	dst = l.uint(dst, g.OutgoingWindow, true)
	dst = l.uint(dst, g.HandleMax, g.HandleMax != DefaultHandleMax)
	dst = l.symbols(dst, g.OfferedCapabilities)
	dst = l.symbols(dst, g.DesiredCapabilities)
	dst, err := l.value(dst, g.Properties)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// Attach is the attach performative (0x12): a link is attached to a
// session.
type Attach struct {
	Name                    string             // mandatory
	Handle                  uint32             // mandatory
	Role                    Role               // mandatory
	SndSettleMode           SenderSettleMode   // default SndMixed
	RcvSettleMode           ReceiverSettleMode // default RcvFirst
	Source                  *Source
	Target                  *Target
	Unsettled               amqp10.Map // delivery-tag -> delivery-state
	IncompleteUnsettled     bool
	InitialDeliveryCount    uint32 // a sender's; mandatory for a sender
	HasInitialDeliveryCount bool
	MaxMessageSize          uint64 // 0 when absent: no limit
	OfferedCapabilities     []amqp10.Symbol
	DesiredCapabilities     []amqp10.Symbol
	Properties              amqp10.Map
}

// Descriptor returns CodeAttach.
func (*Attach) Descriptor() uint64 { return CodeAttach }

// Decode decodes a from the start of b.
func (a *Attach) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeAttach, "attach")
	a.Name = d.str(&l, "name", true)
	a.Handle, _ = d.uint(&l, "handle", true, 0)
	a.Role = Role(d.boolean(&l, "role", true))
	snd, _ := d.ubyte(&l, "snd-settle-mode", false, uint8(SndMixed), uint8(SndMixed))
	a.SndSettleMode = SenderSettleMode(snd)
	rcv, _ := d.ubyte(&l, "rcv-settle-mode", false, uint8(RcvFirst), uint8(RcvSecond))
	a.RcvSettleMode = ReceiverSettleMode(rcv)
	a.Source = d.source(&l)
	a.Target = d.target(&l)
	a.Unsettled = d.fields(&l, "unsettled", false, false)
	a.IncompleteUnsettled = d.boolean(&l, "incomplete-unsettled", false)
	a.InitialDeliveryCount, a.HasInitialDeliveryCount = d.uint(&l, "initial-delivery-count", false, 0)
	a.MaxMessageSize = d.ulong(&l, "max-message-size", false)
	a.OfferedCapabilities = d.symbols(&l, "offered-capabilities", false)
	a.DesiredCapabilities = d.symbols(&l, "desired-capabilities", false)
	a.Properties = d.fields(&l, "properties", true, false)
	return finish(&d, &l)
}

// AppendTo appends a.
func (a *Attach) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeAttach)
	dst, err := l.str(dst, a.Name, true)
	if err != nil {
		return dst, err
	}
	dst = l.uint(dst, a.Handle, true)
	dst = l.present(amqp10.AppendBool(dst, bool(a.Role)))
	dst = l.ubyte(dst, uint8(a.SndSettleMode), a.SndSettleMode != SndMixed)
	dst = l.ubyte(dst, uint8(a.RcvSettleMode), a.RcvSettleMode != RcvFirst)
	if a.Source == nil {
		dst = l.null(dst)
	} else {
		if dst, err = a.Source.AppendTo(dst); err != nil {
			return dst, err
		}
		dst = l.present(dst)
	}
	if a.Target == nil {
		dst = l.null(dst)
	} else {
		if dst, err = a.Target.AppendTo(dst); err != nil {
			return dst, err
		}
		dst = l.present(dst)
	}
	if dst, err = l.value(dst, a.Unsettled); err != nil {
		return dst, err
	}
	dst = l.boolean(dst, a.IncompleteUnsettled)
	dst = l.uint(dst, a.InitialDeliveryCount, a.HasInitialDeliveryCount)
	dst = l.ulong(dst, a.MaxMessageSize, a.MaxMessageSize != 0)
	dst = l.symbols(dst, a.OfferedCapabilities)
	dst = l.symbols(dst, a.DesiredCapabilities)
	if dst, err = l.value(dst, a.Properties); err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// Flow is the flow performative (0x13): a session's windows and, with
// HasHandle, a link's credit.
type Flow struct {
	NextIncomingID    uint32
	HasNextIncomingID bool
	IncomingWindow    uint32 // mandatory
	NextOutgoingID    uint32 // mandatory
	OutgoingWindow    uint32 // mandatory
	Handle            uint32
	HasHandle         bool
	DeliveryCount     uint32
	HasDeliveryCount  bool
	LinkCredit        uint32
	HasLinkCredit     bool
	Available         uint32
	HasAvailable      bool
	Drain             bool
	Echo              bool
	Properties        amqp10.Map
}

// Descriptor returns CodeFlow.
func (*Flow) Descriptor() uint64 { return CodeFlow }

// Decode decodes f from the start of b.
func (f *Flow) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeFlow, "flow")
	f.NextIncomingID, f.HasNextIncomingID = d.uint(&l, "next-incoming-id", false, 0)
	f.IncomingWindow, _ = d.uint(&l, "incoming-window", true, 0)
	f.NextOutgoingID, _ = d.uint(&l, "next-outgoing-id", true, 0)
	f.OutgoingWindow, _ = d.uint(&l, "outgoing-window", true, 0)
	f.Handle, f.HasHandle = d.uint(&l, "handle", false, 0)
	f.DeliveryCount, f.HasDeliveryCount = d.uint(&l, "delivery-count", false, 0)
	f.LinkCredit, f.HasLinkCredit = d.uint(&l, "link-credit", false, 0)
	f.Available, f.HasAvailable = d.uint(&l, "available", false, 0)
	f.Drain = d.boolean(&l, "drain", false)
	f.Echo = d.boolean(&l, "echo", false)
	f.Properties = d.fields(&l, "properties", true, false)
	return finish(&d, &l)
}

// AppendTo appends f.
func (f *Flow) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeFlow)
	dst = l.uint(dst, f.NextIncomingID, f.HasNextIncomingID)
	dst = l.uint(dst, f.IncomingWindow, true)
	dst = l.uint(dst, f.NextOutgoingID, true)
	dst = l.uint(dst, f.OutgoingWindow, true)
	dst = l.uint(dst, f.Handle, f.HasHandle)
	dst = l.uint(dst, f.DeliveryCount, f.HasDeliveryCount)
	dst = l.uint(dst, f.LinkCredit, f.HasLinkCredit)
	dst = l.uint(dst, f.Available, f.HasAvailable)
	dst = l.boolean(dst, f.Drain)
	dst = l.boolean(dst, f.Echo)
	dst, err := l.value(dst, f.Properties)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// Transfer is the transfer performative (0x14): (part of) a message on a
// link. The payload follows it in the frame body. Continuation transfers
// of a multi-frame delivery may leave out the delivery id, tag and
// message format.
type Transfer struct {
	Handle           uint32 // mandatory
	DeliveryID       uint32
	HasDeliveryID    bool
	DeliveryTag      []byte // nil when absent; aliases the input when decoded
	MessageFormat    uint32
	HasMessageFormat bool
	Settled          bool
	More             bool // more transfers of this delivery follow
	RcvSettleMode    ReceiverSettleMode
	HasRcvSettleMode bool
	State            DeliveryState // nil when absent
	Resume           bool
	Aborted          bool
	Batchable        bool
}

// Descriptor returns CodeTransfer.
func (*Transfer) Descriptor() uint64 { return CodeTransfer }

// Decode decodes t from the start of b and returns the payload after it
// (aliasing b). It allocates nothing unless State is Received, Rejected,
// Modified or another state.
func (t *Transfer) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeTransfer, "transfer")
	t.Handle, _ = d.uint(&l, "handle", true, 0)
	t.DeliveryID, t.HasDeliveryID = d.uint(&l, "delivery-id", false, 0)
	t.DeliveryTag = d.binary(&l, "delivery-tag", false)
	t.MessageFormat, t.HasMessageFormat = d.uint(&l, "message-format", false, 0)
	t.Settled = d.boolean(&l, "settled", false)
	t.More = d.boolean(&l, "more", false)
	rcv, has := d.ubyte(&l, "rcv-settle-mode", false, 0, uint8(RcvSecond))
	t.RcvSettleMode, t.HasRcvSettleMode = ReceiverSettleMode(rcv), has
	t.State = d.state(&l, "state")
	t.Resume = d.boolean(&l, "resume", false)
	t.Aborted = d.boolean(&l, "aborted", false)
	t.Batchable = d.boolean(&l, "batchable", false)
	return finish(&d, &l)
}

// AppendTo appends t (without a payload).
func (t *Transfer) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeTransfer)
	dst = l.uint(dst, t.Handle, true)
	dst = l.uint(dst, t.DeliveryID, t.HasDeliveryID)
	dst = l.binary(dst, t.DeliveryTag)
	dst = l.uint(dst, t.MessageFormat, t.HasMessageFormat)
	dst = l.boolean(dst, t.Settled)
	dst = l.boolean(dst, t.More)
	dst = l.ubyte(dst, uint8(t.RcvSettleMode), t.HasRcvSettleMode)
	dst, err := l.state(dst, t.State)
	if err != nil {
		return dst, err
	}
	dst = l.boolean(dst, t.Resume)
	dst = l.boolean(dst, t.Aborted)
	dst = l.boolean(dst, t.Batchable)
	return l.end(dst), nil
}

// Disposition is the disposition performative (0x15): the state of the
// deliveries First to Last.
type Disposition struct {
	Role      Role   // mandatory: the role of the sender of the disposition
	First     uint32 // mandatory
	Last      uint32 // First when absent (and left out when equal)
	Settled   bool
	State     DeliveryState
	Batchable bool
}

// Descriptor returns CodeDisposition.
func (*Disposition) Descriptor() uint64 { return CodeDisposition }

// Decode decodes p from the start of b.
func (p *Disposition) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeDisposition, "disposition")
	p.Role = Role(d.boolean(&l, "role", true))
	p.First, _ = d.uint(&l, "first", true, 0)
	p.Last, _ = d.uint(&l, "last", false, p.First)
	p.Settled = d.boolean(&l, "settled", false)
	p.State = d.state(&l, "state")
	p.Batchable = d.boolean(&l, "batchable", false)
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *Disposition) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeDisposition)
	dst = l.present(amqp10.AppendBool(dst, bool(p.Role)))
	dst = l.uint(dst, p.First, true)
	dst = l.uint(dst, p.Last, p.Last != p.First)
	dst = l.boolean(dst, p.Settled)
	dst, err := l.state(dst, p.State)
	if err != nil {
		return dst, err
	}
	dst = l.boolean(dst, p.Batchable)
	return l.end(dst), nil
}

// Detach is the detach performative (0x16): a link is detached, or with
// Closed closed.
type Detach struct {
	Handle uint32 // mandatory
	Closed bool
	Error  *Error
}

// Descriptor returns CodeDetach.
func (*Detach) Descriptor() uint64 { return CodeDetach }

// Decode decodes p from the start of b.
func (p *Detach) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeDetach, "detach")
	p.Handle, _ = d.uint(&l, "handle", true, 0)
	p.Closed = d.boolean(&l, "closed", false)
	p.Error = d.errorField(&l, "error")
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *Detach) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeDetach)
	dst = l.uint(dst, p.Handle, true)
	dst = l.boolean(dst, p.Closed)
	dst, err := l.errorField(dst, p.Error)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// End is the end performative (0x17): a session ends.
type End struct {
	Error *Error
}

// Descriptor returns CodeEnd.
func (*End) Descriptor() uint64 { return CodeEnd }

// Decode decodes p from the start of b.
func (p *End) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeEnd, "end")
	p.Error = d.errorField(&l, "error")
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *End) AppendTo(dst []byte) ([]byte, error) {
	return appendErrorOnly(dst, CodeEnd, p.Error)
}

// Close is the close performative (0x18): the connection closes.
type Close struct {
	Error *Error
}

// Descriptor returns CodeClose.
func (*Close) Descriptor() uint64 { return CodeClose }

// Decode decodes p from the start of b.
func (p *Close) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeClose, "close")
	p.Error = d.errorField(&l, "error")
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *Close) AppendTo(dst []byte) ([]byte, error) {
	return appendErrorOnly(dst, CodeClose, p.Error)
}

func appendErrorOnly(dst []byte, code uint64, e *Error) ([]byte, error) {
	dst, l := beginList(dst, code)
	dst, err := l.errorField(dst, e)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}
