package definitions

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/policy"
	"github.com/warren-mq/warren/queues/route"
)

// The validation of an import: every entity of the document against the
// broker as it is and the rest of the document, before anything is
// applied. It yields the changes to make, in order.

// key names a vhost's entity (or a user's permissions: vhost and user).
type key struct{ vhost, name string }

// checker is one import's validation.
type checker struct {
	b      *queues.Broker
	d      *Definitions
	single string // the vhost of a single-vhost import; "" for a whole broker's
	r      reasons

	users     map[string]bool          // in the document
	vhosts    map[string]*queues.VHost // in the document, as they will be put
	exchanges map[key]string           // in the document (not skipped): their types
	queues    map[key]bool             // in the document (not skipped)
	limits    map[string]queues.VHost  // vhost-limits parameters, by vhost
	newQueues map[string]int           // queues the import adds, by vhost

	// the changes, by category, in the order of the document
	userSteps, vhostSteps, permSteps, exchangeSteps, topicSteps, globalSteps,
	policySteps, limitSteps, queueSteps, bindingSteps []step
}

func newChecker(b *queues.Broker, d *Definitions, single string) *checker {
	return &checker{
		b: b, d: d, single: single,
		users: map[string]bool{}, vhosts: map[string]*queues.VHost{}, exchanges: map[key]string{},
		queues: map[key]bool{}, limits: map[string]queues.VHost{}, newQueues: map[string]int{},
	}
}

// check validates the document and returns the changes to make, or an
// *InvalidError.
func (c *checker) check() ([]step, error) {
	if c.single == "" {
		c.orphans()
		c.checkUsers()
		c.checkVHosts()
		c.checkPermissions()
	}
	c.collectExchanges()
	c.collectQueues()
	if c.single == "" {
		c.checkTopicPermissions()
		c.checkGlobalParameters()
	}
	c.checkPolicies()
	c.checkParameters()
	c.checkExchanges()
	c.checkQueues()
	c.checkQueueLimits()
	c.checkBindings()
	if err := c.r.err(); err != nil {
		return nil, err
	}
	var steps []step
	for _, s := range [][]step{c.userSteps, c.vhostSteps, c.permSteps, c.exchangeSteps, c.topicSteps,
		c.globalSteps, c.policySteps, c.limitSteps, c.queueSteps, c.bindingSteps} {
		steps = append(steps, s...)
	}
	return steps, nil
}

// vhostOf is the vhost an entity goes to: the import's, or its own.
func (c *checker) vhostOf(own string) string {
	if c.single != "" {
		return c.single
	}
	return own
}

// orphans refuses vhost-scoped entities without a vhost in a whole
// broker's import: such a document is a single vhost's export, as
// RabbitMQ says (invalid_definitions_file).
func (c *checker) orphans() {
	orphan := func(category string, i int, name string) {
		c.r.add("%s[%d] '%s' has no vhost: a single virtual host's definitions are imported into a vhost", category, i, name)
	}
	for i, x := range c.d.Queues {
		if x.VHost == "" {
			orphan("queues", i, x.Name)
		}
	}
	for i, x := range c.d.Exchanges {
		if x.VHost == "" {
			orphan("exchanges", i, x.Name)
		}
	}
	for i, x := range c.d.Bindings {
		if x.VHost == "" {
			orphan("bindings", i, x.Source)
		}
	}
	for i, x := range c.d.Policies {
		if x.VHost == "" {
			orphan("policies", i, x.Name)
		}
	}
	for i, x := range c.d.Parameters {
		if x.VHost == "" {
			orphan("parameters", i, x.Name)
		}
	}
	for i, x := range c.d.Permissions {
		if x.VHost == "" {
			orphan("permissions", i, x.User)
		}
	}
	for i, x := range c.d.TopicPermissions {
		if x.VHost == "" {
			orphan("topic_permissions", i, x.User)
		}
	}
}

// userKnown reports whether the user exists or is in the document.
func (c *checker) userKnown(name string) bool {
	if c.users[name] {
		return true
	}
	_, err := c.b.GetUser(name)
	return err == nil
}

// vhostKnown reports whether the vhost exists or is in the document.
func (c *checker) vhostKnown(name string) bool {
	return c.vhosts[name] != nil || c.b.VHostExists(name)
}

