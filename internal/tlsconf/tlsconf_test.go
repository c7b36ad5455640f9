package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
)

// serve accepts on a TLS listener with r's config and echoes what each
// connection sends, until the test ends.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tln := tls.NewListener(ln, r.Config())
	go func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// echo writes and reads back one message on c.
func echo(t *testing.T, c *tls.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("read %q, %v; want %q", buf, err, msg)
	}
}

// Ensure a reload serves the new certificate to new connections while a
// connection made before keeps working, and a reload that fails keeps
// the certificate in use.
func TestReload(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	certFile, keyFile := dir+"/cert.pem", dir+"/key.pem"
	install := func(is testutil.Issued) {
		for _, f := range [][2]string{{is.CertFile, certFile}, {is.KeyFile, keyFile}} {
			b, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)
	r, err := Load(Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	cn := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].Subject.CommonName }
	old := dial()
	echo(t, old, "before")
	if got := cn(old); got != "first" {
		t.Fatalf("served %s, want first", got)
	}

	install(second)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if c := dial(); cn(c) != "second" {
		t.Fatalf("after reload: served %s, want second", cn(c))
	}
	echo(t, old, "after") // the old session goes on

	os.WriteFile(keyFile, []byte("not a key"), 0o600)
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), keyFile) {
		t.Fatalf("reload of a broken key: %v, want an error naming %s", err, keyFile)
	}
	if c := dial(); cn(c) != "second" {
		t.Fatalf("after a failed reload: served %s, want second (kept)", cn(c))
	}
}

// Ensure verify_peer with fail_if_no_peer_cert refuses a client without
// a certificate and one from another CA, and TLS 1.1 is refused.
func TestVerifyPeer(t *testing.T) {
	ca, other := testutil.NewCA(t, "ca"), testutil.NewCA(t, "other")
	srv := ca.Server(t, "server")
	r, err := Load(Options{CACertFile: ca.CAFile, CertFile: srv.CertFile, KeyFile: srv.KeyFile, VerifyPeer: true, FailIfNoPeerCert: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	try := func(cfg *tls.Config) error {
		cfg.RootCAs, cfg.ServerName = ca.Pool(), "localhost"
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports the server's refusal at the first read.
		c.Write([]byte("x"))
		_, err = c.Read(make([]byte, 1))
		return err
	}
	if err := try(&tls.Config{Certificates: []tls.Certificate{ca.Client(t, "alice").TLS}}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if err := try(&tls.Config{}); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("client without a certificate: %v, want certificate required", err)
	}
	if err := try(&tls.Config{Certificates: []tls.Certificate{other.Client(t, "mallory").TLS}}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("client of another CA: %v, want a certificate refusal", err)
	}
	err = try(&tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, Certificates: []tls.Certificate{ca.Client(t, "alice").TLS}})
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1: %v, want a protocol version alert", err)
	}
}

