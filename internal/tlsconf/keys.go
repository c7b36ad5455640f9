package tlsconf

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
)

// loadKeyPair reads a certificate chain and its private key, which with
// a password (ssl_options.password) may be encrypted: PKCS#8
// ("ENCRYPTED PRIVATE KEY", PBES2 with PBKDF2 and AES-CBC or 3DES, what
// OpenSSL 3 writes) or OpenSSL's older PEM encryption ("Proc-Type:
// 4,ENCRYPTED").
func loadKeyPair(certFile, keyFile, password string) (tls.Certificate, error) {
	if password == "" {
		return tls.LoadX509KeyPair(certFile, keyFile)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	var block *pem.Block
	for rest := keyPEM; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			return tls.Certificate{}, errors.New("no PEM private key in the keyfile")
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" || block.Type == "PRIVATE KEY" || block.Type == "EC PRIVATE KEY" || block.Type == "RSA PRIVATE KEY" {
			break
		}
	}
	var der []byte
	switch {
	case block.Type == "ENCRYPTED PRIVATE KEY":
		der, err = decryptPKCS8(block.Bytes, []byte(password))
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	case x509.IsEncryptedPEMBlock(block): //nolint:staticcheck // OpenSSL's legacy format, still written by openssl rsa -aes256
		der, err = x509.DecryptPEMBlock(block, []byte(password)) //nolint:staticcheck // as above
		block = &pem.Block{Type: block.Type, Bytes: der}
	}
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("decrypting the private key with password: %w", err)
	}
	return tls.X509KeyPair(certPEM, pem.EncodeToMemory(block))
}

// PKCS#5 and PKCS#8 object identifiers.
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type encryptedPrivateKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

type pbes2Params struct {
	KDF, Cipher pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// errKeyPassword is a wrong password (or a damaged key): the padding
// does not check.
var errKeyPassword = errors.New("tls: wrong password for the private key")

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo (PBES2) to the DER
// of its PKCS#8 PrivateKeyInfo.
func decryptPKCS8(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("tls: encrypted private key: %w", err)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("tls: encrypted private key: scheme %v is not PBES2", info.Algorithm.Algorithm)
	}
	var p pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("tls: PBES2 parameters: %w", err)
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("tls: key derivation %v is not PBKDF2", p.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(p.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("tls: PBKDF2 parameters: %w", err)
	}
	var prf func() hash.Hash
	switch a := kdf.PRF.Algorithm; {
	case len(a) == 0 || a.Equal(oidHMACSHA1):
		prf = sha1.New
	case a.Equal(oidHMACSHA256):
		prf = sha256.New
	case a.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("tls: PBKDF2 PRF %v is not supported", a)
	}
	var keyLen int
	var newBlock func([]byte) (cipher.Block, error)
	switch a := p.Cipher.Algorithm; {
	case a.Equal(oidAES128CBC):
		keyLen, newBlock = 16, aes.NewCipher
	case a.Equal(oidAES192CBC):
		keyLen, newBlock = 24, aes.NewCipher
	case a.Equal(oidAES256CBC):
		keyLen, newBlock = 32, aes.NewCipher
	case a.Equal(oidDESEDE3CBC):
		keyLen, newBlock = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("tls: cipher %v is not supported", a)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(p.Cipher.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("tls: cipher IV: %w", err)
	}
	key, err := pbkdf2.Key(prf, string(password), kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("tls: PBKDF2: %w", err)
	}
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	if len(iv) != block.BlockSize() || len(info.Data) == 0 || len(info.Data)%block.BlockSize() != 0 {
		return nil, errors.New("tls: encrypted private key: bad IV or data length")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	n := int(out[len(out)-1])
	if n == 0 || n > block.BlockSize() {
		return nil, errKeyPassword
	}
	for _, b := range out[len(out)-n:] {
		if int(b) != n {
			return nil, errKeyPassword
		}
	}
	return out[:len(out)-n], nil
}
