// Package tlsconf is TLS as RabbitMQ's ssl_options describe it: a CA
// bundle, a certificate and key, peer verification, and TLS 1.2 and 1.3
// only. A Reloader holds the loaded files behind an atomic pointer that
// its tls.Config reads at every handshake, so Reload (SIGHUP) changes the
// certificate new connections get without touching open ones; a reload
// that fails keeps what was loaded. Info and PeerName read a connection's
// state as RabbitMQ reports it (ssl_protocol, peer_cert_subject, ...) and
// as rabbitmq_auth_mechanism_ssl takes a user name from it.
package tlsconf

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Options are one listener's ssl_options.
type Options struct {
	CACertFile string // PEM bundle that client certificates are verified against
	CertFile   string // the server's PEM certificate chain
	KeyFile    string // its PEM private key
	// VerifyPeer is verify = verify_peer: a client certificate is asked
	// for and verified against CACertFile. verify_none (false) asks for
	// none, as RabbitMQ's default.
	VerifyPeer bool
	// FailIfNoPeerCert refuses clients without a certificate
	// (fail_if_no_peer_cert = true); only with VerifyPeer.
	FailIfNoPeerCert bool
	// Versions are the TLS versions allowed (tls.VersionTLS12,
	// tls.VersionTLS13); empty means both.
	Versions []uint16
	// CipherSuites are ciphers.<n> (ParseCipher); empty means Go's
	// defaults. See applyCiphers for TLS 1.3's.
	CipherSuites []uint16
	// Depth is the most intermediate certificates a client's chain may
	// have between its certificate and a trusted CA, as Erlang's depth
	// (0: signed by the CA itself); nil means 10, Erlang's default.
	Depth *int
	// Password decrypts an encrypted KeyFile (loadKeyPair).
	Password string
	// HonorCipherOrder and HonorECCOrder are accepted for RabbitMQ's
	// honor_cipher_order and honor_ecc_order and change nothing: Go's
	// server always chooses the suite and curve by its own order
	// (AES-GCM first where the CPU has AES instructions, X25519 first).
	HonorCipherOrder, HonorECCOrder bool
}

// DefaultDepth is Erlang's ssl default verification depth.
const DefaultDepth = 10

// ParseVersion reads an ssl_options.versions value: tlsv1.2 or tlsv1.3.
// Older versions are refused: Warren speaks TLS 1.2 and 1.3 only.
func ParseVersion(s string) (uint16, error) {
	switch s {
	case "tlsv1.3":
		return tls.VersionTLS13, nil
	case "tlsv1.2":
		return tls.VersionTLS12, nil
	case "tlsv1.1", "tlsv1", "sslv3":
		return 0, fmt.Errorf("%s is not supported: Warren speaks TLS 1.2 and 1.3 only (tlsv1.2, tlsv1.3)", s)
	}
	return 0, fmt.Errorf("%q is not a TLS version (tlsv1.2, tlsv1.3)", s)
}

// Reloader serves the certificates of Options and reloads them on
// demand. Its methods are safe for concurrent use.
type Reloader struct {
	opts Options
	cur  atomic.Pointer[tls.Config] // the config of the last good load; never modified
}

// Load reads the files of opts; the error names the file at fault.
func Load(opts Options) (*Reloader, error) {
	r := &Reloader{opts: opts}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. On error the certificates loaded before
// stay in use.
func (r *Reloader) Reload() error {
	cfg, err := r.opts.build()
	if err != nil {
		return err
	}
	r.cur.Store(cfg)
	return nil
}

// Config returns the tls.Config for a listener: each handshake takes the
// last good load's settings.
func (r *Reloader) Config() *tls.Config {
	base := r.cur.Load()
	return &tls.Config{
		MinVersion: base.MinVersion,
		MaxVersion: base.MaxVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load(), nil
		},
	}
}

// Leaf returns the server certificate in use.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().Certificates[0].Leaf }

