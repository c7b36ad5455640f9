package mgmt

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/warren-mq/warren/queues"
)

// The vhost and user limits endpoints, as RabbitMQ's rabbit_mgmt_wm_limits,
// _limit, _user_limits and _user_limit serve them. The model enforces the
// limits (queues/limits.go).
func (s *Server) registerLimits() {
	s.handle("GET", "/api/vhost-limits", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		items := []obj{}
		for _, v := range vs {
			if len(v.Limits) > 0 {
				items = append(items, obj{"vhost": v.Name, "value": v.Limits})
			}
		}
		return q.list(items)
	})
	s.handle("GET", "/api/vhost-limits/{vhost}", accessManagement, func(q *request) error {
		name, err := q.vhost()
		if err != nil {
			return err
		}
		v, err := s.b.GetVHost(name)
		if err != nil {
			return err
		}
		items := []obj{}
		if len(v.Limits) > 0 {
			items = append(items, obj{"vhost": v.Name, "value": v.Limits})
		}
		return q.list(items)
	})
	s.handle("PUT", "/api/vhost-limits/{vhost}/{name}", accessAdmin, func(q *request) error {
		v, err := s.b.GetVHost(q.Var("vhost"))
		if err != nil {
			return err
		}
		name := q.Var("name")
		value, err := limitValue(q, name)
		if err != nil {
			return err
		}
		if !queues.ValidVHostLimit(name) {
			return errBadRequest(fmt.Sprintf("Validation failed\n\nUnrecognised terms [{<<%q>>,%d}] in limits\n", name, value))
		}
		v.Limits = editLimits(v.Limits, name, &value)
		if _, err := s.b.PutVHost(v); err != nil {
			return err
		}
		return q.noContent(false)
	})
	s.handle("DELETE", "/api/vhost-limits/{vhost}/{name}", accessAdmin, func(q *request) error {
		v, err := s.b.GetVHost(q.Var("vhost"))
		if err != nil {
			return err
		}
		v.Limits = editLimits(v.Limits, q.Var("name"), nil)
		if _, err := s.b.PutVHost(v); err != nil {
			return err
		}
		return q.noContent(false)
	})

	s.handle("GET", "/api/user-limits", accessAdmin, func(q *request) error {
		users, err := s.b.Users()
		if err != nil {
			return err
		}
		items := []obj{}
		for _, u := range users {
			if len(u.Limits) > 0 {
				items = append(items, obj{"user": u.Name, "value": u.Limits})
			}
		}
		return q.list(items)
	})
	s.handle("GET", "/api/user-limits/{user}", accessManagement, func(q *request) error {
		name := q.Var("user")
		// Administrators and monitoring users read anyone's; others
		// their own (rabbit_mgmt_util:is_authorized_user).
		if name != q.user.Name && !q.seesAllVHosts() {
			return errNotAuthorised("User not authorised to access object")
		}
		u, err := s.b.GetUser(name)
		if err != nil {
			return err
		}
		items := []obj{}
		if len(u.Limits) > 0 {
			items = append(items, obj{"user": u.Name, "value": u.Limits})
		}
		return q.list(items)
	})
	s.handle("PUT", "/api/user-limits/{user}/{name}", accessAdmin, func(q *request) error {
		u, err := s.b.GetUser(q.Var("user"))
		if err != nil {
			return err
		}
		name := q.Var("name")
		value, err := limitValue(q, name)
		if err != nil {
			return err
		}
		if !queues.ValidUserLimit(name) {
			return errBadRequest(fmt.Sprintf("Unrecognised terms [{<<%q>>,%d}] in user-limits", name, value))
		}
		u.Limits = editLimits(u.Limits, name, &value)
		if err := s.b.PutUser(u); err != nil {
			return err
		}
		return q.noContent(false)
	})
	s.handle("DELETE", "/api/user-limits/{user}/{name}", accessAdmin, func(q *request) error {
		u, err := s.b.GetUser(q.Var("user"))
		if err != nil {
			return err
		}
		u.Limits = editLimits(u.Limits, q.Var("name"), nil)
		if err := s.b.PutUser(u); err != nil {
			return err
		}
		return q.noContent(false)
	})
}

// editLimits returns a copy of limits with name set to *value, or
// removed when value is nil; never nil, since a nil Limits means "keep
// the current ones" to PutVHost and PutUser.
func editLimits(limits map[string]int64, name string, value *int64) map[string]int64 {
	out := maps.Clone(limits)
	if out == nil {
		out = map[string]int64{}
	}
	if value == nil {
		delete(out, name)
	} else {
		out[name] = *value
	}
	return out
}

// limitValue reads a limit's {"value": N} body: a missing value and one
// that is not an integer are 400 with RabbitMQ's reasons.
func limitValue(q *request, name string) (int64, error) {
	var body map[string]any
	if err := q.decode(&body); err != nil {
		return 0, err
	}
	raw, ok := body["value"]
	if !ok {
		return 0, errBadRequest("[{key_missing,value}]")
	}
	if n, ok := raw.(json.Number); ok {
		if v, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return v, nil
		}
	}
	shown := fmt.Sprint(raw)
	if s, ok := raw.(string); ok {
		shown = fmt.Sprintf("<<%q>>", s)
	}
	return 0, errBadRequest(fmt.Sprintf("%s should be a number, actually was %s", name, shown))
}
