package queues

import (
	"encoding/json"

	"github.com/warren-mq/warren/queues/policy"
)

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

// argTable is an argument table in a command: AMQP field values keep
// their types (a short is not a long), as in the catalog (encodeArgs).
type argTable map[string]any

func (a argTable) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("null"), nil
	}
	b, err := encodeArgs(a)
	if err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

func (a *argTable) UnmarshalJSON(data []byte) error {
	var b []byte
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	m, err := decodeArgs(b)
	*a = m
	return err
}

// exchangeCmd is an ExchangeDef in a command.
type exchangeCmd struct {
	VHost      string   `json:"vhost"`
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Durable    bool     `json:"durable,omitempty"`
	AutoDelete bool     `json:"auto_delete,omitempty"`
	Internal   bool     `json:"internal,omitempty"`
	Args       argTable `json:"args,omitempty"`
}

func exchangeCmdDef(d ExchangeDef) exchangeCmd {
	return exchangeCmd{d.VHost, d.Name, d.Type, d.Durable, d.AutoDelete, d.Internal, d.Args}
}

func (c exchangeCmd) def() ExchangeDef {
	return ExchangeDef{VHost: c.VHost, Name: c.Name, Type: c.Type, Durable: c.Durable, AutoDelete: c.AutoDelete, Internal: c.Internal, Args: c.Args}
}

// bindingCmd is a BindingDef in a command.
type bindingCmd struct {
	VHost    string   `json:"vhost"`
	Source   string   `json:"source"`
	DestKind DestKind `json:"dest_kind"`
	Dest     string   `json:"dest"`
	Key      string   `json:"key"`
	Args     argTable `json:"args,omitempty"`
}

func bindingCmdDef(d BindingDef) bindingCmd {
	return bindingCmd{d.VHost, d.Source, d.DestKind, d.Dest, d.Key, d.Args}
}

func (c bindingCmd) def() BindingDef {
	return BindingDef{VHost: c.VHost, Source: c.Source, DestKind: c.DestKind, Dest: c.Dest, Key: c.Key, Args: c.Args}
}

type cmdDeclareExchange struct{ exchangeCmd }

type cmdDeleteExchange struct {
	VHost    string `json:"vhost"`
	Name     string `json:"name"`
	IfUnused bool   `json:"if_unused,omitempty"`
}

type cmdBind struct{ bindingCmd }

type cmdUnbind struct{ bindingCmd }

func (*cmdDeclareExchange) op() string       { return "exchange.declare" }
func (*cmdDeleteExchange) op() string        { return "exchange.delete" }
func (*cmdBind) op() string                  { return "binding.add" }
func (*cmdUnbind) op() string                { return "binding.delete" }
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
		func() command { return &cmdDeclareExchange{} },
		func() command { return &cmdDeleteExchange{} },
		func() command { return &cmdBind{} },
		func() command { return &cmdUnbind{} },
	} {
		registerCommand(f)
	}
}
