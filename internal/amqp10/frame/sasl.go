package frame

import (
	"github.com/warren-mq/warren/internal/amqp10"
)

// SASL frames (core part 5, §5.3.3), exchanged in frames of TypeSASL
// after the "AMQP 3 1 0 0" header: the server offers mechanisms, the
// client picks one with sasl-init, challenges and responses follow as
// the mechanism needs, and sasl-outcome ends the exchange.

// SASLCode is sasl-outcome.code.
type SASLCode uint8

// SASL outcome codes, as encoded.
const (
	SASLOK      SASLCode = 0 // authentication succeeded
	SASLAuth    SASLCode = 1 // failed: bad credentials
	SASLSys     SASLCode = 2 // failed: a system error
	SASLSysPerm SASLCode = 3 // failed: a permanent system error
	SASLSysTemp SASLCode = 4 // failed: a transient system error
)

// SASLMechanisms is sasl-mechanisms (0x40): the server's mechanisms.
type SASLMechanisms struct {
	Mechanisms []amqp10.Symbol // mandatory
}

// Descriptor returns CodeSASLMechanisms.
func (*SASLMechanisms) Descriptor() uint64 { return CodeSASLMechanisms }

// Decode decodes p from the start of b.
func (p *SASLMechanisms) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeSASLMechanisms, "sasl-mechanisms")
	p.Mechanisms = d.symbols(&l, "sasl-server-mechanisms", true)
	return finish(&d, &l)
}

// AppendTo appends p. No mechanisms is an empty array (the field is
// mandatory).
func (p *SASLMechanisms) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeSASLMechanisms)
	if len(p.Mechanisms) == 0 {
		dst = l.present(append(dst, cArray8, 2, 0, cSym8))
	} else {
		dst = l.symbols(dst, p.Mechanisms)
	}
	return l.end(dst), nil
}

// SASLInit is sasl-init (0x41): the client's mechanism and first
// response.
type SASLInit struct {
	Mechanism       amqp10.Symbol // mandatory
	InitialResponse []byte        // nil when absent
	Hostname        string
}

// Descriptor returns CodeSASLInit.
func (*SASLInit) Descriptor() uint64 { return CodeSASLInit }

// Decode decodes p from the start of b.
func (p *SASLInit) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeSASLInit, "sasl-init")
	p.Mechanism = d.symbol(&l, "mechanism", true, "")
	p.InitialResponse = d.binary(&l, "initial-response", false)
	p.Hostname = d.str(&l, "hostname", false)
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *SASLInit) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeSASLInit)
	dst = l.present(amqp10.AppendSymbol(dst, string(p.Mechanism)))
	dst = l.binary(dst, p.InitialResponse)
	dst, err := l.str(dst, p.Hostname, false)
	if err != nil {
		return dst, err
	}
	return l.end(dst), nil
}

// SASLChallenge is sasl-challenge (0x42).
type SASLChallenge struct {
	Challenge []byte // mandatory
}

// Descriptor returns CodeSASLChallenge.
func (*SASLChallenge) Descriptor() uint64 { return CodeSASLChallenge }

// Decode decodes p from the start of b.
func (p *SASLChallenge) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeSASLChallenge, "sasl-challenge")
	p.Challenge = d.binary(&l, "challenge", true)
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *SASLChallenge) AppendTo(dst []byte) ([]byte, error) {
	return appendBinaryOnly(dst, CodeSASLChallenge, p.Challenge), nil
}

// SASLResponse is sasl-response (0x43).
type SASLResponse struct {
	Response []byte // mandatory
}

// Descriptor returns CodeSASLResponse.
func (*SASLResponse) Descriptor() uint64 { return CodeSASLResponse }

// Decode decodes p from the start of b.
func (p *SASLResponse) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeSASLResponse, "sasl-response")
	p.Response = d.binary(&l, "response", true)
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *SASLResponse) AppendTo(dst []byte) ([]byte, error) {
	return appendBinaryOnly(dst, CodeSASLResponse, p.Response), nil
}

func appendBinaryOnly(dst []byte, code uint64, v []byte) []byte {
	dst, l := beginList(dst, code)
	dst = l.present(amqp10.AppendBinary(dst, v))
	return l.end(dst)
}

// SASLOutcome is sasl-outcome (0x44): the end of the exchange.
type SASLOutcome struct {
	Code           SASLCode // mandatory
	AdditionalData []byte
}

// Descriptor returns CodeSASLOutcome.
func (*SASLOutcome) Descriptor() uint64 { return CodeSASLOutcome }

// Decode decodes p from the start of b.
func (p *SASLOutcome) Decode(b []byte) ([]byte, error) {
	d, l := head(b, CodeSASLOutcome, "sasl-outcome")
	c, _ := d.ubyte(&l, "code", true, 0, uint8(SASLSysTemp))
	p.Code = SASLCode(c)
	p.AdditionalData = d.binary(&l, "additional-data", false)
	return finish(&d, &l)
}

// AppendTo appends p.
func (p *SASLOutcome) AppendTo(dst []byte) ([]byte, error) {
	dst, l := beginList(dst, CodeSASLOutcome)
	dst = l.present(amqp10.AppendUbyte(dst, uint8(p.Code)))
	dst = l.binary(dst, p.AdditionalData)
	return l.end(dst), nil
}