// needVHost adds a reason when res's vhost is unknown, and reports
// whether it is known.
func (c *checker) needVHost(res, vhost string) bool {
	if vhost != "" && c.vhostKnown(vhost) {
		return true
	}
	c.r.add("%s: no vhost '%s' (it neither exists nor is in the definitions)", res, vhost)
	return false
}

// defaultAlgorithm is the hashing algorithm of a user without one, by
// the document's RabbitMQ version (rabbit_auth_backend_internal:
// hashing_algorithm/2): MD5 before 3.6.0.
func defaultAlgorithm(d *Definitions) string {
	v := d.RabbitMQVersion
	if v == "" {
		v = d.RabbitVersion
	}
	for _, old := range []string{"3.0.", "3.1.", "3.2.", "3.3.", "3.4.", "3.5."} {
		if strings.HasPrefix(v, old) {
			return queues.HashMD5
		}
	}
	return queues.HashSHA256
}

func (c *checker) checkUsers() {
	seen := map[string]User{}
	for i, u := range c.d.Users {
		res := resource("user", u.Name, "")
		if u.Name == "" {
			c.r.add("users[%d]: the name is empty", i)
			continue
		}
		if old, ok := seen[u.Name]; ok {
			if !reflect.DeepEqual(old, u) {
				c.r.add("%s is defined twice, differently", res)
			}
			continue
		}
		seen[u.Name] = u
		c.users[u.Name] = true
		tags := u.Tags
		if tags == nil {
			switch u.Administrator {
			case true, "true":
				tags = Tags{"administrator"}
			case false, "false":
				tags = Tags{}
			default:
				c.r.add("%s has no tags (RabbitMQ: tags_not_present); an empty list will do", res)
				continue
			}
		}
		if len(tags) > maxUserTags {
			c.r.add("%s has %d tags, more than %d", res, len(tags), maxUserTags)
		}
		hash, algo := u.PasswordHash, u.HashingAlgorithm
		if algo == "" {
			algo = defaultAlgorithm(c.d)
		}
		if u.Password != "" {
			if hash != "" {
				c.r.add("%s has both a password and a password_hash", res)
				continue
			}
			hash, algo = queues.HashPassword(u.Password), queues.HashSHA256
		}
		if err := queues.ValidHash(hash, algo); err != nil {
			c.r.add("%s: %v", res, err)
		}
		lim := c.checkLimits(res, u.Limits, userLimits)
		qu := queues.User{Name: u.Name, PasswordHash: hash, HashingAlgorithm: algo, Tags: []string(tags), Limits: lim}
		c.userSteps = append(c.userSteps, step{res, func() error { return c.b.PutUser(qu) }})
	}
}

// checkLimits checks limits against the known names and returns them as
// the broker keeps them (nil: none given, keep the current ones).
func (c *checker) checkLimits(res string, l Limits, known []string) map[string]int64 {
	if l == nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(l)) {
		if !slices.Contains(known, k) {
			c.r.add("%s: unknown limit '%s' (the limits are %s)", res, k, strings.Join(known, ", "))
		}
	}
	return maps.Clone(l)
}

// queueType returns a default queue type as the broker keeps it: ""
// for none; ok false for one that is not a queue type.
func queueType(t string) (string, bool) {
	switch t {
	case "", "undefined":
		return "", true
	case queues.QueueClassic, queues.QueueQuorum, queues.QueueStream:
		return t, true
	}
	return t, false
}

