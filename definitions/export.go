package definitions

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/policy"
)

// Export writes the version fields as this RabbitMQ version: the format
// Export follows. An import into RabbitMQ reads the version only to pick
// the hashing algorithm of users without one (SHA-256 from 3.6 on).
const (
	FormatVersion = "4.2.0"
	ProductName   = "Warren"
)

// Export returns b's definitions: with vhost "" every virtual host's
// (users, vhosts, permissions, topic permissions, parameters, global
// parameters, policies, queues, exchanges, bindings), otherwise one
// virtual host's in the single virtual host form (parameters, policies,
// queues, exchanges and bindings without vhost fields, and the vhost's
// metadata and limits at the top), as RabbitMQ 4.x's
// GET /api/definitions[/{vhost}] writes them. A missing vhost is
// queues.ErrNotFound.
//
// Like RabbitMQ, it leaves out the default exchange and the amq.* ones,
// exclusive queues and the bindings to them, and the default exchange's
// implicit bindings; global parameters named internal*; and passwords
// (users carry their hashes). A super stream is its exchange (with
// x-super-stream), its partition streams and their bindings (with
// x-stream-partition-order), and imports back as one. Lists are sorted
// (by vhost, then name), so that two exports of one state are equal.
// Limits go both on their user or vhost and, for vhosts, as the
// vhost-limits parameter that RabbitMQ imports. The caller may fill
// ProductVersion.
func Export(b *queues.Broker, vhost string) (*Definitions, error) {
	d := &Definitions{
		RabbitVersion: FormatVersion, RabbitMQVersion: FormatVersion, ProductName: ProductName,
		Parameters: []Parameter{}, Policies: []Policy{}, Queues: []Queue{}, Exchanges: []Exchange{}, Bindings: []Binding{},
	}
	all, err := b.VHosts()
	if err != nil {
		return nil, fmt.Errorf("definitions: export: %w", err)
	}
	vhosts := all
	if vhost != "" {
		i := slices.IndexFunc(all, func(v queues.VHost) bool { return v.Name == vhost })
		if i < 0 {
			return nil, fmt.Errorf("definitions: export: vhost %q: %w", vhost, queues.ErrNotFound)
		}
		vhosts = all[i : i+1]
		v := vhosts[0]
		d.DefinitionFormat, d.OriginalVHostName = "single_virtual_host", vhost
		d.Explanation = fmt.Sprintf("Definitions of virtual host '%s'", vhost)
		d.Metadata = metadataOf(v)
		d.Description, d.DefaultQueueType, d.Limits = v.Description, v.DefaultQueueType, limitsOf(v.Limits)
	} else {
		d.DefinitionFormat = "cluster"
		if err := exportBroker(b, d, all); err != nil {
			return nil, fmt.Errorf("definitions: export: %w", err)
		}
	}
	for _, v := range vhosts {
		exportVHost(b, d, v)
	}
	if vhost != "" {
		stripVHost(d)
	}
	return d, nil
}

// exportBroker exports what is not in a vhost: users, vhosts,
// permissions, topic permissions and global parameters.
func exportBroker(b *queues.Broker, d *Definitions, vhosts []queues.VHost) error {
	users, err := b.Users()
	if err != nil {
		return err
	}
	d.Users = make([]User, 0, len(users))
	for _, u := range users {
		d.Users = append(d.Users, User{
			Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: u.HashingAlgorithm,
			Tags: Tags(slices.Clone(u.Tags)), Limits: limitsOf(u.Limits),
		})
	}
	d.VHosts = make([]VHost, 0, len(vhosts))
	for _, v := range vhosts {
		md := metadataOf(v)
		d.VHosts = append(d.VHosts, VHost{
			Name: v.Name, Description: md.Description, Tags: slices.Clone(md.Tags), DefaultQueueType: md.DefaultQueueType,
			Metadata: md, Limits: limitsOf(v.Limits),
		})
	}
	perms, err := b.AllPermissions()
	if err != nil {
		return err
	}
	d.Permissions = make([]Permission, 0, len(perms))
	for _, p := range perms {
		d.Permissions = append(d.Permissions, Permission{User: p.User, VHost: p.VHost, Configure: p.Configure, Write: p.Write, Read: p.Read})
	}
	tps, err := b.TopicPermissions()
	if err != nil {
		return err
	}
	d.TopicPermissions = make([]TopicPermission, 0, len(tps))
	for _, p := range tps {
		d.TopicPermissions = append(d.TopicPermissions, TopicPermission{User: p.User, VHost: p.VHost, Exchange: p.Exchange, Write: p.Write, Read: p.Read})
	}
	gps, err := b.GlobalParameters()
	if err != nil {
		return err
	}
	d.GlobalParameters = []GlobalParameter{}
	for _, p := range gps {
		if !strings.HasPrefix(p.Name, internalGlobalPrefix) {
			d.GlobalParameters = append(d.GlobalParameters, GlobalParameter{Name: p.Name, Value: p.Value})
		}
	}
	return nil
}

