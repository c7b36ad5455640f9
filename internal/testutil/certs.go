package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for a test, with its PEM files in
// a temporary directory.
type CA struct {
	Cert   *x509.Certificate
	CAFile string // the CA certificate, PEM
	key    *ecdsa.PrivateKey
	dir    string
	serial atomic.Int64
	// chain is the DER of this CA's certificate and of the intermediates
	// above it, for an intermediate CA (Intermediate); nil for a root.
	chain [][]byte
}

// Intermediate makes a CA whose certificate ca signs; the certificates
// it issues carry it (and ca's chain) after them.
func (ca *CA) Intermediate(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(ca.serial.Add(1)),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Warren tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	in := &CA{Cert: cert, key: key, dir: ca.dir, chain: append([][]byte{der}, ca.chain...)}
	in.serial.Store(ca.serial.Add(1000) * 1000) // serials of its own
	in.CAFile = in.write(t, fmt.Sprintf("ca%d.pem", tmpl.SerialNumber), "CERTIFICATE", der)
	return in
}

// NewCA makes a CA whose subject is CN=name, O=Warren tests.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Warren tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: t.TempDir()}
	ca.serial.Store(1)
	ca.CAFile = ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

// Pool is a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issued is a certificate the CA issued, as PEM files and as a
// tls.Certificate.
type Issued struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost,
// with subject CN=cn.
func (ca *CA) Server(t testing.TB, cn string) Issued {
	t.Helper()
	return ca.issue(t, pkix.Name{CommonName: cn}, true)
}

// Client issues a client certificate with subject CN=cn, O=Warren tests.
func (ca *CA) Client(t testing.TB, cn string) Issued {
	t.Helper()
	return ca.issue(t, pkix.Name{CommonName: cn, Organization: []string{"Warren tests"}}, false)
}

// ClientWith issues a client certificate as Client does, its template
// changed by edit first (subject alternative names, extensions).
func (ca *CA) ClientWith(t testing.TB, cn string, edit func(*x509.Certificate)) Issued {
	t.Helper()
	return ca.issue(t, pkix.Name{CommonName: cn, Organization: []string{"Warren tests"}}, false, edit)
}

func (ca *CA) issue(t testing.TB, subject pkix.Name, server bool, edit ...func(*x509.Certificate)) Issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	for _, e := range edit {
		e(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	n := tmpl.SerialNumber.String()
	if len(ca.chain) > 0 {
		n = ca.Cert.SerialNumber.String() + "-" + n
	}
	is := Issued{
		CertFile: ca.write(t, "cert"+n+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(t, "key"+n+".pem", "PRIVATE KEY", kder),
	}
	is.TLS, err = tls.LoadX509KeyPair(is.CertFile, is.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	is.TLS.Certificate = append(is.TLS.Certificate, ca.chain...)
	return is
}

func (ca *CA) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