func (c *checker) checkVHosts() {
	seen := map[string]VHost{}
	for i, v := range c.d.VHosts {
		res := resource("vhost", v.Name, "")
		if v.Name == "" {
			c.r.add("vhosts[%d]: the name is empty", i)
			continue
		}
		if old, ok := seen[v.Name]; ok {
			if !reflect.DeepEqual(old, v) {
				c.r.add("%s is defined twice, differently", res)
			}
			continue
		}
		seen[v.Name] = v
		qv := queues.VHost{Name: v.Name, Description: v.Description, Tags: v.Tags, DefaultQueueType: v.DefaultQueueType}
		if md := v.Metadata; md != nil {
			if qv.Description == "" {
				qv.Description = md.Description
			}
			if qv.Tags == nil {
				qv.Tags = md.Tags
			}
			if t, _ := queueType(qv.DefaultQueueType); t == "" {
				qv.DefaultQueueType = md.DefaultQueueType
			}
		}
		dqt, ok := queueType(qv.DefaultQueueType)
		if !ok {
			c.r.add("%s: %s is not a valid queue type (classic, quorum or stream)", res, dqt)
		}
		qv.DefaultQueueType = dqt
		if qv.Description == "" && qv.Tags == nil && qv.DefaultQueueType == "" && v.Metadata == nil {
			// The document says nothing of the metadata (3.10's HTTP
			// export has the name only): an existing vhost keeps its.
			if cur, err := c.b.GetVHost(v.Name); err == nil {
				qv.Description, qv.Tags, qv.DefaultQueueType = cur.Description, cur.Tags, cur.DefaultQueueType
			}
		}
		qv.Limits = c.checkLimits(res, v.Limits, vhostLimits)
		c.vhosts[v.Name] = &qv
		c.vhostSteps = append(c.vhostSteps, step{res, func() error {
			if l, ok := c.limits[qv.Name]; ok {
				qv.Limits = l.Limits // the vhost-limits parameter wins
			}
			_, err := c.b.PutVHost(qv)
			return err
		}})
	}
}

// checkRegexps adds a reason for each invalid permission regexp.
func (c *checker) checkRegexps(res string, kinds []string, patterns ...string) {
	for i, re := range patterns {
		if _, err := regexp.Compile(re); err != nil {
			c.r.add("%s: %s: invalid regular expression '%s': %v", res, kinds[i], re, err)
		}
	}
}

func (c *checker) checkPermissions() {
	seen := map[key]Permission{}
	for _, p := range c.d.Permissions {
		if p.VHost == "" {
			continue // an orphan
		}
		res := fmt.Sprintf("permissions of user '%s' in vhost '%s'", p.User, p.VHost)
		if old, ok := seen[key{p.VHost, p.User}]; ok {
			if old != p {
				c.r.add("%s are defined twice, differently", res)
			}
			continue
		}
		seen[key{p.VHost, p.User}] = p
		if !c.userKnown(p.User) {
			c.r.add("%s: no user '%s' (it neither exists nor is in the definitions)", res, p.User)
		}
		c.needVHost(res, p.VHost)
		c.checkRegexps(res, []string{"configure", "write", "read"}, p.Configure, p.Write, p.Read)
		perms := queues.Permissions{Configure: p.Configure, Write: p.Write, Read: p.Read}
		c.permSteps = append(c.permSteps, step{res, func() error { return c.b.SetPermissions(p.User, p.VHost, perms) }})
	}
}

// collectExchanges notes the document's exchanges (but the default and
// amq.* ones, which RabbitMQ skips), for the checks that refer to them.
func (c *checker) collectExchanges() {
	for _, x := range c.d.Exchanges {
		v := c.vhostOf(x.VHost)
		if v == "" || x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue
		}
		if _, ok := c.exchanges[key{v, x.Name}]; !ok {
			c.exchanges[key{v, x.Name}] = x.Type
		}
	}
}

// collectQueues notes the document's queues (but the amq.* ones, which
// RabbitMQ skips).
func (c *checker) collectQueues() {
	for _, q := range c.d.Queues {
		v := c.vhostOf(q.VHost)
		if v != "" && q.Name != "" && !strings.HasPrefix(q.Name, "amq.") {
			c.queues[key{v, q.Name}] = true
		}
	}
}

// exchangeType returns the type of exchange name of vhost as it will be:
// the document's, the broker's, or a standard exchange's in a vhost the
// import creates.
func (c *checker) exchangeType(vhost, name string) (string, bool) {
	if t, ok := c.exchanges[key{vhost, name}]; ok {
		return t, true
	}
	if c.b.VHostExists(vhost) {
		if name == "" {
			return queues.ExchangeDirect, true
		}
		x, err := c.b.Exchange(vhost, name)
		return x.Type, err == nil
	}
	if c.vhosts[vhost] != nil {
		for _, x := range route.StandardExchanges() {
			if x.Name == name {
				return x.Type, true
			}
		}
	}
	return "", false
}

