package definitions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/warren-mq/warren/queues"
)

// LoadFile imports the definitions at path into b, for rabbitmq.conf's
// load_definitions (definitions.local.path) at boot: a file, or a
// directory whose *.json files (not its subdirectories) are read in name
// order, as RabbitMQ reads them. Each is a whole broker's definitions.
//
// Where RabbitMQ imports a directory's files one after the other (a
// failing file leaving the earlier ones applied), LoadFile parses them
// all and imports them as one document, so that a file may use what an
// earlier one defines and an invalid one applies nothing; an entity two
// files define differently is refused. An error names the file when it
// is one file's.
func LoadFile(b *queues.Broker, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("definitions: %w", err)
	}
	files := []string{path}
	if fi.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return fmt.Errorf("definitions: %w", err)
		}
		files = files[:0]
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		slices.Sort(files)
	}
	merged := &Definitions{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("definitions: %w", err)
		}
		d, err := Parse(data)
		if err != nil {
			return fileError(f, err)
		}
		if len(files) == 1 {
			return fileError(f, Import(b, d, ""))
		}
		c := newChecker(b, d, "")
		c.orphans() // a single vhost's export: name its file
		if err := c.r.err(); err != nil {
			return fileError(f, err)
		}
		merge(merged, d)
	}
	return Import(b, merged, "")
}

// fileError names file in an *InvalidError's reasons.
func fileError(file string, err error) error {
	var ie *InvalidError
	if errors.As(err, &ie) {
		out := &InvalidError{More: ie.More}
		for _, r := range ie.Reasons {
			out.Reasons = append(out.Reasons, file+": "+r)
		}
		return out
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// merge appends src's entities to dst. Users without a hashing algorithm
// get src's default (by its version), which the merged document's
// version no longer tells.
func merge(dst, src *Definitions) {
	algo := defaultAlgorithm(src)
	for _, u := range src.Users {
		if u.HashingAlgorithm == "" && u.Password == "" {
			u.HashingAlgorithm = algo
		}
		dst.Users = append(dst.Users, u)
	}
	dst.VHosts = append(dst.VHosts, src.VHosts...)
	dst.Permissions = append(dst.Permissions, src.Permissions...)
	dst.TopicPermissions = append(dst.TopicPermissions, src.TopicPermissions...)
	dst.Parameters = append(dst.Parameters, src.Parameters...)
	dst.GlobalParameters = append(dst.GlobalParameters, src.GlobalParameters...)
	dst.Policies = append(dst.Policies, src.Policies...)
	dst.Queues = append(dst.Queues, src.Queues...)
	dst.Exchanges = append(dst.Exchanges, src.Exchanges...)
	dst.Bindings = append(dst.Bindings, src.Bindings...)
}
