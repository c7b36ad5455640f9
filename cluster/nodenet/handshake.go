package nodenet

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
)

// Labels that make the two proofs of a handshake differ, so that neither
// side can reflect the other's proof back.
const (
	dialerLabel   = "warren nodenet v1 dialer proof"
	acceptorLabel = "warren nodenet v1 acceptor proof"
)

// local is what a handshake needs to know about this node.
type local struct {
	cluster string
	name    string
	secret  []byte
	// check says whether the acceptor takes a dialer's hello: nil, or
	// the refusal to send. Only the acceptor calls it.
	check func(h *hello) *refusal
}

// proof returns HMAC-SHA256(secret, label, transcript): the transcript
// binds the cluster, both names, the purpose and lane, and both nonces,
// so a proof is good for one handshake only.
func proof(secret []byte, label string, d, a *hello) []byte {
	m := hmac.New(sha256.New, secret)
	var buf []byte
	buf = appendStr8(buf, label)
	buf = appendStr8(buf, d.cluster)
	buf = appendStr8(buf, d.from)
	buf = appendStr8(buf, a.from)
	buf = append(buf, d.purpose, byte(d.lane))
	buf = append(buf, d.nonce[:]...)
	buf = append(buf, a.nonce[:]...)
	m.Write(buf)
	return m.Sum(nil)
}

// readHandshakeMsg reads one handshake frame: a hello, a proof or a
// refusal. A refusal comes back as the error it stands for.
func readHandshakeMsg(r io.Reader, peer string) (Lane, []byte, error) {
	lane, p, err := readFrame(r, nil, maxHandshakePayload)
	if err != nil {
		return 0, nil, noEOF(err)
	}
	switch lane {
	case msgHello, msgProof:
		return lane, p, nil
	case msgRefuse:
		f, err := parseRefusal(p)
		if err != nil {
			return 0, nil, err
		}
		return 0, nil, fmt.Errorf("refused by %s (%s): %w: %s", peer, f.reason, f.reason.err(), f.text)
	}
	return 0, nil, fmt.Errorf("%w: handshake message type %#x", ErrMalformed, uint8(lane))
}

// dialHandshake runs the dialer's side of the handshake on rw with the
// node named to, for purpose (and lane, for purposeConn). The caller
// sets deadlines. It reads exactly the handshake's bytes, so the
// connection carries on with no data buffered here.
//
//	dialer                               acceptor
//	preamble + hello(nonce d)     ->
//	                              <-     preamble + hello(nonce a)  | refuse
//	proof(dialer label)           ->
//	                              <-     proof(acceptor label)      | refuse
func dialHandshake(rw io.ReadWriter, l *local, to string, purpose uint8, lane Lane) error {
	d := hello{cluster: l.cluster, from: l.name, to: to, purpose: purpose, lane: lane}
	rand.Read(d.nonce[:])
	if _, err := rw.Write(d.appendTo(appendPreamble(nil, Version))); err != nil {
		return err
	}
	var pre [preambleLen]byte
	if _, err := io.ReadFull(rw, pre[:]); err != nil {
		return fmt.Errorf("reading preamble: %w", noEOF(err))
	}
	v, err := parsePreamble(pre[:])
	if err != nil {
		return err
	}
	if v != Version {
		return fmt.Errorf("%w: we speak %d, %s speaks %d", ErrVersion, Version, to, v)
	}
	typ, p, err := readHandshakeMsg(rw, to)
	if err != nil {
		return err
	}
	if typ != msgHello {
		return fmt.Errorf("%w: expected hello, got %#x", ErrMalformed, uint8(typ))
	}
	a, err := parseHello(p)
	if err != nil {
		return err
	}
	switch {
	case a.cluster != l.cluster:
		return fmt.Errorf("%w: %s is in cluster %q, we are in %q", ErrWrongCluster, to, a.cluster, l.cluster)
	case a.from != to:
		return fmt.Errorf("%w: dialed %s, answered by %q", ErrWrongNode, to, a.from)
	case a.to != l.name:
		return fmt.Errorf("%w: %s answered a node named %q, we are %q", ErrWrongNode, to, a.to, l.name)
	}
	if _, err := rw.Write(appendProof(nil, proof(l.secret, dialerLabel, &d, &a))); err != nil {
		return err
	}
	typ, p, err = readHandshakeMsg(rw, to)
	if err != nil {
		return err
	}
	if typ != msgProof {
		return fmt.Errorf("%w: expected proof, got %#x", ErrMalformed, uint8(typ))
	}
	mac, err := parseProof(p)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac, proof(l.secret, acceptorLabel, &d, &a)) {
		return fmt.Errorf("%w: %s's proof does not match our secret", ErrBadSecret, to)
	}
	return nil
}

