package queues

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"
)

// Password hashing algorithms, by RabbitMQ's module names.
const (
	HashSHA256 = "rabbit_password_hashing_sha256" // the default
	HashSHA512 = "rabbit_password_hashing_sha512"
	HashMD5    = "rabbit_password_hashing_md5" // accepted for imports from old nodes
)

// hasher returns the hash function of a RabbitMQ hashing algorithm name
// ("" is SHA-256).
func hasher(algo string) (func() hash.Hash, bool) {
	switch algo {
	case "", HashSHA256:
		return sha256.New, true
	case HashSHA512:
		return sha512.New, true
	case HashMD5:
		return md5.New, true
	}
	return nil, false
}

// ValidHash reports whether hash is a well-formed RabbitMQ password hash
// for algo: base64 of a 4-byte salt and the digest. The empty hash is
// valid: a user without a password, who cannot log in with one.
func ValidHash(hash, algo string) error {
	h, ok := hasher(algo)
	if !ok {
		return fmt.Errorf("unknown hashing algorithm %q", algo)
	}
	if hash == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(raw) != 4+h().Size() {
		return fmt.Errorf("password_hash is not a %s hash", algoName(algo))
	}
	return nil
}

func algoName(algo string) string {
	if algo == "" {
		return HashSHA256
	}
	return algo
}

