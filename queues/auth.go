package queues

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"regexp"

	"github.com/warren-mq/warren/queues/qerr"
)

// Errors of access control.
var (
	// ErrAuthFailed is a wrong user name or password.
	ErrAuthFailed = errors.New("queues: authentication failed")
	// ErrLoopbackOnly is a user restricted to loopback connecting from afar.
	ErrLoopbackOnly = errors.New("queues: user may only connect from loopback")
	// ErrAccessRefused is a missing permission or virtual host access
	// (qerr.ErrAccessRefused).
	ErrAccessRefused = qerr.ErrAccessRefused
)

// User is a broker user.
type User struct {
	Name         string `json:"name"`
	PasswordHash string `json:"password_hash"` // base64(salt(4) | hash(salt | password)); "": no password
	// HashingAlgorithm is RabbitMQ's module name; "" is SHA-256.
	HashingAlgorithm string   `json:"hashing_algorithm,omitempty"`
	Tags             []string `json:"tags,omitempty"`
	// Limits are RabbitMQ's user limits (max-connections, max-channels),
	// enforced as RabbitMQ does (limits.go). nil in PutUser keeps the
	// user's current limits; an empty map clears them.
	Limits map[string]int64 `json:"limits,omitempty"`
}

// Permissions are a user's rights in one virtual host: regular expressions
// over resource names, as in RabbitMQ ("" matches nothing, ".*" all).
type Permissions struct {
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// Perm names one of the three permission kinds.
type Perm int

// Permission kinds.
const (
	PermConfigure Perm = iota
	PermWrite
	PermRead
)

func (p Perm) String() string {
	return [...]string{"configure", "write", "read"}[p]
}

// HashPassword returns RabbitMQ's rabbit_password_hashing_sha256 form of
// password: base64 of a random 4-byte salt followed by SHA-256(salt|password).
func HashPassword(password string) string {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		panic(fmt.Sprintf("queues: crypto/rand: %v", err)) // never fails on Linux
	}
	return hashWithSalt(salt[:], password)
}

func hashWithSalt(salt []byte, password string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(h.Sum(bytes.Clone(salt)))
}

// CheckPassword reports whether password matches a HashPassword result.
func CheckPassword(hash, password string) bool {
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(raw) != 4+sha256.Size {
		return false
	}
	want := hashWithSalt(raw[:4], password)
	return subtle.ConstantTimeCompare([]byte(want), []byte(hash)) == 1
}

// isLoopback reports whether addr is a loopback address (or not a network
// address at all, as with in-process pipes).
func isLoopback(addr net.Addr) bool {
	if addr == nil {
		return true
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// permMatch reports whether resource matches the permission regexp re.
// As in RabbitMQ the expression is not anchored ("^...$" anchors it) and
// the empty expression matches nothing.
func permMatch(re, resource string) bool {
	if re == "" {
		return false
	}
	ok, err := regexp.MatchString(re, resource)
	return err == nil && ok
}
