package rabbitconf

import (
	_ "embed"
	"strings"
	"sync"
)

// rabbitmqKeys is every key of RabbitMQ's schemas, by application; its
// header says where it comes from.
//
//go:embed rabbitmq_keys.txt
var rabbitmqKeys string

// keyPattern is one key of a RabbitMQ schema, split into segments; a
// segment starting with $ matches any segment.
type keyPattern struct {
	app  string
	segs []string
}

var schemaKeys = sync.OnceValue(func() []keyPattern {
	var keys []keyPattern
	app := ""
	for line := range strings.Lines(rabbitmqKeys) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			app = strings.Trim(line, "[]")
		default:
			keys = append(keys, keyPattern{app, strings.Split(line, ".")})
		}
	}
	return keys
})

// Schema reports whether key (as in Entry.Key) is one of RabbitMQ 4.3's
// configuration keys, and which application's schema defines it: "rabbit"
// for the broker, or a plugin such as "rabbitmq_management".
func Schema(key string) (app string, ok bool) {
	segs := splitKey(key)
	for _, k := range schemaKeys() {
		if matchKey(k.segs, segs) {
			return k.app, true
		}
	}
	return "", false
}

// Match reports whether key (as in Entry.Key) fits pattern, a key in
// which a segment starting with $ matches any one segment
// ("loopback_users.$user" matches `loopback_users.john\.doe`).
func Match(pattern, key string) bool {
	return matchKey(strings.Split(pattern, "."), splitKey(key))
}

// matchKey reports whether segs fit pattern, a $ segment matching any.
func matchKey(pattern, segs []string) bool {
	if len(pattern) != len(segs) {
		return false
	}
	for i, p := range pattern {
		if !strings.HasPrefix(p, "$") && p != segs[i] {
			return false
		}
	}
	return true
}