// metadataOf returns a vhost's metadata as 3.11+ exports it.
func metadataOf(v queues.VHost) *VHostMetadata {
	return &VHostMetadata{Description: v.Description, Tags: Tags(append([]string{}, v.Tags...)), DefaultQueueType: v.DefaultQueueType}
}

// limitsOf returns limits to export: {} when there are none.
func limitsOf(l map[string]int64) Limits {
	out := Limits{}
	maps.Copy(out, l)
	return out
}

// exportVHost appends vhost's parameters, policies, queues, exchanges and
// bindings to d.
func exportVHost(b *queues.Broker, d *Definitions, v queues.VHost) {
	if len(v.Limits) > 0 {
		value, _ := json.Marshal(v.Limits) // map[string]int64 always marshals
		d.Parameters = append(d.Parameters, Parameter{VHost: v.Name, Component: "vhost-limits", Name: "limits", Value: value})
	}
	pols := b.Policies(v.Name)
	slices.SortFunc(pols, func(a, b policy.Policy) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pols {
		d.Policies = append(d.Policies, Policy{
			VHost: v.Name, Name: p.Name, Pattern: p.Pattern, ApplyTo: cmp.Or(p.ApplyTo, "all"),
			Definition: p.Definition, Priority: p.Priority,
		})
	}
	exclusive := map[string]bool{}
	var qs []Queue
	for _, q := range b.Queues(v.Name) {
		def := q.Def()
		if q.Owner() != nil || def.Exclusive {
			exclusive[def.Name] = true
			continue
		}
		args := maps.Clone(def.Args)
		if _, ok := args["x-queue-type"]; !ok && (def.Type != queues.QueueClassic || v.DefaultQueueType != "") {
			// Keep the type through an import that would otherwise take
			// the vhost's default queue type.
			if args == nil {
				args = map[string]any{}
			}
			args["x-queue-type"] = def.Type
		}
		qs = append(qs, Queue{Name: def.Name, VHost: v.Name, Durable: def.Durable, AutoDelete: def.AutoDelete, Arguments: args})
	}
	streams, _ := b.Streams(v.Name)
	for _, s := range streams {
		qs = append(qs, Queue{Name: s.Name, VHost: v.Name, Durable: true, Arguments: queues.StreamQueueArgs(s.Args)})
	}
	slices.SortFunc(qs, func(a, b Queue) int { return strings.Compare(a.Name, b.Name) })
	for i := range qs {
		if qs[i].Arguments == nil {
			qs[i].Arguments = Arguments{}
		}
	}
	d.Queues = append(d.Queues, qs...)
	for _, x := range b.Exchanges(v.Name) {
		if x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue
		}
		d.Exchanges = append(d.Exchanges, Exchange{
			Name: x.Name, VHost: v.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete,
			Internal: x.Internal, Arguments: argsOrEmpty(x.Args),
		})
	}
	for _, bd := range b.Bindings(v.Name) {
		if bd.Source == "" || bd.DestKind == queues.DestQueue && exclusive[bd.Dest] {
			continue
		}
		dt := DestQueue
		if bd.DestKind == queues.DestExchange {
			dt = DestExchange
		}
		d.Bindings = append(d.Bindings, Binding{
			Source: bd.Source, VHost: v.Name, Destination: bd.Dest, DestinationType: dt,
			RoutingKey: bd.Key, Arguments: argsOrEmpty(bd.Args),
		})
	}
}

func argsOrEmpty(m map[string]any) Arguments {
	if m == nil {
		return Arguments{}
	}
	return Arguments(m)
}

// stripVHost drops the vhost fields of a single vhost's export.
func stripVHost(d *Definitions) {
	for i := range d.Parameters {
		d.Parameters[i].VHost = ""
	}
	for i := range d.Policies {
		d.Policies[i].VHost = ""
	}
	for i := range d.Queues {
		d.Queues[i].VHost = ""
	}
	for i := range d.Exchanges {
		d.Exchanges[i].VHost = ""
	}
	for i := range d.Bindings {
		d.Bindings[i].VHost = ""
	}
}
