package queues

import (
	"encoding/json"
	"fmt"
)

// Global runtime parameters, as RabbitMQ's rabbit_runtime_parameters
// keeps them (rabbitmqctl set_global_parameter): a name and a JSON value,
// cluster_name among them. The broker stores them and gives them back;
// what a parameter means is for its reader.
//
// Catalog key (see doc.go):
//
//	gp/<name>   GlobalParameter (JSON)

// GlobalParameter is one global runtime parameter.
type GlobalParameter struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"` // any JSON value
}

func globalParamKey(name string) []byte { return []byte("gp/" + name) }

// SetGlobalParameter creates or replaces a global parameter. value must
// be one JSON value.
func (b *Broker) SetGlobalParameter(name string, value json.RawMessage) error {
	if name == "" {
		return fmt.Errorf("global parameter name is empty: %w", ErrInvalidArgument)
	}
	if !json.Valid(value) {
		return fmt.Errorf("global parameter %q: value is not JSON: %w", name, ErrInvalidArgument)
	}
	return b.execErr(&cmdSetGlobalParameter{GlobalParameter{Name: name, Value: value}})
}

func (c *cmdSetGlobalParameter) apply(b *Broker) (any, error) {
	return nil, b.cat.put(globalParamKey(c.Name), c.GlobalParameter)
}

// GetGlobalParameter returns a global parameter's value (ErrNotFound:
// none).
func (b *Broker) GetGlobalParameter(name string) (json.RawMessage, error) {
	var p GlobalParameter
	if err := b.cat.get(globalParamKey(name), &p); err != nil {
		return nil, fmt.Errorf("global parameter %q: %w", name, err)
	}
	return p.Value, nil
}

// ClearGlobalParameter removes a global parameter (ErrNotFound: none).
func (b *Broker) ClearGlobalParameter(name string) error {
	return b.execErr(&cmdClearGlobalParameter{Name: name})
}

func (c *cmdClearGlobalParameter) apply(b *Broker) (any, error) {
	name := c.Name
	ok, err := b.cat.has(globalParamKey(name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("global parameter %q: %w", name, ErrNotFound)
	}
	return nil, b.cat.delete(globalParamKey(name))
}

// GlobalParameters returns the global parameters, by name.
func (b *Broker) GlobalParameters() ([]GlobalParameter, error) {
	var out []GlobalParameter
	err := b.cat.scan([]byte("gp/"), func(k, v []byte) error {
		var p GlobalParameter
		if err := unmarshal(v, &p); err != nil {
			return fmt.Errorf("queues: catalog %q: %w", k, err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}