// checkHash reports whether password matches hash under algo.
func checkHash(hash, algo, password string) bool {
	newH, ok := hasher(algo)
	if !ok || hash == "" {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(raw) != 4+newH().Size() {
		return false
	}
	h := newH()
	h.Write(raw[:4])
	h.Write([]byte(password))
	return subtle.ConstantTimeCompare(h.Sum(nil), raw[4:]) == 1
}

// PutUser creates or replaces a user as given: its password hash and
// algorithm (as a definitions file or the HTTP API's password_hash carry
// them), its tags and, unless u.Limits is nil, its limits. Its
// permissions are kept.
func (b *Broker) PutUser(u User) error {
	if u.Name == "" {
		return errors.New("user name is empty")
	}
	if err := ValidHash(u.PasswordHash, u.HashingAlgorithm); err != nil {
		return err
	}
	if u.HashingAlgorithm == HashSHA256 {
		u.HashingAlgorithm = ""
	}
	if u.Tags == nil {
		u.Tags = []string{}
	}
	return b.execErr(&cmdPutUser{u, u.Limits == nil})
}

func (c *cmdPutUser) apply(b *Broker) (any, error) {
	u := c.User
	if c.KeepLimits {
		var old User
		if err := b.cat.get(userKey(u.Name), &old); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		u.Limits = old.Limits
	}
	if len(u.Limits) == 0 {
		u.Limits = nil
	}
	return nil, b.cat.put(userKey(u.Name), u)
}

// GetUser returns a user.
func (b *Broker) GetUser(name string) (User, error) {
	var u User
	if err := b.cat.get(userKey(name), &u); err != nil {
		return User{}, fmt.Errorf("user %q: %w", name, err)
	}
	return u.normal(), nil
}

func (u User) normal() User {
	if u.HashingAlgorithm == "" {
		u.HashingAlgorithm = HashSHA256
	}
	if u.Tags == nil {
		u.Tags = []string{}
	}
	return u
}

// Users returns every user, by name.
func (b *Broker) Users() ([]User, error) {
	var out []User
	err := b.cat.scan([]byte("u/"), func(_, v []byte) error {
		var u User
		if err := unmarshal(v, &u); err != nil {
			return err
		}
		out = append(out, u.normal())
		return nil
	})
	return out, err
}

// PutVHost creates a virtual host or, if it exists, replaces its
// description, tags, default queue type and, unless v.Limits is nil, its
// limits. created says which.
func (b *Broker) PutVHost(v VHost) (created bool, err error) {
	if v.Name == "" {
		return false, errors.New("vhost name is empty")
	}
	switch v.DefaultQueueType {
	case "", "classic", "quorum", "stream":
	default:
		return false, fmt.Errorf("default queue type %q is not one of classic, quorum, stream", v.DefaultQueueType)
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	res, err := b.exec(&cmdPutVHost{v, v.Limits == nil})
	if err != nil {
		return false, err
	}
	return res.(bool), nil
}

func (c *cmdPutVHost) apply(b *Broker) (any, error) {
	v := c.VHost
	var old VHost
	err := b.cat.get(vhostKey(v.Name), &old)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	if c.KeepLimits {
		v.Limits = old.Limits
	}
	if len(v.Limits) == 0 {
		v.Limits = nil
	}
	return !exists, b.cat.put(vhostKey(v.Name), v)
}

// GetVHost returns a virtual host.
func (b *Broker) GetVHost(name string) (VHost, error) {
	var v VHost
	if err := b.cat.get(vhostKey(name), &v); err != nil {
		return VHost{}, fmt.Errorf("vhost %q: %w", name, err)
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	return v, nil
}

// VHosts returns every virtual host, by name.
func (b *Broker) VHosts() ([]VHost, error) {
	var out []VHost
	err := b.cat.scan([]byte("v/"), func(_, val []byte) error {
		var v VHost
		if err := unmarshal(val, &v); err != nil {
			return err
		}
		if v.Tags == nil {
			v.Tags = []string{}
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// UserPermissions are one user's permissions in one virtual host.
type UserPermissions struct {
	User  string `json:"user"`
	VHost string `json:"vhost"`
	Permissions
}

// GetPermissions returns user's permissions in vhost (ErrNotFound: none).
func (b *Broker) GetPermissions(user, vhost string) (Permissions, error) {
	var p Permissions
	if err := b.cat.get(permKey(vhost, user), &p); err != nil {
		return Permissions{}, fmt.Errorf("permissions of %q in %q: %w", user, vhost, err)
	}
	return p, nil
}

// AllPermissions returns every permission entry, by vhost then user.
func (b *Broker) AllPermissions() ([]UserPermissions, error) {
	var out []UserPermissions
	err := b.cat.scan([]byte("p/"), func(k, v []byte) error {
		var p Permissions
		if err := unmarshal(v, &p); err != nil {
			return err
		}
		vh, u := splitPair(string(k[2:]))
		out = append(out, UserPermissions{User: u, VHost: vh, Permissions: p})
		return nil
	})
	return out, err
}

// TopicPermission is a user's topic permission on one exchange of a
// virtual host: regular expressions over routing keys, as RabbitMQ's
// topic authorisation.
type TopicPermission struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

func topicPermKey(v, u, x string) []byte { return []byte("tp/" + v + "\x00" + u + "\x00" + x) }

// SetTopicPermission sets a topic permission; CheckTopicPermission
// enforces it (topic_auth.go).
func (b *Broker) SetTopicPermission(p TopicPermission) error {
	for _, re := range []string{p.Write, p.Read} {
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("invalid regular expression %q: %w", re, err)
		}
	}
	return b.execErr(&cmdSetTopicPermission{p})
}

func (c *cmdSetTopicPermission) apply(b *Broker) (any, error) {
	p := c.TopicPermission
	if ok, _ := b.cat.has(userKey(p.User)); !ok {
		return nil, fmt.Errorf("user %q: %w", p.User, ErrNotFound)
	}
	if ok, _ := b.cat.has(vhostKey(p.VHost)); !ok {
		return nil, fmt.Errorf("vhost %q: %w", p.VHost, ErrNotFound)
	}
	return nil, b.topicAuthChanged(b.cat.put(topicPermKey(p.VHost, p.User, p.Exchange), p))
}

// ClearTopicPermissions removes user's topic permissions in vhost on
// exchange, or on every exchange when exchange is "".
func (b *Broker) ClearTopicPermissions(user, vhost, exchange string) error {
	return b.execErr(&cmdClearTopicPermissions{User: user, VHost: vhost, Exchange: exchange})
}

func (c *cmdClearTopicPermissions) apply(b *Broker) (any, error) {
	if c.Exchange != "" {
		return nil, b.topicAuthChanged(b.cat.delete(topicPermKey(c.VHost, c.User, c.Exchange)))
	}
	return nil, b.topicAuthChanged(b.cat.deletePrefix(topicPermKey(c.VHost, c.User, "")))
}

// TopicPermissions returns the topic permissions, by vhost, user and
// exchange.
func (b *Broker) TopicPermissions() ([]TopicPermission, error) {
	var out []TopicPermission
	err := b.cat.scan([]byte("tp/"), func(_, v []byte) error {
		var p TopicPermission
		if err := unmarshal(v, &p); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// HasTag reports whether u has tag.
func (u User) HasTag(tag string) bool { return slices.Contains(u.Tags, tag) }

// ParseTags splits RabbitMQ's comma-separated tag list ("a, b" or "").
func ParseTags(s string) []string {
	out := []string{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// Streams returns the streams of vhost ("" for every vhost), by vhost and
// name.
func (b *Broker) Streams(vhost string) ([]StreamDef, error) {
	prefix := []byte("s/")
	if vhost != "" {
		prefix = streamKey(vhost, "")
	}
	var out []StreamDef
	err := b.cat.scan(prefix, func(_, v []byte) error {
		var def StreamDef
		if err := unmarshal(v, &def); err != nil {
			return err
		}
		out = append(out, def)
		return nil
	})
	return out, err
}