// queueKnown reports whether the queue (or stream) will exist.
func (c *checker) queueKnown(vhost, name string) bool {
	if c.queues[key{vhost, name}] {
		return true
	}
	if !c.b.VHostExists(vhost) {
		return false
	}
	q, s := c.b.LookupDestination(vhost, name)
	return q != nil || s != nil
}

func (c *checker) checkTopicPermissions() {
	type tkey struct{ vhost, user, exchange string }
	seen := map[tkey]TopicPermission{}
	for _, p := range c.d.TopicPermissions {
		if p.VHost == "" {
			continue // an orphan
		}
		res := fmt.Sprintf("topic permissions of user '%s' on exchange '%s' in vhost '%s'", p.User, p.Exchange, p.VHost)
		k := tkey{p.VHost, p.User, p.Exchange}
		if old, ok := seen[k]; ok {
			if old != p {
				c.r.add("%s are defined twice, differently", res)
			}
			continue
		}
		seen[k] = p
		if !c.userKnown(p.User) {
			c.r.add("%s: no user '%s' (it neither exists nor is in the definitions)", res, p.User)
		}
		if c.needVHost(res, p.VHost) {
			// RabbitMQ 4.x requires the exchange (3.x did not).
			if _, ok := c.exchangeType(p.VHost, p.Exchange); !ok {
				c.r.add("%s: no exchange '%s' (it neither exists nor is in the definitions)", res, p.Exchange)
			}
		}
		c.checkRegexps(res, []string{"write", "read"}, p.Write, p.Read)
		tp := queues.TopicPermission{User: p.User, VHost: p.VHost, Exchange: p.Exchange, Write: p.Write, Read: p.Read}
		c.topicSteps = append(c.topicSteps, step{res, func() error { return c.b.SetTopicPermission(tp) }})
	}
}

// internalGlobalPrefix marks global parameters RabbitMQ keeps to itself
// (internal_cluster_id): not imported, not exported.
const internalGlobalPrefix = "internal"

func (c *checker) checkGlobalParameters() {
	seen := map[string]GlobalParameter{}
	for i, p := range c.d.GlobalParameters {
		res := resource("global parameter", p.Name, "")
		if p.Name == "" {
			c.r.add("global_parameters[%d]: the name is empty", i)
			continue
		}
		if strings.HasPrefix(p.Name, internalGlobalPrefix) {
			continue
		}
		if old, ok := seen[p.Name]; ok {
			if string(old.Value) != string(p.Value) {
				c.r.add("%s is defined twice, differently", res)
			}
			continue
		}
		seen[p.Name] = p
		value := p.Value
		if value == nil {
			value = json.RawMessage("null")
		}
		if !json.Valid(value) {
			c.r.add("%s: the value is not JSON", res)
			continue
		}
		c.globalSteps = append(c.globalSteps, step{res, func() error { return c.b.SetGlobalParameter(p.Name, value) }})
	}
}

func (c *checker) checkPolicies() {
	seen := map[key]Policy{}
	for i, p := range c.d.Policies {
		v := c.vhostOf(p.VHost)
		if v == "" {
			continue // an orphan
		}
		res := resource("policy", p.Name, v)
		if p.Name == "" {
			c.r.add("policies[%d] in vhost '%s': the name is empty", i, v)
			continue
		}
		if old, ok := seen[key{v, p.Name}]; ok {
			if !reflect.DeepEqual(old, p) {
				c.r.add("%s is defined twice, differently", res)
			}
			continue
		}
		seen[key{v, p.Name}] = p
		if c.single == "" {
			c.needVHost(res, v)
		}
		pol := policyOf(p, v)
		if _, reasons := policy.Compile(pol); len(reasons) > 0 {
			for _, r := range reasons {
				c.r.add("%s: %s", res, r)
			}
			continue
		}
		c.policySteps = append(c.policySteps, step{res, func() error { return c.b.SetPolicy(pol) }})
	}
}

