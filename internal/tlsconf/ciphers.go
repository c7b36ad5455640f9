package tlsconf

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// opensslNames maps the OpenSSL names of the cipher suites Go's TLS
// offers (tls.CipherSuites) to their IANA names. TLS 1.3 suites have one
// name in both.
var opensslNames = map[string]string{
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
}

// ParseCipher reads an ssl_options.ciphers value: the OpenSSL name
// (ECDHE-ECDSA-AES256-GCM-SHA384) or the IANA name
// (TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384) of a suite Go's TLS offers,
// TLS 1.3's included (TLS_AES_256_GCM_SHA384). Suites Go does not
// implement (DHE, CBC with SHA-384, RSA key exchange, 3DES, RC4, ...)
// are refused.
func ParseCipher(name string) (uint16, error) {
	iana := name
	if n, ok := opensslNames[strings.ToUpper(name)]; ok {
		iana = n
	}
	for _, s := range tls.CipherSuites() {
		if strings.EqualFold(s.Name, iana) {
			return s.ID, nil
		}
	}
	var known []string
	for openssl := range opensslNames {
		known = append(known, openssl)
	}
	slices.Sort(known)
	return 0, fmt.Errorf("%q is not a cipher suite Warren offers (TLS 1.3: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256; TLS 1.2: %s, or their IANA names)", name, strings.Join(known, ", "))
}

// isTLS13Suite reports whether id is a TLS 1.3 cipher suite.
func isTLS13Suite(id uint16) bool {
	for _, s := range tls.CipherSuites() {
		if s.ID == id {
			return slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13})
		}
	}
	return false
}

// applyCiphers restricts cfg to suites: the TLS 1.2 ones are
// tls.Config.CipherSuites, in order. Go has every TLS 1.3 suite on
// whenever TLS 1.3 is, so a list naming none of them turns TLS 1.3 off
// and a list of TLS 1.3 suites only turns TLS 1.2 off, as the same list
// does with Erlang's ssl.
func applyCiphers(cfg *tls.Config, suites []uint16) error {
	if len(suites) == 0 {
		return nil
	}
	var has13 bool
	var v12 []uint16
	for _, id := range suites {
		if isTLS13Suite(id) {
			has13 = true
		} else {
			v12 = append(v12, id)
		}
	}
	if !has13 {
		cfg.MaxVersion = min(cfg.MaxVersion, tls.VersionTLS12)
	}
	if len(v12) == 0 {
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS13)
	}
	if cfg.MinVersion > cfg.MaxVersion {
		return fmt.Errorf("tls: the ciphers leave no TLS version of versions to speak")
	}
	cfg.CipherSuites = v12
	return nil
}
