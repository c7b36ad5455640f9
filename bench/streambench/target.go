package streambench

import (
	"fmt"
	"strings"
)

// Target is a named broker address for side-by-side runs.
type Target struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// ParseTargets parses "name=host:port,name2=host:port". A bare "host:port"
// is named after itself. Names must be unique.
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "=")
		if !ok {
			name, addr = item, item
		}
		name, addr = strings.TrimSpace(name), strings.TrimSpace(addr)
		if name == "" {
			return nil, fmt.Errorf("%w: target %q: empty name", ErrConfig, item)
		}
		if _, _, err := splitAddr(addr); err != nil {
			return nil, fmt.Errorf("target %q: %w", name, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: target name %q used twice", ErrConfig, name)
		}
		seen[name] = true
		out = append(out, Target{Name: name, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no targets in %q", ErrConfig, s)
	}
	return out, nil
}
