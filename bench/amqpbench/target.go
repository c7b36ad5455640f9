package amqpbench

import (
	"fmt"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Target is a named broker URL for side-by-side runs. The URL is left out
// of JSON; Redacted is the same without its password.
type Target struct {
	Name     string `json:"name"`
	URL      string `json:"-"`
	Redacted string `json:"url"`
}

// ParseTargets parses "name=amqp://...,name2=amqp://...". A bare URL is
// named after its host:port. Names must be unique. URLs must not contain
// commas.
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, u, ok := strings.Cut(item, "=")
		// "amqp://..." alone: the '=' (if any) is inside the URL.
		if !ok || strings.Contains(name, "://") {
			name, u = "", item
		}
		name, u = strings.TrimSpace(name), strings.TrimSpace(u)
		uri, err := amqp.ParseURI(u)
		if err != nil {
			return nil, fmt.Errorf("%w: target %q: %v", ErrConfig, RedactURL(u), err)
		}
		if name == "" {
			name = fmt.Sprintf("%s:%d", uri.Host, uri.Port)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: target name %q used twice", ErrConfig, name)
		}
		seen[name] = true
		out = append(out, Target{Name: name, URL: u, Redacted: RedactURL(u)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no targets in %q", ErrConfig, s)
	}
	return out, nil
}

// ParsePIDs parses "name=PID,name2=/path/to/pidfile" into target name →
// process id. A value that is not a number is read as a pid file (read now,
// once).
func ParsePIDs(s string) (map[string]int, error) {
	out := map[string]int{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, v, ok := strings.Cut(item, "=")
		name, v = strings.TrimSpace(name), strings.TrimSpace(v)
		if !ok || name == "" || v == "" {
			return nil, fmt.Errorf("%w: pid %q: want name=PID or name=PIDFILE", ErrConfig, item)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: pid for %q given twice", ErrConfig, name)
		}
		pid, err := strconv.Atoi(v)
		if err != nil {
			if pid, err = ReadPIDFile(v); err != nil {
				return nil, fmt.Errorf("%w: pid for %q: %v", ErrConfig, name, err)
			}
		}
		if pid < 1 {
			return nil, fmt.Errorf("%w: pid for %q: %d", ErrConfig, name, pid)
		}
		out[name] = pid
	}
	return out, nil
}
