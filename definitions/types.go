package definitions

import "encoding/json"

// Definitions is a definitions document: RabbitMQ's definitions.json,
// as GET /api/definitions and rabbitmqctl export_definitions write it
// (3.x and 4.x), or the single virtual host form of
// GET /api/definitions/{vhost}, whose entities have no vhost field and
// which has no users, vhosts, permissions, topic permissions nor global
// parameters. Lists absent from a document are nil, and marshal to
// nothing; empty lists marshal to [].
type Definitions struct {
	RabbitVersion   string `json:"rabbit_version,omitempty"`
	RabbitMQVersion string `json:"rabbitmq_version,omitempty"`
	ProductName     string `json:"product_name,omitempty"`
	ProductVersion  string `json:"product_version,omitempty"`

	// DefinitionFormat is "cluster" or "single_virtual_host" in 4.x
	// exports; informational, as are the three fields after it.
	DefinitionFormat    string `json:"rabbitmq_definition_format,omitempty"`
	OriginalClusterName string `json:"original_cluster_name,omitempty"`
	OriginalVHostName   string `json:"original_vhost_name,omitempty"`
	Explanation         string `json:"explanation,omitempty"`

	// The exported virtual host's metadata, in a 4.x single virtual host
	// export. Informational: an import into a vhost does not apply them,
	// as in RabbitMQ.
	Metadata         *VHostMetadata `json:"metadata,omitempty"`
	Description      string         `json:"description,omitempty"`
	DefaultQueueType string         `json:"default_queue_type,omitempty"`
	Limits           Limits         `json:"limits,omitzero"`

	Users            []User            `json:"users,omitzero"`
	VHosts           []VHost           `json:"vhosts,omitzero"`
	Permissions      []Permission      `json:"permissions,omitzero"`
	TopicPermissions []TopicPermission `json:"topic_permissions,omitzero"`
	Parameters       []Parameter       `json:"parameters,omitzero"`
	GlobalParameters []GlobalParameter `json:"global_parameters,omitzero"`
	Policies         []Policy          `json:"policies,omitzero"`
	Queues           []Queue           `json:"queues,omitzero"`
	Exchanges        []Exchange        `json:"exchanges,omitzero"`
	Bindings         []Binding         `json:"bindings,omitzero"`
}

// User is an internal user.
type User struct {
	Name string `json:"name"`
	// PasswordHash is base64 of a 4-byte salt and the hash of the salt
	// and the password; "" is a user without a password.
	PasswordHash string `json:"password_hash"`
	// Password, which RabbitMQ also accepts in a definitions file, is a
	// clear-text password to hash (SHA-256). Never exported.
	Password string `json:"password,omitempty"`
	// HashingAlgorithm is RabbitMQ's module name
	// (rabbit_password_hashing_sha256, _sha512, _md5). When absent it is
	// MD5 for files of RabbitMQ 3.0 to 3.5, SHA-256 otherwise.
	HashingAlgorithm string `json:"hashing_algorithm,omitempty"`
	// Tags are a JSON array, or a comma-separated string as RabbitMQ 3.8
	// and older wrote them. A user must have them, if empty (or the
	// legacy Administrator flag).
	Tags Tags `json:"tags"`
	// Administrator is the tags of RabbitMQ 2.x files: true or "true"
	// is the administrator tag. Never exported.
	Administrator any `json:"administrator,omitempty"`
	// Limits are max-connections and max-channels.
	Limits Limits `json:"limits,omitzero"`
}

// VHost is a virtual host. Its description, tags and default queue type
// are at the top level (RabbitMQ 3.11+ HTTP API), in Metadata
// (rabbitmqctl export_definitions, 3.11+), or both; an import takes the
// top level first.
type VHost struct {
	Name             string         `json:"name"`
	Description      string         `json:"description,omitempty"`
	Tags             Tags           `json:"tags,omitzero"`
	DefaultQueueType string         `json:"default_queue_type,omitempty"`
	Metadata         *VHostMetadata `json:"metadata,omitempty"`
	// Limits are max-connections and max-queues, as rabbitmqctl exports
	// them (an object, or a list of [name, value] pairs). RabbitMQ's
	// import ignores them and takes a vhost's limits from the
	// vhost-limits parameter; Warren imports both (the parameter wins).
	Limits Limits `json:"limits,omitzero"`
}

// VHostMetadata is a virtual host's metadata.
type VHostMetadata struct {
	Description string `json:"description,omitempty"`
	Tags        Tags   `json:"tags,omitzero"`
	// DefaultQueueType is classic, quorum or stream; "" and "undefined"
	// (which some 3.11 and 3.12 exports wrote) are none.
	DefaultQueueType string `json:"default_queue_type,omitempty"`
}

// Permission is a user's permissions in a virtual host: regular
// expressions over resource names.
type Permission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost,omitempty"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// TopicPermission is a user's topic permission on an exchange: regular
// expressions over routing keys.
type TopicPermission struct {
	User     string `json:"user"`
	VHost    string `json:"vhost,omitempty"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// Parameter is a runtime parameter of a component: federation upstreams,
// shovels, vhost-limits, operator policies, ...
type Parameter struct {
	VHost     string          `json:"vhost,omitempty"`
	Component string          `json:"component"`
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
}

// GlobalParameter is a global runtime parameter (cluster_name, ...).
type GlobalParameter struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// Policy is a policy.
type Policy struct {
	VHost   string `json:"vhost,omitempty"`
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
	// ApplyTo is all, exchanges, queues, classic_queues, quorum_queues or
	// streams; "" is all.
	ApplyTo string `json:"apply-to"`
	// Definition's numbers are json.Number once parsed.
	Definition map[string]any `json:"definition"`
	Priority   int            `json:"priority"`
}

// Queue is a queue; a stream is a queue with x-queue-type stream. Durable
// is true when absent from a document, as RabbitMQ takes it.
type Queue struct {
	Name       string    `json:"name"`
	VHost      string    `json:"vhost,omitempty"`
	Durable    bool      `json:"durable"`
	AutoDelete bool      `json:"auto_delete"`
	Arguments  Arguments `json:"arguments"`
	// Type is the queue type some 4.x exports add (classic, quorum,
	// stream); an import uses it when the arguments have no x-queue-type.
	// Never exported.
	Type string `json:"type,omitempty"`
}

// Exchange is an exchange. Durable is true when absent from a document.
type Exchange struct {
	Name       string    `json:"name"`
	VHost      string    `json:"vhost,omitempty"`
	Type       string    `json:"type"`
	Durable    bool      `json:"durable"`
	AutoDelete bool      `json:"auto_delete"`
	Internal   bool      `json:"internal"`
	Arguments  Arguments `json:"arguments"`
}

// Destination types of a binding.
const (
	DestQueue    = "queue"
	DestExchange = "exchange"
)

// Binding is a binding from an exchange to a queue (a stream is one) or
// to an exchange.
type Binding struct {
	Source          string    `json:"source"`
	VHost           string    `json:"vhost,omitempty"`
	Destination     string    `json:"destination"`
	DestinationType string    `json:"destination_type"` // DestQueue or DestExchange
	RoutingKey      string    `json:"routing_key"`
	Arguments       Arguments `json:"arguments"`
}