// checkParameters takes the vhost-limits parameters (the limits of
// vhosts) and refuses every other component: Warren has no plugins that
// would take them (federation, shovel, ...), and no operator policies.
// RabbitMQ without the plugin refuses them alike ("component ... not
// found").
func (c *checker) checkParameters() {
	for _, p := range c.d.Parameters {
		v := c.vhostOf(p.VHost)
		if v == "" {
			continue // an orphan
		}
		res := fmt.Sprintf("parameter '%s' of component '%s' in vhost '%s'", p.Name, p.Component, v)
		switch p.Component {
		case "vhost-limits":
		case "operator_policy":
			c.r.add("%s: operator policies are not supported by Warren", res)
			continue
		default:
			c.r.add("%s: component %s not found: Warren has no plugin that takes it", res, p.Component)
			continue
		}
		if p.Name != "limits" {
			c.r.add("%s: vhost limits are the parameter named 'limits'", res)
			continue
		}
		if c.single == "" && !c.needVHost(res, v) {
			continue
		}
		var l Limits
		if err := json.Unmarshal(p.Value, &l); err != nil {
			c.r.add("%s: %v", res, err)
			continue
		}
		if l == nil {
			l = Limits{}
		}
		lim := c.checkLimits(res, l, vhostLimits)
		if old, ok := c.limits[v]; ok && !maps.Equal(old.Limits, lim) {
			c.r.add("%s: the vhost's limits are defined twice, differently", res)
			continue
		}
		c.limits[v] = queues.VHost{Name: v, Limits: lim}
		if c.vhosts[v] != nil {
			continue // applied with the vhost
		}
		c.limitSteps = append(c.limitSteps, step{res, func() error {
			cur, err := c.b.GetVHost(v)
			if err != nil {
				return err
			}
			cur.Limits = lim
			_, err = c.b.PutVHost(cur)
			return err
		}})
	}
}

func (c *checker) checkExchanges() {
	seen := map[key]Exchange{}
	for i, x := range c.d.Exchanges {
		v := c.vhostOf(x.VHost)
		if v == "" || x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue // an orphan; or skipped, as RabbitMQ skips the default and amq.* exchanges
		}
		res := resource("exchange", x.Name, v)
		x.VHost = v
		if old, ok := seen[key{v, x.Name}]; ok {
			if !reflect.DeepEqual(old, x) {
				c.r.add("%s is defined twice, differently", res)
			}
			continue
		}
		seen[key{v, x.Name}] = x
		if c.single == "" && !c.needVHost(res, v) {
			continue
		}
		if x.Type == "" {
			c.r.add("exchanges[%d] %s: no type", i, res)
			continue
		}
		def := queues.ExchangeDef{VHost: v, Name: x.Name, Type: x.Type, Durable: x.Durable,
			AutoDelete: x.AutoDelete, Internal: x.Internal, Args: map[string]any(x.Arguments)}
		if _, err := c.b.CheckExchangeDeclare(def); err != nil {
			c.r.add("%s", brokerReason(res, err))
			continue
		}
		c.exchangeSteps = append(c.exchangeSteps, step{res, func() error { return c.b.DeclareExchange(def) }})
	}
}

// defaultQueueType is the default queue type the vhost will have.
func (c *checker) defaultQueueType(vhost string) string {
	if v := c.vhosts[vhost]; v != nil {
		return v.DefaultQueueType
	}
	v, _ := c.b.GetVHost(vhost)
	return v.DefaultQueueType
}

func (c *checker) checkQueues() {
	seen := map[key]Queue{}
	for i, q := range c.d.Queues {
		v := c.vhostOf(q.VHost)
		if v == "" || strings.HasPrefix(q.Name, "amq.") {
			continue // an orphan; or skipped, as RabbitMQ skips amq.* queues
		}
		res := resource("queue", q.Name, v)
		if q.Name == "" {
			c.r.add("queues[%d] in vhost '%s': the name is empty", i, v)
			continue
		}
		q.VHost = v
		if old, ok := seen[key{v, q.Name}]; ok {
			if !reflect.DeepEqual(old, q) {
				c.r.add("%s is defined twice, differently", res)
			}
			continue
		}
		seen[key{v, q.Name}] = q
		if c.single == "" && !c.needVHost(res, v) {
			continue
		}
		args := maps.Clone(map[string]any(q.Arguments))
		if _, ok := args["x-queue-type"]; !ok {
			// The type a 4.x export gives beside the arguments, else the
			// vhost's default (rabbit_amqqueue:augment_declare_args).
			t := q.Type
			if t == "" && q.Durable && !q.AutoDelete {
				t = c.defaultQueueType(v)
			}
			if t != "" {
				if args == nil {
					args = map[string]any{}
				}
				args["x-queue-type"] = t
			}
		}
		def := queues.QueueDef{VHost: v, Name: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Args: args}
		exists, err := c.b.CheckQueueDeclare(def)
		if err != nil {
			c.r.add("%s", brokerReason(res, err))
			continue
		}
		if !exists {
			c.newQueues[v]++
		}
		c.queueSteps = append(c.queueSteps, step{res, func() error {
			_, _, _, err := c.b.DeclareQueue(queues.DeclareOptions{Def: def})
			return err
		}})
	}
}