// build reads the files into a complete server config.
func (o Options) build() (*tls.Config, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("tls: certfile and keyfile are both needed (the listener is on)")
	}
	cert, err := loadKeyPair(o.CertFile, o.KeyFile, o.Password)
	if err != nil {
		return nil, fmt.Errorf("tls: certfile %s, keyfile %s: %w", o.CertFile, o.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   tls.VersionTLS13,
		ClientAuth:   tls.NoClientCert,
	}
	if len(o.Versions) > 0 {
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS12
		for _, v := range o.Versions {
			if v != tls.VersionTLS12 && v != tls.VersionTLS13 {
				return nil, fmt.Errorf("tls: version 0x%04x is not supported (TLS 1.2 and 1.3 only)", v)
			}
			cfg.MinVersion, cfg.MaxVersion = min(cfg.MinVersion, v), max(cfg.MaxVersion, v)
		}
	}
	if err := applyCiphers(cfg, o.CipherSuites); err != nil {
		return nil, err
	}
	depth := DefaultDepth
	if o.Depth != nil {
		depth = *o.Depth
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error { return checkDepth(cs, depth) }
	if o.CACertFile != "" {
		pem, err := os.ReadFile(o.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("tls: cacertfile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: cacertfile %s: no PEM certificate in it", o.CACertFile)
		}
		cfg.ClientCAs = pool
	}
	switch {
	case o.FailIfNoPeerCert && !o.VerifyPeer:
		return nil, errors.New("tls: fail_if_no_peer_cert = true needs verify = verify_peer")
	case o.VerifyPeer && cfg.ClientCAs == nil:
		return nil, errors.New("tls: verify = verify_peer needs a cacertfile to verify client certificates against")
	case o.VerifyPeer && o.FailIfNoPeerCert:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case o.VerifyPeer:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// checkDepth refuses a verified client certificate whose every chain
// has more than depth intermediate certificates (the chain runs from the
// client's certificate to the trusted CA's).
func checkDepth(cs tls.ConnectionState, depth int) error {
	if len(cs.VerifiedChains) == 0 {
		return nil
	}
	for _, chain := range cs.VerifiedChains {
		if len(chain)-2 <= depth {
			return nil
		}
	}
	return fmt.Errorf("tls: the client certificate's chain has %d intermediate certificates, more than depth %d", len(cs.VerifiedChains[0])-2, depth)
}

// Info is a TLS connection as RabbitMQ's management API shows it.
type Info struct {
	Protocol    string // ssl_protocol: "tlsv1.3"
	KeyExchange string // ssl_key_exchange: "ecdhe_rsa"; "any" for TLS 1.3, as Erlang says
	Cipher      string // ssl_cipher: "aes_128_gcm"
	Hash        string // ssl_hash: "aead", "sha", "sha256", "sha384"
	// The client certificate's subject and issuer (RFC 4514, most
	// specific first) and validity ("<from> - <until>"); empty without
	// one.
	PeerCertSubject  string
	PeerCertIssuer   string
	PeerCertValidity string
}

// ConnInfo returns cs in RabbitMQ's terms.
func ConnInfo(cs tls.ConnectionState) Info {
	in := Info{}
	switch cs.Version {
	case tls.VersionTLS13:
		in.Protocol = "tlsv1.3"
	case tls.VersionTLS12:
		in.Protocol = "tlsv1.2"
	}
	in.KeyExchange, in.Cipher, in.Hash = suiteParts(tls.CipherSuiteName(cs.CipherSuite))
	if len(cs.PeerCertificates) > 0 {
		c := cs.PeerCertificates[0]
		in.PeerCertSubject = DistinguishedName(c.RawSubject)
		in.PeerCertIssuer = DistinguishedName(c.RawIssuer)
		in.PeerCertValidity = c.NotBefore.UTC().Format(time.RFC3339) + " - " + c.NotAfter.UTC().Format(time.RFC3339)
	}
	return in
}

// suiteParts splits a Go cipher suite name into Erlang's key exchange,
// cipher and MAC: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 is ecdhe_rsa,
// aes_128_gcm, aead; TLS 1.3's TLS_AES_128_GCM_SHA256 is any, aes_128_gcm,
// aead.
func suiteParts(name string) (kx, cipher, hash string) {
	name = strings.TrimPrefix(name, "TLS_")
	kx = "any"
	if k, rest, ok := strings.Cut(name, "_WITH_"); ok {
		kx, name = strings.ToLower(k), rest
	}
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return kx, strings.ToLower(name), ""
	}
	cipher, hash = strings.ToLower(name[:i]), strings.ToLower(name[i+1:])
	if strings.Contains(cipher, "gcm") || strings.Contains(cipher, "poly1305") {
		hash = "aead"
	}
	cipher = strings.TrimSuffix(cipher, "_cbc")
	return kx, cipher, hash
}

// DistinguishedName formats a DER subject or issuer as RFC 4514 does
// (the last RDN first), as RabbitMQ and openssl -nameopt RFC2253 do.
func DistinguishedName(raw []byte) string {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(raw, &seq); err != nil || len(rest) > 0 {
		return ""
	}
	return seq.String()
}

// Name sources for SASL EXTERNAL: RabbitMQ's ssl_cert_login_from.
const (
	LoginFromDN  = "distinguished_name" // RabbitMQ's default
	LoginFromCN  = "common_name"
	LoginFromSAN = "subject_alternative_name" // also spelt subject_alt_name
)

// SAN types of ssl_cert_login_san_type.
const (
	SANDNS       = "dns" // the default
	SANIP        = "ip"
	SANEmail     = "email"
	SANURI       = "uri"
	SANOtherName = "other_name"
)

// CertLogin is where SASL EXTERNAL takes the user name from: RabbitMQ's
// ssl_cert_login_from, ssl_cert_login_san_type and
// ssl_cert_login_san_index. The zero value is the distinguished name.
type CertLogin struct {
	From     string // LoginFromDN (""), LoginFromCN or LoginFromSAN
	SANType  string // with LoginFromSAN: SANDNS (""), SANIP, SANEmail, SANURI or SANOtherName
	SANIndex int    // with LoginFromSAN: which name of that type, from 0
}

// ParseLoginFrom reads an ssl_cert_login_from value.
func ParseLoginFrom(s string) (string, error) {
	switch s {
	case LoginFromDN, LoginFromCN, LoginFromSAN:
		return s, nil
	case "subject_alt_name":
		return LoginFromSAN, nil
	}
	return "", fmt.Errorf("%q is not one of distinguished_name, common_name, subject_alternative_name, subject_alt_name", s)
}

// ParseSANType reads an ssl_cert_login_san_type value.
func ParseSANType(s string) (string, error) {
	switch s {
	case SANDNS, SANIP, SANEmail, SANURI, SANOtherName:
		return s, nil
	}
	return "", fmt.Errorf("%q is not one of dns, ip, email, uri, other_name", s)
}

// PeerName returns the user name SASL EXTERNAL takes from the
// connection's client certificate, as rabbitmq_auth_mechanism_ssl does:
// the subject's distinguished name, its common name(s) joined with ",",
// or the SANIndex-th subject alternative name of SANType (an IP address
// in its text form, where RabbitMQ takes its raw bytes; an otherName's
// value as a directory string). The certificate must have been verified
// (verify_peer); the error is RabbitMQ's reason for refusing the login
// otherwise.
func PeerName(cs tls.ConnectionState, login CertLogin) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("connection peer presented no TLS (x.509) certificate")
	}
	if len(cs.VerifiedChains) == 0 {
		return "", errors.New("TLS configuration is unsafe")
	}
	c := cs.PeerCertificates[0]
	switch login.From {
	case LoginFromCN:
		var cns []string
		for _, a := range c.Subject.Names {
			if a.Type.Equal(asn1.ObjectIdentifier{2, 5, 4, 3}) {
				if s, ok := a.Value.(string); ok {
					cns = append(cns, s)
				}
			}
		}
		if len(cns) == 0 {
			return "", errNoName
		}
		return strings.Join(cns, ","), nil
	case LoginFromSAN, "subject_alt_name":
		names, err := subjectAltNames(c, login.SANType)
		if err != nil {
			return "", err
		}
		if login.SANIndex < 0 || login.SANIndex >= len(names) {
			return "", errNoName
		}
		return names[login.SANIndex], nil
	}
	return DistinguishedName(c.RawSubject), nil
}

