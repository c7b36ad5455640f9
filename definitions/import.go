package definitions

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/policy"
)

// Import applies d to b. With vhost "" d is a whole broker's definitions
// (every entity names its vhost); otherwise d is the definitions of one
// virtual host, which must exist, as GET /api/definitions/{vhost} exports
// them: its exchanges, queues, bindings, policies and parameters go to
// vhost whatever vhost they name, and its users, vhosts, permissions,
// topic permissions and global parameters are ignored, as RabbitMQ does
// (a missing vhost is queues.ErrNotFound).
//
// Import validates everything before it applies anything: when it
// returns an *InvalidError (errors.Is ErrInvalid), the broker is as it
// was. It applies through the broker's API in RabbitMQ's order (users,
// vhosts, permissions, exchanges, topic permissions, global parameters,
// policies, parameters, queues, bindings); should a change still fail
// (I/O, or a client changing what was checked meanwhile), it stops there
// and returns an error that errors.Is ErrPartial and the cause, saying
// how far it got: what was applied stays.
func Import(b *queues.Broker, d *Definitions, vhost string) error {
	return importDefs(b, d, vhost, nil)
}

// importDefs is Import; beforeApply, when not nil, runs between the
// validation and the changes (a test's concurrent client).
func importDefs(b *queues.Broker, d *Definitions, vhost string, beforeApply func()) error {
	if vhost != "" && !b.VHostExists(vhost) {
		return fmt.Errorf("definitions: vhost %q: %w", vhost, queues.ErrNotFound)
	}
	if d == nil {
		d = &Definitions{}
	}
	c := newChecker(b, d, vhost)
	steps, err := c.check()
	if err != nil {
		return err
	}
	if beforeApply != nil {
		beforeApply()
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("definitions: import stopped at %s after %d of %d changes, which stay applied: %w: %w",
				s.what, i, len(steps), ErrPartial, err)
		}
	}
	return nil
}

// step is one change of an import.
type step struct {
	what string // the entity, for the error
	do   func() error
}

// Limits that RabbitMQ knows (rabbit_auth_backend_internal and
// rabbit_vhost_limit).
var (
	userLimits  = []string{"max-connections", "max-channels"}
	vhostLimits = []string{"max-connections", "max-queues"}
)

// maxUserTags is RabbitMQ's ?MAX_USER_TAGS.
const maxUserTags = 32

// resource names an entity as RabbitMQ's texts do.
func resource(kind, name, vhost string) string {
	if vhost == "" {
		return fmt.Sprintf("%s '%s'", kind, name)
	}
	return fmt.Sprintf("%s '%s' in vhost '%s'", kind, name, vhost)
}

// brokerReason is the reason of a broker's refusal of res: its text,
// prefixed with res unless it names it already.
func brokerReason(res string, err error) string {
	var qe *queues.Error
	text := err.Error()
	if errors.As(err, &qe) {
		text = qe.Text
	}
	if strings.Contains(text, res) {
		return text
	}
	return res + ": " + text
}

// policyOf returns p as package policy takes it.
func policyOf(p Policy, vhost string) policy.Policy {
	return policy.Policy{VHost: vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: p.Definition}
}