// checkQueueLimits refuses an import that would take a vhost over its
// max-queues, as rabbit_definitions' validate_vhost_queue_limit does, so
// that the import fails whole rather than at its queue steps. The limit
// is the one the vhost will have: the document's, else the current one.
func (c *checker) checkQueueLimits() {
	for _, v := range slices.Sorted(maps.Keys(c.newQueues)) {
		add := c.newQueues[v]
		var limits map[string]int64
		switch {
		case c.limits[v].Limits != nil:
			limits = c.limits[v].Limits
		case c.vhosts[v] != nil && c.vhosts[v].Limits != nil:
			limits = c.vhosts[v].Limits
		default:
			cur, _ := c.b.GetVHost(v)
			limits = cur.Limits
		}
		limit, ok := limits[queues.LimitMaxQueues]
		if !ok || limit < 0 {
			continue
		}
		if have := c.b.QueueCount(v); int64(have+add) > limit {
			c.r.add("Adding %d queue(s) to virtual host \"%s\" would exceed the limit of %d queue(s).\n\nThis virtual host currently has %d queue(s) defined.\n\nImport aborted!", add, v, limit, have)
		}
	}
}

func (c *checker) checkBindings() {
	for i, bd := range c.d.Bindings {
		v := c.vhostOf(bd.VHost)
		if v == "" {
			continue // an orphan
		}
		res := fmt.Sprintf("binding of %s %s to %s", resource("exchange", bd.Source, v), describeKey(bd.RoutingKey),
			resource(bd.DestinationType, bd.Destination, ""))
		if c.single == "" && !c.needVHost(res, v) {
			continue
		}
		def := queues.BindingDef{VHost: v, Source: bd.Source, Dest: bd.Destination, Key: bd.RoutingKey, Args: map[string]any(bd.Arguments)}
		switch bd.DestinationType {
		case DestQueue:
			def.DestKind = queues.DestQueue
		case DestExchange:
			def.DestKind = queues.DestExchange
		default:
			c.r.add("bindings[%d] from %s: destination_type '%s' is neither queue nor exchange", i, resource("exchange", bd.Source, v), bd.DestinationType)
			continue
		}
		srcType, ok := c.exchangeType(v, bd.Source)
		if !ok {
			c.r.add("%s: no %s (it neither exists nor is in the definitions)", res, resource("exchange", bd.Source, v))
			continue
		}
		if def.DestKind == queues.DestQueue && !c.queueKnown(v, bd.Destination) {
			c.r.add("%s: no %s (it neither exists nor is in the definitions)", res, resource("queue", bd.Destination, v))
			continue
		}
		if def.DestKind == queues.DestExchange {
			if _, ok := c.exchangeType(v, bd.Destination); !ok {
				c.r.add("%s: no %s (it neither exists nor is in the definitions)", res, resource("exchange", bd.Destination, v))
				continue
			}
		}
		if err := queues.CheckBinding(srcType, def); err != nil {
			c.r.add("%s", brokerReason(res, err))
			continue
		}
		c.bindingSteps = append(c.bindingSteps, step{res, func() error { return c.b.Bind(def) }})
	}
}

// describeKey renders a routing key for a reason.
func describeKey(k string) string {
	if k == "" {
		return "with the empty key"
	}
	return fmt.Sprintf("with key '%s'", k)
}
