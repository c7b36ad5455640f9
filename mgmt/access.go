package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/warren-mq/warren/queues"
)

// The users, virtual hosts and permissions endpoints.
func (s *Server) registerAccess() {
	s.handle("GET", "/api/whoami", accessManagement, func(q *request) error {
		return q.reply(obj{"name": q.user.Name, "tags": q.user.Tags})
	})

	s.handle("GET", "/api/users", accessAdmin, s.listUsers(false))
	s.handle("GET", "/api/users/without-permissions", accessAdmin, s.listUsers(true))
	s.handle("POST", "/api/users/bulk-delete", accessAdmin, s.bulkDeleteUsers)
	s.handle("GET", "/api/users/{user}", accessAdmin, func(q *request) error {
		u, err := s.b.GetUser(q.Var("user"))
		if err != nil {
			return err
		}
		return q.reply(userObj(u))
	})
	s.handle("PUT", "/api/users/{user}", accessAdmin, s.putUser)
	s.handle("DELETE", "/api/users/{user}", accessAdmin, func(q *request) error {
		if err := s.b.DeleteUser(q.Var("user")); err != nil {
			return err
		}
		return q.noContent(false)
	})
	s.handle("GET", "/api/users/{user}/permissions", accessAdmin, func(q *request) error {
		if _, err := s.b.GetUser(q.Var("user")); err != nil {
			return err
		}
		return s.listPermissions(q, func(p queues.UserPermissions) bool { return p.User == q.Var("user") })
	})
	s.handle("GET", "/api/users/{user}/topic-permissions", accessAdmin, func(q *request) error {
		if _, err := s.b.GetUser(q.Var("user")); err != nil {
			return err
		}
		return s.listTopicPermissions(q, func(p queues.TopicPermission) bool { return p.User == q.Var("user") })
	})

	s.handle("GET", "/api/permissions", accessAdmin, func(q *request) error {
		return s.listPermissions(q, func(queues.UserPermissions) bool { return true })
	})
	s.handle("GET", "/api/permissions/{vhost}/{user}", accessAdmin, func(q *request) error {
		p, err := s.b.GetPermissions(q.Var("user"), q.Var("vhost"))
		if err != nil {
			return err
		}
		return q.reply(permObj(queues.UserPermissions{User: q.Var("user"), VHost: q.Var("vhost"), Permissions: p}))
	})
	s.handle("PUT", "/api/permissions/{vhost}/{user}", accessAdmin, s.putPermissions)
	s.handle("DELETE", "/api/permissions/{vhost}/{user}", accessAdmin, func(q *request) error {
		if _, err := s.b.GetPermissions(q.Var("user"), q.Var("vhost")); err != nil {
			return err
		}
		if err := s.b.ClearPermissions(q.Var("user"), q.Var("vhost")); err != nil {
			return err
		}
		return q.noContent(false)
	})

	s.handle("GET", "/api/topic-permissions", accessAdmin, func(q *request) error {
		return s.listTopicPermissions(q, func(queues.TopicPermission) bool { return true })
	})
	s.handle("GET", "/api/topic-permissions/{vhost}/{user}", accessAdmin, func(q *request) error {
		if !s.b.VHostExists(q.Var("vhost")) {
			return errNotFound()
		}
		if _, err := s.b.GetUser(q.Var("user")); err != nil {
			return err
		}
		return s.listTopicPermissions(q, func(p queues.TopicPermission) bool {
			return p.User == q.Var("user") && p.VHost == q.Var("vhost")
		})
	})
	s.handle("PUT", "/api/topic-permissions/{vhost}/{user}", accessAdmin, s.putTopicPermission)
	s.handle("DELETE", "/api/topic-permissions/{vhost}/{user}", accessAdmin, func(q *request) error {
		if err := s.b.ClearTopicPermissions(q.Var("user"), q.Var("vhost"), ""); err != nil {
			return err
		}
		return q.noContent(false)
	})

	s.handle("GET", "/api/vhosts", accessManagement, func(q *request) error {
		vs, err := q.visibleVHosts()
		if err != nil {
			return err
		}
		items := make([]obj, 0, len(vs))
		for _, v := range vs {
			items = append(items, s.vhostObj(v))
		}
		return q.list(items)
	})
	s.handle("GET", "/api/vhosts/{vhost}", accessManagement, func(q *request) error {
		name, err := q.vhost()
		if err != nil {
			return err
		}
		v, err := s.b.GetVHost(name)
		if err != nil {
			return err
		}
		return q.reply(s.vhostObj(v))
	})
	s.handle("PUT", "/api/vhosts/{vhost}", accessAdmin, s.putVHost)
	s.handle("DELETE", "/api/vhosts/{vhost}", accessAdmin, func(q *request) error {
		if err := s.b.DeleteVHost(q.Var("vhost")); err != nil {
			return err
		}
		return q.noContent(false)
	})
	s.handle("GET", "/api/vhosts/{vhost}/permissions", accessAdmin, func(q *request) error {
		if !s.b.VHostExists(q.Var("vhost")) {
			return errNotFound()
		}
		return s.listPermissions(q, func(p queues.UserPermissions) bool { return p.VHost == q.Var("vhost") })
	})
	s.handle("GET", "/api/vhosts/{vhost}/topic-permissions", accessAdmin, func(q *request) error {
		if !s.b.VHostExists(q.Var("vhost")) {
			return errNotFound()
		}
		return s.listTopicPermissions(q, func(p queues.TopicPermission) bool { return p.VHost == q.Var("vhost") })
	})
}

