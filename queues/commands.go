package queues

import "github.com/warren-mq/warren/queues/policy"

// The catalog's commands (replicate.go), by op name. Each carries what
// its apply needs and nothing a node would decide differently.

type cmdAddVHost struct {
	Name string `json:"name"`
}

type cmdPutVHost struct {
	VHost
	// KeepLimits: the caller gave no limits (nil), so the vhost keeps
	// its current ones (JSON cannot tell nil from empty).
	KeepLimits bool `json:"keep_limits,omitempty"`
}

type cmdDeleteVHost struct {
	Name string `json:"name"`
}

type cmdAddUser struct{ User }

type cmdPutUser struct {
	User
	KeepLimits bool `json:"keep_limits,omitempty"`
}

type cmdDeleteUser struct {
	Name string `json:"name"`
}

type cmdSetPermissions struct {
	User  string `json:"user"`
	VHost string `json:"vhost"`
	Permissions
}

type cmdClearPermissions struct {
	User  string `json:"user"`
	VHost string `json:"vhost"`
}

type cmdSetTopicPermission struct{ TopicPermission }

type cmdClearTopicPermissions struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
}

type cmdSetGlobalParameter struct{ GlobalParameter }

type cmdClearGlobalParameter struct {
	Name string `json:"name"`
}

type cmdSetPolicy struct{ policyRecord }

func (c *cmdSetPolicy) policy() policy.Policy {
	r := c.policyRecord
	return policy.Policy{VHost: r.VHost, Name: r.Name, Pattern: r.Pattern, ApplyTo: r.ApplyTo, Priority: r.Priority, Definition: r.Definition}
}

type cmdClearPolicy struct {
	VHost string `json:"vhost"`
	Name  string `json:"name"`
}

func (*cmdAddVHost) op() string              { return "vhost.add" }
func (*cmdPutVHost) op() string              { return "vhost.put" }
func (*cmdDeleteVHost) op() string           { return "vhost.delete" }
func (*cmdAddUser) op() string               { return "user.add" }
func (*cmdPutUser) op() string               { return "user.put" }
func (*cmdDeleteUser) op() string            { return "user.delete" }
func (*cmdSetPermissions) op() string        { return "permissions.set" }
func (*cmdClearPermissions) op() string      { return "permissions.clear" }
func (*cmdSetTopicPermission) op() string    { return "topic_permission.set" }
func (*cmdClearTopicPermissions) op() string { return "topic_permissions.clear" }
func (*cmdSetGlobalParameter) op() string    { return "global_parameter.set" }
func (*cmdClearGlobalParameter) op() string  { return "global_parameter.clear" }
func (*cmdSetPolicy) op() string             { return "policy.set" }
func (*cmdClearPolicy) op() string           { return "policy.clear" }

func init() {
	for _, f := range []func() command{
		func() command { return &cmdAddVHost{} },
		func() command { return &cmdPutVHost{} },
		func() command { return &cmdDeleteVHost{} },
		func() command { return &cmdAddUser{} },
		func() command { return &cmdPutUser{} },
		func() command { return &cmdDeleteUser{} },
		func() command { return &cmdSetPermissions{} },
		func() command { return &cmdClearPermissions{} },
		func() command { return &cmdSetTopicPermission{} },
		func() command { return &cmdClearTopicPermissions{} },
		func() command { return &cmdSetGlobalParameter{} },
		func() command { return &cmdClearGlobalParameter{} },
		func() command { return &cmdSetPolicy{} },
		func() command { return &cmdClearPolicy{} },
	} {
		registerCommand(f)
	}
}
