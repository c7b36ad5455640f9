package mgmt

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/policy"
)

func (s *Server) registerPolicies() {
	s.handle("GET", "/api/policies", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		var items []obj
		for _, v := range vs {
			items = append(items, policyObjs(s.b.Policies(v.Name))...)
		}
		return q.list(items)
	})
	s.handle("GET", "/api/policies/{vhost}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		return q.list(policyObjs(s.b.Policies(v)))
	})
	s.handle("GET", "/api/policies/{vhost}/{name}", accessManagement, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		p, err := s.b.Policy(v, q.Var("name"))
		if err != nil {
			return errNotFound()
		}
		return q.reply(policyObj(p))
	})
	s.handle("PUT", "/api/policies/{vhost}/{name}", accessPolicymaker, s.putPolicyDef)
	s.handle("DELETE", "/api/policies/{vhost}/{name}", accessPolicymaker, func(q *request) error {
		v, err := q.vhost()
		if err != nil {
			return err
		}
		if _, err := s.b.Policy(v, q.Var("name")); err != nil {
			return errNotFound()
		}
		if err := s.b.ClearPolicy(v, q.Var("name")); err != nil {
			return err
		}
		return q.noContent(false)
	})
	// Operator policies are not implemented: the lists are empty.
	empty := func(q *request) error { return q.list(nil) }
	s.handle("GET", "/api/operator-policies", accessManagement, empty)
	s.handle("GET", "/api/operator-policies/{vhost}", accessManagement, empty)
}

func policyObj(p policy.Policy) obj {
	apply := p.ApplyTo
	if apply == "" {
		apply = policy.ApplyAll
	}
	def := p.Definition
	if def == nil {
		def = map[string]any{}
	}
	return obj{"vhost": p.VHost, "name": p.Name, "pattern": p.Pattern, "apply-to": apply, "definition": def, "priority": p.Priority}
}

func policyObjs(ps []policy.Policy) []obj {
	out := make([]obj, 0, len(ps))
	for _, p := range ps {
		out = append(out, policyObj(p))
	}
	return out
}

func (s *Server) putPolicyDef(q *request) error {
	v, err := q.vhost()
	if err != nil {
		return err
	}
	var body struct {
		Pattern    *string        `json:"pattern"`
		Definition map[string]any `json:"definition"`
		Priority   json.Number    `json:"priority"`
		ApplyTo    string         `json:"apply-to"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	var missing []string
	if body.Pattern == nil {
		missing = append(missing, "{key_missing,pattern}")
	}
	if body.Definition == nil {
		missing = append(missing, "{key_missing,definition}")
	}
	if missing != nil {
		return errBadRequest("[" + strings.Join(missing, ",") + "]")
	}
	prio := int64(0)
	if body.Priority != "" {
		if prio, err = body.Priority.Int64(); err != nil {
			return errBadRequest("priority must be an integer")
		}
	}
	def := map[string]any{}
	for k, val := range body.Definition {
		def[k] = amqpValue(val)
	}
	p := policy.Policy{VHost: v, Name: q.Var("name"), Pattern: *body.Pattern, ApplyTo: body.ApplyTo, Priority: int(prio), Definition: def}
	_, err = s.b.Policy(v, p.Name)
	created := err != nil
	if err := s.b.SetPolicy(p); err != nil {
		var pe *queues.PolicyError
		if errors.As(err, &pe) {
			return errBadRequest("Validation failed\n\n" + strings.Join(pe.Reasons, "\n") + "\n")
		}
		return err
	}
	return q.noContent(created)
}