// Ensure versions = [tlsv1.3] refuses TLS 1.2 clients.
func TestVersions(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	srv := ca.Server(t, "server")
	r, err := Load(Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile, Versions: []uint16{tls.VersionTLS13}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("TLS 1.2 client accepted with versions = tlsv1.3 only")
	}
	for _, tc := range []struct {
		in   string
		want uint16
		err  string
	}{
		{"tlsv1.3", tls.VersionTLS13, ""},
		{"tlsv1.2", tls.VersionTLS12, ""},
		{"tlsv1.1", 0, "TLS 1.2 and 1.3 only"},
		{"tlsv1", 0, "TLS 1.2 and 1.3 only"},
		{"sslv3", 0, "TLS 1.2 and 1.3 only"},
		{"tls13", 0, "is not a TLS version"},
	} {
		got, err := ParseVersion(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// Ensure a missing cacertfile for verify_peer and missing files are
// refused with the file named.
func TestLoadErrors(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	srv := ca.Server(t, "server")
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{CertFile: srv.CertFile}, "certfile and keyfile are both needed"},
		{Options{CertFile: "/nonexistent.pem", KeyFile: srv.KeyFile}, "/nonexistent.pem"},
		{Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile, VerifyPeer: true}, "needs a cacertfile"},
		{Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CACertFile: ca.CAFile, FailIfNoPeerCert: true}, "fail_if_no_peer_cert = true needs verify = verify_peer"},
		{Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CACertFile: srv.KeyFile}, "no PEM certificate"},
	} {
		if _, err := Load(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
}

// Ensure the connection's details and the EXTERNAL user name read as
// RabbitMQ's.
func TestConnInfoAndPeerName(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	srv := ca.Server(t, "server")
	r, err := Load(Options{CACertFile: ca.CAFile, CertFile: srv.CertFile, KeyFile: srv.KeyFile, VerifyPeer: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	states := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := tls.NewListener(ln, r.Config()).Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		tc.Handshake()
		states <- tc.ConnectionState()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, Certificates: []tls.Certificate{ca.Client(t, "alice").TLS}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := <-states
	in := ConnInfo(cs)
	if in.Protocol != "tlsv1.2" || in.KeyExchange != "ecdhe_ecdsa" || in.Cipher != "aes_128_gcm" || in.Hash != "aead" {
		t.Errorf("ConnInfo = %+v", in)
	}
	if in.PeerCertSubject != "CN=alice,O=Warren tests" || in.PeerCertIssuer != "CN=ca,O=Warren tests" || !strings.Contains(in.PeerCertValidity, " - ") {
		t.Errorf("peer cert: %q, %q, %q", in.PeerCertSubject, in.PeerCertIssuer, in.PeerCertValidity)
	}
	if name, err := PeerName(cs, CertLogin{From: LoginFromDN}); name != "CN=alice,O=Warren tests" || err != nil {
		t.Errorf("PeerName(DN) = %q, %v", name, err)
	}
	if name, err := PeerName(cs, CertLogin{From: LoginFromCN}); name != "alice" || err != nil {
		t.Errorf("PeerName(CN) = %q, %v", name, err)
	}
	if _, err := PeerName(tls.ConnectionState{}, CertLogin{From: LoginFromCN}); err == nil || err.Error() != "connection peer presented no TLS (x.509) certificate" {
		t.Errorf("PeerName without a certificate: %v", err)
	}
	unverified := cs
	unverified.VerifiedChains = nil
	if _, err := PeerName(unverified, CertLogin{From: LoginFromCN}); err == nil || err.Error() != "TLS configuration is unsafe" {
		t.Errorf("PeerName of an unverified certificate: %v", err)
	}
	for _, tc := range [][4]string{
		{"TLS_AES_128_GCM_SHA256", "any", "aes_128_gcm", "aead"},
		{"TLS_CHACHA20_POLY1305_SHA256", "any", "chacha20_poly1305", "aead"},
		{"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ecdhe_rsa", "aes_256", "sha"},
		{"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ecdhe_rsa", "chacha20_poly1305", "aead"},
	} {
		kx, c, h := suiteParts(tc[0])
		if kx != tc[1] || c != tc[2] || h != tc[3] {
			t.Errorf("suiteParts(%s) = %s %s %s, want %s %s %s", tc[0], kx, c, h, tc[1], tc[2], tc[3])
		}
	}
}

// Ensure subject_alternative_name takes the index-th name of the type,
// as rabbit_ssl does: dns, email, uri, ip (in text form) and other_name
// (its value as a string), "no name found" past the last.
func TestPeerNameSAN(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	// The SAN extension by hand, for otherName, which crypto/x509 does
	// not write: a UPN otherName, two DNS names, an email address, a
	// URI and an IP address.
	upn, err := asn1.Marshal(struct {
		ID    asn1.ObjectIdentifier
		Value asn1.RawValue `asn1:"tag:0,explicit"`
	}{asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 20, 2, 3}, asn1.RawValue{Tag: asn1.TagUTF8String, Bytes: []byte("alice@upn")}})
	if err != nil {
		t.Fatal(err)
	}
	var upnSeq asn1.RawValue
	asn1.Unmarshal(upn, &upnSeq)
	names := []asn1.RawValue{
		{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: upnSeq.Bytes},
		{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte("first.example")},
		{Class: asn1.ClassContextSpecific, Tag: 1, Bytes: []byte("alice@example.com")},
		{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte("second.example")},
		{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte("spiffe://example/alice")},
		{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: []byte{192, 0, 2, 7}},
	}
	ext, err := asn1.Marshal(names)
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.ClientWith(t, "alice", func(c *x509.Certificate) {
		c.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Value: ext}}
	})
	leaf, err := x509.ParseCertificate(cert.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}
	for _, tc := range []struct {
		typ   string
		index int
		want  string
	}{
		{"", 0, "first.example"},
		{SANDNS, 1, "second.example"},
		{SANEmail, 0, "alice@example.com"},
		{SANURI, 0, "spiffe://example/alice"},
		{SANIP, 0, "192.0.2.7"},
		{SANOtherName, 0, "alice@upn"},
		{SANDNS, 2, ""},
		{SANEmail, 1, ""},
	} {
		got, err := PeerName(cs, CertLogin{From: LoginFromSAN, SANType: tc.typ, SANIndex: tc.index})
		if tc.want == "" {
			if err == nil || err.Error() != "no name found" {
				t.Errorf("%s[%d]: got %q, %v, want no name found", tc.typ, tc.index, got, err)
			}
			continue
		}
		if got != tc.want || err != nil {
			t.Errorf("%s[%d]: got %q, %v, want %q", tc.typ, tc.index, got, err, tc.want)
		}
	}
}