func userObj(u queues.User) obj {
	limits := map[string]int64{}
	if u.Limits != nil {
		limits = u.Limits
	}
	return obj{
		"name":              u.Name,
		"password_hash":     u.PasswordHash,
		"hashing_algorithm": u.HashingAlgorithm,
		"tags":              u.Tags,
		"limits":            limits,
	}
}

func (s *Server) listUsers(withoutPermissions bool) func(*request) error {
	return func(q *request) error {
		users, err := s.b.Users()
		if err != nil {
			return err
		}
		has := map[string]bool{}
		if withoutPermissions {
			perms, err := s.b.AllPermissions()
			if err != nil {
				return err
			}
			for _, p := range perms {
				has[p.User] = true
			}
		}
		items := make([]obj, 0, len(users))
		for _, u := range users {
			if !has[u.Name] {
				items = append(items, userObj(u))
			}
		}
		return q.list(items)
	}
}

// tagList reads tags as RabbitMQ takes them: a comma-separated string or
// an array of strings.
func tagList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return queues.ParseTags(s), nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errBadRequest("tags must be a string or a list of strings")
	}
	return queues.ParseTags(strings.Join(list, ",")), nil
}

// putUser creates or updates a user. With neither password nor
// password_hash an update keeps the user's password (RabbitMQ 3.x clears
// it, locking the user out, when only the tags are changed) and a new user
// gets none (it cannot log in with a password).
func (s *Server) putUser(q *request) error {
	var body struct {
		Password         *string         `json:"password"`
		PasswordHash     *string         `json:"password_hash"`
		HashingAlgorithm string          `json:"hashing_algorithm"`
		Tags             json.RawMessage `json:"tags"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	name := q.Var("user")
	old, err := s.b.GetUser(name)
	created := errors.Is(err, queues.ErrNotFound)
	if err != nil && !created {
		return err
	}
	u := queues.User{Name: name}
	if !created {
		u.PasswordHash, u.HashingAlgorithm = old.PasswordHash, old.HashingAlgorithm
	}
	if u.Tags, err = tagList(body.Tags); err != nil {
		return err
	}
	switch {
	case body.Password != nil && body.PasswordHash != nil:
		return errBadRequest("give either password or password_hash, not both")
	case body.Password != nil:
		u.PasswordHash, u.HashingAlgorithm = queues.HashPassword(*body.Password), queues.HashSHA256
	case body.PasswordHash != nil:
		u.PasswordHash, u.HashingAlgorithm = *body.PasswordHash, body.HashingAlgorithm
		if err := queues.ValidHash(u.PasswordHash, u.HashingAlgorithm); err != nil {
			return badRequestOr(err)
		}
	}
	if err := s.b.PutUser(u); err != nil {
		return badRequestOr(err)
	}
	return q.noContent(created)
}

func (s *Server) bulkDeleteUsers(q *request) error {
	var body struct {
		Users []string `json:"users"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	for _, u := range body.Users {
		if err := s.b.DeleteUser(u); err != nil && !errors.Is(err, queues.ErrNotFound) {
			return err
		}
	}
	return q.noContent(false)
}

func permObj(p queues.UserPermissions) obj {
	return obj{"user": p.User, "vhost": p.VHost, "configure": p.Configure, "write": p.Write, "read": p.Read}
}

func (s *Server) listPermissions(q *request, keep func(queues.UserPermissions) bool) error {
	perms, err := s.b.AllPermissions()
	if err != nil {
		return err
	}
	items := []obj{}
	for _, p := range perms {
		if keep(p) {
			items = append(items, permObj(p))
		}
	}
	return q.list(items)
}

func (s *Server) listTopicPermissions(q *request, keep func(queues.TopicPermission) bool) error {
	perms, err := s.b.TopicPermissions()
	if err != nil {
		return err
	}
	items := []obj{}
	for _, p := range perms {
		if keep(p) {
			items = append(items, obj{"user": p.User, "vhost": p.VHost, "exchange": p.Exchange, "write": p.Write, "read": p.Read})
		}
	}
	return q.list(items)
}

// checkRegexps refuses permission patterns that do not compile.
func checkRegexps(res ...string) error {
	for _, re := range res {
		if _, err := regexp.Compile(re); err != nil {
			return errBadRequest(fmt.Sprintf("invalid regular expression %q: %v", re, err))
		}
	}
	return nil
}

func (s *Server) putPermissions(q *request) error {
	var body struct {
		Configure, Write, Read *string
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct {
		name string
		v    *string
	}{{"configure", body.Configure}, {"write", body.Write}, {"read", body.Read}} {
		if f.v == nil {
			missing = append(missing, "{key_missing,"+f.name+"}")
		}
	}
	if missing != nil {
		return errBadRequest("[" + strings.Join(missing, ",") + "]")
	}
	if err := checkRegexps(*body.Configure, *body.Write, *body.Read); err != nil {
		return err
	}
	user, vhost := q.Var("user"), q.Var("vhost")
	if _, err := s.b.GetUser(user); err != nil || !s.b.VHostExists(vhost) {
		return errBadRequest("vhost_or_user_not_found")
	}
	_, err := s.b.GetPermissions(user, vhost)
	created := errors.Is(err, queues.ErrNotFound)
	if err := s.b.SetPermissions(user, vhost, queues.Permissions{Configure: *body.Configure, Write: *body.Write, Read: *body.Read}); err != nil {
		return err
	}
	return q.noContent(created)
}

func (s *Server) putTopicPermission(q *request) error {
	var body struct {
		Exchange    *string
		Write, Read *string
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	if body.Exchange == nil || body.Write == nil || body.Read == nil {
		return errBadRequest("exchange, write and read are required")
	}
	if err := checkRegexps(*body.Write, *body.Read); err != nil {
		return err
	}
	user, vhost := q.Var("user"), q.Var("vhost")
	if _, err := s.b.GetUser(user); err != nil || !s.b.VHostExists(vhost) {
		return errBadRequest("vhost_or_user_not_found")
	}
	if err := s.b.SetTopicPermission(queues.TopicPermission{User: user, VHost: vhost, Exchange: *body.Exchange, Write: *body.Write, Read: *body.Read}); err != nil {
		return badRequestOr(err)
	}
	return q.noContent(true)
}

func (s *Server) putVHost(q *request) error {
	var body struct {
		Description      *string         `json:"description"`
		Tags             json.RawMessage `json:"tags"`
		DefaultQueueType *string         `json:"default_queue_type"`
		Tracing          bool            `json:"tracing"`
	}
	if err := q.decode(&body); err != nil {
		return err
	}
	name := q.Var("vhost")
	v, err := s.b.GetVHost(name)
	if err != nil && !errors.Is(err, queues.ErrNotFound) {
		return err
	}
	v.Name = name
	if body.Description != nil {
		v.Description = *body.Description
	}
	if body.Tags != nil {
		if v.Tags, err = tagList(body.Tags); err != nil {
			return err
		}
	}
	if body.DefaultQueueType != nil {
		v.DefaultQueueType = *body.DefaultQueueType
		if v.DefaultQueueType == "undefined" {
			v.DefaultQueueType = ""
		}
	}
	if body.Tracing {
		return errBadRequest("tracing is not supported by Warren")
	}
	created, err := s.b.PutVHost(v)
	if err != nil {
		return badRequestOr(err)
	}
	if created {
		// RabbitMQ gives the creating user full permissions in the new
		// vhost.
		if _, err := s.b.GetPermissions(q.user.Name, name); errors.Is(err, queues.ErrNotFound) {
			if err := s.b.SetPermissions(q.user.Name, name, queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
				return err
			}
		}
	}
	if created {
		q.w.WriteHeader(http.StatusCreated)
		return nil
	}
	return q.noContent(false)
}

func (s *Server) vhostObj(v queues.VHost) obj {
	dqt := v.DefaultQueueType
	if dqt == "" {
		dqt = "undefined"
	}
	meta := obj{"description": v.Description, "tags": v.Tags}
	if v.DefaultQueueType != "" {
		meta["default_queue_type"] = v.DefaultQueueType
	}
	o := obj{
		"name":               v.Name,
		"description":        v.Description,
		"tags":               v.Tags,
		"default_queue_type": dqt,
		"metadata":           meta,
		"tracing":            false,
		"cluster_state":      s.clusterState(),
	}
	t := s.rates.vhostTotals(v.Name)
	t.put(o)
	return o
}