var errNoName = errors.New("no name found")

// GeneralName tags (RFC 5280 4.2.1.6) of the SAN types.
var sanTags = map[string]int{SANOtherName: 0, SANEmail: 1, SANDNS: 2, SANURI: 6, SANIP: 7}

// subjectAltNames returns the certificate's subject alternative names
// of one type, in their order in the extension.
func subjectAltNames(c *x509.Certificate, typ string) ([]string, error) {
	tag, ok := sanTags[cmp.Or(typ, SANDNS)]
	if !ok {
		return nil, fmt.Errorf("unknown SAN type %q", typ)
	}
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 17}) {
			continue
		}
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &seq); err != nil || len(rest) > 0 {
			return nil, errNoName
		}
		var names []string
		for rest := seq.Bytes; len(rest) > 0; {
			var gn asn1.RawValue
			var err error
			if rest, err = asn1.Unmarshal(rest, &gn); err != nil {
				return nil, errNoName
			}
			if gn.Class != asn1.ClassContextSpecific || gn.Tag != tag {
				continue
			}
			switch tag {
			case 7:
				if ip := net.IP(gn.Bytes); len(gn.Bytes) == 4 || len(gn.Bytes) == 16 {
					names = append(names, ip.String())
				}
			case 0:
				names = append(names, otherNameValue(gn.Bytes))
			default:
				names = append(names, string(gn.Bytes))
			}
		}
		return names, nil
	}
	return nil, nil
}

// otherNameValue reads an otherName's value (type-id OID, [0] EXPLICIT
// value) as a directory string, as RabbitMQ's sanitize_other_name;
// a value of another type is returned as its raw bytes.
func otherNameValue(b []byte) string {
	var oid asn1.ObjectIdentifier
	rest, err := asn1.Unmarshal(b, &oid)
	if err != nil {
		return ""
	}
	var wrapped asn1.RawValue
	if _, err := asn1.Unmarshal(rest, &wrapped); err != nil {
		return ""
	}
	var v asn1.RawValue
	if _, err := asn1.Unmarshal(wrapped.Bytes, &v); err != nil {
		return string(wrapped.Bytes)
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String:
		return string(v.Bytes)
	case asn1.TagBMPString:
		var sb strings.Builder
		for i := 0; i+1 < len(v.Bytes); i += 2 {
			sb.WriteRune(rune(v.Bytes[i])<<8 | rune(v.Bytes[i+1]))
		}
		return sb.String()
	}
	return string(v.FullBytes)
}