// Ensure ParseCipher takes OpenSSL and IANA names of the suites Go
// offers, in any case, and refuses the others.
func TestParseCipher(t *testing.T) {
	for _, tc := range []struct {
		name string
		want uint16
	}{
		{"ECDHE-ECDSA-AES256-GCM-SHA384", tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{"ecdhe-rsa-chacha20-poly1305", tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256},
		{"ECDHE-RSA-AES128-SHA", tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA},
		{"TLS_AES_128_GCM_SHA256", tls.TLS_AES_128_GCM_SHA256},
		{"TLS_CHACHA20_POLY1305_SHA256", tls.TLS_CHACHA20_POLY1305_SHA256},
	} {
		if got, err := ParseCipher(tc.name); got != tc.want || err != nil {
			t.Errorf("ParseCipher(%s) = %#04x, %v, want %#04x", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"DHE-RSA-AES256-GCM-SHA384", "AES128-SHA", "DES-CBC3-SHA", "ECDHE-ECDSA-AES256-SHA384", "RC4-SHA", ""} {
		if _, err := ParseCipher(bad); err == nil {
			t.Errorf("ParseCipher(%q): no error", bad)
		}
	}
}

// Ensure a list without TLS 1.3 suites turns TLS 1.3 off, one of TLS
// 1.3 suites only turns TLS 1.2 off, and one at odds with versions is
// refused.
func TestCiphersVersions(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	srv := ca.Server(t, "server")
	for _, tc := range []struct {
		suites, versions []uint16
		min, max         uint16
		fails            bool
	}{
		{suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, min: tls.VersionTLS12, max: tls.VersionTLS12},
		{suites: []uint16{tls.TLS_AES_128_GCM_SHA256}, min: tls.VersionTLS13, max: tls.VersionTLS13},
		{suites: []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, min: tls.VersionTLS12, max: tls.VersionTLS13},
		{suites: []uint16{tls.TLS_AES_128_GCM_SHA256}, versions: []uint16{tls.VersionTLS12}, fails: true},
	} {
		r, err := Load(Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CipherSuites: tc.suites, Versions: tc.versions})
		if tc.fails {
			if err == nil {
				t.Errorf("%v with %v: no error", tc.suites, tc.versions)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if c := r.cur.Load(); c.MinVersion != tc.min || c.MaxVersion != tc.max {
			t.Errorf("%v: versions %#x-%#x, want %#x-%#x", tc.suites, c.MinVersion, c.MaxVersion, tc.min, tc.max)
		}
	}
}

// Ensure an encrypted keyfile loads with its password, PKCS#8 (as
// OpenSSL 3 writes it; also from the openssl command when there is one)
// and OpenSSL's legacy PEM encryption alike, and a wrong password is an
// error at load.
func TestEncryptedKey(t *testing.T) {
	ca := testutil.NewCA(t, "ca")
	srv := ca.Server(t, "server")
	files := map[string]string{
		"pkcs8":  testutil.EncryptKeyPKCS8(t, srv.KeyFile, "s3cret"),
		"legacy": testutil.EncryptKeyLegacy(t, srv.KeyFile, "s3cret"),
	}
	if path, err := exec.LookPath("openssl"); err == nil {
		out := srv.KeyFile + ".openssl"
		cmd := exec.Command(path, "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", srv.KeyFile, "-out", out, "-passout", "pass:s3cret")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl: %v: %s", err, b)
		}
		files["openssl"] = out
	}
	for name, keyFile := range files {
		if _, err := Load(Options{CertFile: srv.CertFile, KeyFile: keyFile, Password: "s3cret"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := Load(Options{CertFile: srv.CertFile, KeyFile: keyFile, Password: "wrong"}); err == nil {
			t.Errorf("%s with a wrong password: loaded", name)
		}
		if _, err := Load(Options{CertFile: srv.CertFile, KeyFile: keyFile}); err == nil {
			t.Errorf("%s without a password: loaded", name)
		}
	}
}
