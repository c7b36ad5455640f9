package testutil

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"os"
	"testing"
)

// EncryptKeyPKCS8 writes the PEM private key of keyFile encrypted with
// password as OpenSSL 3 writes it by default (PKCS#8 PBES2: PBKDF2 with
// HMAC-SHA256, AES-256-CBC) next to it, and returns the new file.
func EncryptKeyPKCS8(t testing.TB, keyFile, password string) string {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("%s: not a PKCS#8 PEM key", keyFile)
	}
	salt, iv := make([]byte, 16), make([]byte, aes.BlockSize)
	rand.Read(salt)
	rand.Read(iv)
	const iter = 2048
	key, err := pbkdf2.Key(sha256.New, password, salt, iter, 32)
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(block.Bytes)%aes.BlockSize
	plain := append(append([]byte(nil), block.Bytes...), make([]byte, pad)...)
	for i := len(plain) - pad; i < len(plain); i++ {
		plain[i] = byte(pad)
	}
	c, _ := aes.NewCipher(key)
	enc := make([]byte, len(plain))
	cipher.NewCBCEncrypter(c, iv).CryptBlocks(enc, plain)
	must := func(v any) []byte {
		der, err := asn1.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	kdf := must(struct {
		Salt []byte
		Iter int
		PRF  pkix.AlgorithmIdentifier
	}{salt, iter, pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}, Parameters: asn1.NullRawValue}})
	params := must(struct{ KDF, Cipher pkix.AlgorithmIdentifier }{
		pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}, Parameters: asn1.RawValue{FullBytes: kdf}},
		pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}, Parameters: asn1.RawValue{FullBytes: must(iv)}},
	})
	der := must(struct {
		Alg  pkix.AlgorithmIdentifier
		Data []byte
	}{pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}, Parameters: asn1.RawValue{FullBytes: params}}, enc})
	out := keyFile + ".pkcs8-enc"
	if err := os.WriteFile(out, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// EncryptKeyLegacy writes keyFile's key in OpenSSL's older PEM
// encryption (Proc-Type: 4,ENCRYPTED; AES-256-CBC) and returns the file.
func EncryptKeyLegacy(t testing.TB, keyFile, password string) string {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	enc, err := x509.EncryptPEMBlock(rand.Reader, block.Type, block.Bytes, []byte(password), x509.PEMCipherAES256) //nolint:staticcheck // the legacy format on purpose
	if err != nil {
		t.Fatal(err)
	}
	out := keyFile + ".legacy-enc"
	if err := os.WriteFile(out, pem.EncodeToMemory(enc), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
