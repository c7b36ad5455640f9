package queues

import "github.com/warren-mq/warren/queues/internal/fieldval"

// asMap converts a named map[string]any type to a plain map.
func asMap(v any) (map[string]any, bool) { return fieldval.AsMap(v) }
