package queues

import "reflect"

var mapType = reflect.TypeOf(map[string]any(nil))

// asMap converts a named map[string]any type to a plain map.
func asMap(v any) (map[string]any, bool) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Map || !rv.Type().ConvertibleTo(mapType) {
		return nil, false
	}
	return rv.Convert(mapType).Interface().(map[string]any), true
}