// acceptHandshake runs the acceptor's side of the handshake on rw and
// returns the dialer's hello once the dialer has proved the secret. On
// a mismatch it tells the dialer why (a refuse message) and returns the
// error with as much of the hello as it read, for the log; the caller
// closes the connection. Like dialHandshake it reads
// exactly the handshake's bytes.
func acceptHandshake(rw io.ReadWriter, l *local) (hello, error) {
	var pre [preambleLen]byte
	if _, err := io.ReadFull(rw, pre[:]); err != nil {
		return hello{}, fmt.Errorf("reading preamble: %w", noEOF(err))
	}
	v, err := parsePreamble(pre[:])
	if err != nil {
		return hello{}, err // not ours: say nothing
	}
	out := appendPreamble(nil, Version)
	if v != Version {
		rw.Write(out) // the dialer sees our version and gives up
		return hello{}, fmt.Errorf("%w: we speak %d, the dialer speaks %d", ErrVersion, Version, v)
	}
	var d hello
	refuse := func(f refusal, err error) (hello, error) {
		rw.Write(f.appendTo(out))
		return d, err
	}
	typ, p, err := readHandshakeMsg(rw, "dialer")
	if err == nil && typ != msgHello {
		err = fmt.Errorf("%w: expected hello, got %#x", ErrMalformed, uint8(typ))
	}
	if err == nil {
		d, err = parseHello(p)
	}
	if err != nil {
		return refuse(refusal{ReasonMalformed, err.Error()}, err)
	}
	switch {
	case d.cluster != l.cluster:
		return refuse(refusal{ReasonWrongCluster, fmt.Sprintf("%s is in cluster %q, not %q", l.name, l.cluster, d.cluster)},
			fmt.Errorf("%w: %q dialed from cluster %q, we are in %q", ErrWrongCluster, d.from, d.cluster, l.cluster))
	case d.to != l.name:
		return refuse(refusal{ReasonWrongNode, fmt.Sprintf("this is %s, not %s", l.name, d.to)},
			fmt.Errorf("%w: %q dialed %q, we are %q", ErrWrongNode, d.from, d.to, l.name))
	}
	if l.check != nil {
		if f := l.check(&d); f != nil {
			return refuse(*f, fmt.Errorf("%w: from %q: %s", f.reason.err(), d.from, f.text))
		}
	}
	a := hello{cluster: l.cluster, from: l.name, to: d.from, purpose: d.purpose, lane: d.lane}
	rand.Read(a.nonce[:])
	if _, err := rw.Write(a.appendTo(out)); err != nil {
		return d, err
	}
	out = out[:0] // the preamble is sent
	typ, p, err = readHandshakeMsg(rw, d.from)
	if err == nil && typ != msgProof {
		err = fmt.Errorf("%w: expected proof, got %#x", ErrMalformed, uint8(typ))
	}
	var mac []byte
	if err == nil {
		mac, err = parseProof(p)
	}
	if err != nil {
		return refuse(refusal{ReasonMalformed, err.Error()}, err)
	}
	if !hmac.Equal(mac, proof(l.secret, dialerLabel, &d, &a)) {
		return refuse(refusal{ReasonBadSecret, "the proof does not match " + l.name + "'s secret"},
			fmt.Errorf("%w: %q's proof does not match our secret", ErrBadSecret, d.from))
	}
	if _, err := rw.Write(appendProof(nil, proof(l.secret, acceptorLabel, &d, &a))); err != nil {
		return d, err
	}
	return d, nil
}
