package mgmt

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// obj is one object of an answer: a JSON object with RabbitMQ's field
// names. Lists are filtered, sorted, paginated and cut to columns as
// maps, as RabbitMQ does, so any field can be a sort key.
type obj = map[string]any

// Pagination limits, as RabbitMQ's.
const (
	defaultPageSize = 100
	maxPageSize     = 500
)

// list answers a list endpoint from items (already in their natural
// order) with RabbitMQ's query parameters: name and use_regex filter on
// the name field; sort (a field, dotted for nested ones) and sort_reverse;
// page and page_size paginate (then the answer is an object with
// items and counts); columns keeps only the named fields.
func (q *request) list(items []obj) error {
	out, err := q.listed(items)
	if err != nil {
		return err
	}
	return q.reply(out)
}

func (q *request) listed(items []obj) (any, error) {
	qs := q.r.URL.Query()
	total := len(items)
	var page, pageSize int
	paged := qs.Has("page")
	if paged {
		var err1, err2 error
		page, err1 = strconv.Atoi(qs.Get("page"))
		pageSize = defaultPageSize
		if qs.Has("page_size") {
			pageSize, err2 = strconv.Atoi(qs.Get("page_size"))
		}
		if err1 != nil || err2 != nil {
			return nil, errBadRequest("Pagination parameters are invalid")
		}
		if page < 1 || pageSize < 1 || pageSize > maxPageSize {
			size := strconv.Itoa(pageSize)
			if !qs.Has("page_size") {
				size = "undefined"
			}
			return nil, &apiError{http.StatusBadRequest, "invalid_pagination_parameters",
				fmt.Sprintf("Invalid pagination parameters: page number %d, page size %s", page, size)}
		}
	}
	if name := qs.Get("name"); name != "" {
		match := func(s string) bool { return strings.Contains(s, name) }
		if qs.Get("use_regex") == "true" {
			re, err := regexp.Compile(name)
			if err != nil {
				return nil, errBadRequest("Pagination parameters are invalid")
			}
			match = re.MatchString
		}
		kept := items[:0:0]
		for _, it := range items {
			if s, _ := it["name"].(string); match(s) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if key := qs.Get("sort"); key != "" {
		path := strings.Split(key, ".")
		slices.SortStableFunc(items, func(a, b obj) int { return compareValues(lookup(a, path), lookup(b, path)) })
	}
	if qs.Get("sort_reverse") == "true" {
		slices.Reverse(items)
	}
	filtered := len(items)
	if paged {
		from := (page - 1) * pageSize
		if from >= filtered && !(page == 1 && filtered == 0) {
			return nil, &apiError{http.StatusBadRequest, "page_out_of_range",
				fmt.Sprintf("Page out of range, page: %d page size: %d, len: %d", page, pageSize, filtered)}
		}
		items = items[from:min(from+pageSize, filtered)]
	}
	if cols := qs.Get("columns"); cols != "" {
		items = columns(items, strings.Split(cols, ","))
	}
	if items == nil {
		items = []obj{}
	}
	if !paged {
		return items, nil
	}
	return obj{
		"filtered_count": filtered,
		"item_count":     len(items),
		"items":          items,
		"page":           page,
		"page_count":     max(1, (filtered+pageSize-1)/pageSize),
		"page_size":      pageSize,
		"total_count":    total,
	}, nil
}

// lookup follows a dotted path into nested objects.
func lookup(o obj, path []string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// compareValues orders JSON-ish values: missing first, then numbers,
// strings, booleans; within a kind by value.
func compareValues(a, b any) int {
	ka, kb := kindOf(a), kindOf(b)
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	switch ka {
	case 1:
		return cmp.Compare(toFloat(a), toFloat(b))
	case 2:
		return strings.Compare(a.(string), b.(string))
	case 3:
		ab, bb := a.(bool), b.(bool)
		if ab == bb {
			return 0
		}
		if !ab {
			return -1
		}
		return 1
	}
	return 0
}

func kindOf(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case int, int64, uint64, uint32, int32, float64, float32, uint8, uint16:
		return 1
	case string:
		return 2
	case bool:
		return 3
	}
	return 4
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case int32:
		return float64(n)
	case uint64:
		return float64(n)
	case uint32:
		return float64(n)
	case uint16:
		return float64(n)
	case uint8:
		return float64(n)
	case float64:
		return n
	case float32:
		return float64(n)
	}
	return 0
}

// columns keeps only the named fields of each item; a dotted name keeps
// that nested field inside its parents.
func columns(items []obj, cols []string) []obj {
	out := make([]obj, len(items))
	for i, it := range items {
		o := obj{}
		for _, c := range cols {
			path := strings.Split(strings.TrimSpace(c), ".")
			v := lookup(it, path)
			if v == nil {
				continue
			}
			dst := o
			for _, p := range path[:len(path)-1] {
				next, ok := dst[p].(obj)
				if !ok {
					next = obj{}
					dst[p] = next
				}
				dst = next
			}
			dst[path[len(path)-1]] = v
		}
		out[i] = o
	}
	return out
}
