package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/erlterm"
)

// Policy validation: rabbit_policy:policy_validation/0 for the policy
// itself and the policy_validator modules registered by the core broker
// for its definition (rabbit_policies, rabbit_classic_queue and
// rabbit_quorum_queue, RabbitMQ 4.3.5). Plugin keys (federation-upstream,
// selector-fields, ...) are not recognised.

// maxPattern is rabbit_re's ?MAX_PATTERN_LENGTH, in bytes.
const maxPattern = 1024

// MaxStreamSegmentSize is ?MAX_STREAM_MAX_SEGMENT_SIZE (rabbit.hrl), the
// largest stream-max-segment-size-bytes, as policy or argument.
const MaxStreamSegmentSize = 3_000_000_000

// Compile validates p and returns it normalized (ApplyTo "" is "all",
// Definition values int64 or string) with its pattern compiled. An invalid
// policy has no Compiled but reasons: RabbitMQ's validation texts, which
// its HTTP API and CLI print after "Validation failed"
// (rabbit_runtime_parameters:format_error/1).
//
// Patterns are Go regexps (RE2): the PCRE features RE2 lacks
// (backreferences, lookaround) are refused, and names are matched as
// UTF-8 where RabbitMQ matches bytes.
func Compile(p Policy) (c *Compiled, reasons []string) {
	def, reasons := validateDefinition(p.Definition)
	if p.ApplyTo == "" {
		p.ApplyTo = ApplyAll
	}
	switch p.ApplyTo {
	case ApplyAll, ApplyExchanges, ApplyQueues, ApplyClassicQueues, ApplyQuorumQueues, ApplyStreams:
	default:
		reasons = append(reasons, fmt.Sprintf("apply-to '%s' unrecognised; should be one of: 'queues', 'classic_queues', "+
			" 'quorum_queues', 'streams', 'exchanges', or 'all'", p.ApplyTo))
	}
	var re *regexp.Regexp
	if len(p.Pattern) > maxPattern {
		reasons = append(reasons, fmt.Sprintf("pattern must not exceed %d bytes", maxPattern))
	} else {
		var err error
		if re, err = regexp.Compile(p.Pattern); err != nil {
			reasons = append(reasons, fmt.Sprintf("pattern should be regular expression but is invalid: %v", err))
		}
	}
	if len(reasons) > 0 {
		return nil, reasons
	}
	p.Definition = def
	return &Compiled{Policy: p, re: re}, nil
}

// validator checks one definition key: value returns the normalized
// value, or false with reason, a format for the value as Erlang prints it.
type validator struct {
	value  func(v any) (any, bool)
	reason string
}

func intAtLeast(lo int64) func(any) (any, bool) {
	return func(v any) (any, bool) {
		n, ok := intOf(v)
		return n, ok && n >= lo
	}
}

func intIn(lo, hi int64) func(any) (any, bool) {
	return func(v any) (any, bool) {
		n, ok := intOf(v)
		return n, ok && n >= lo && n <= hi
	}
}

func anyInt(v any) (any, bool) { return intOf(v) }

func anyString(v any) (any, bool) { return amqptab.DecodedString(v) }

func oneOf(values ...string) func(any) (any, bool) {
	return func(v any) (any, bool) {
		s, ok := amqptab.DecodedString(v)
		return s, ok && slices.Contains(values, s)
	}
}

// validators are the definition keys RabbitMQ 4.3.5 accepts, with
// its checks and texts (rabbit_policies:validate_policy0/2 unless noted).
var validators = map[string]validator{
	"alternate-exchange":            {anyString, "%s is not a valid alternate exchange name"},
	"consumer-disconnected-timeout": {intAtLeast(0), "%s is not a valid consumer disconnected timeout"},
	"consumer-timeout":              {intAtLeast(0), "%s is not a valid consumer timeout"},
	"dead-letter-exchange":          {anyString, "%s is not a valid dead letter exchange name"},
	"dead-letter-routing-key":       {anyString, "%s is not a valid dead letter routing key"},
	"dead-letter-strategy":          {oneOf("at-most-once", "at-least-once"), "%s is not a valid dead letter strategy"},
	"message-ttl":                   {intAtLeast(0), "%s is not a valid message TTL"},
	"expires":                       {intAtLeast(1), "%s is not a valid queue expiry"},
	"max-length":                    {intAtLeast(0), "%s is not a valid maximum length"},
	"max-length-bytes":              {intAtLeast(0), "%s is not a valid maximum length in bytes"},
	"max-in-memory-length":          {intAtLeast(0), "%s is not a valid maximum memory in bytes"},
	"max-in-memory-bytes":           {intAtLeast(0), "%s is not a valid maximum memory in bytes"},
	"queue-mode":                    {oneOf("default", "lazy"), "%s is not a valid queue-mode value"},
	"queue-version":                 {intIn(1, 2), "%s is not a valid queue-version value"},
	"overflow":                      {oneOf("drop-head", "reject-publish", "reject-publish-dlx"), "%s is not a valid overflow value"},
	"delivery-limit":                {anyInt, "%s is not a valid delivery limit"},
	"max-age":                       {validMaxAge, "%s is not a valid max age"},
	"stream-max-segment-size-bytes": {intIn(0, MaxStreamSegmentSize), "%s is not a valid segment size"},
	"stream-filter-size-bytes":      {intIn(16, 255), "%s is not a valid filter size. Valid range is 16-255"},
	"queue-leader-locator":          {oneOf("client-local", "balanced", "random", "least-leaders"), "%s is not a valid queue leader locator value"},
	"initial-cluster-size":          {intAtLeast(0), "%s is not a valid cluster size"},
	// rabbit_classic_queue:validate_policy/1: the queue_master_locator
	// deprecated feature is denied by default in 4.3.
	"queue-master-locator": {func(v any) (any, bool) { return v, false },
		"use of deprecated queue-master-locator argument is not permitted"},
	// rabbit_quorum_queue:validate_policy0/2.
	"target-group-size":  {intAtLeast(1), "%s is not a valid qq target count value"},
	"delayed-retry-type": {oneOf("all", "failed", "returned", "disabled"), "%s is not a valid delayed retry type. Must be one of: all, failed, returned, disabled"},
	"delayed-retry-min":  {intAtLeast(1), "%s is not a valid delayed retry minimum delay. Must be a positive integer"},
	"delayed-retry-max":  {intAtLeast(1), "%s is not a valid delayed retry maximum delay. Must be a positive integer"},
	// Warren's queue history (classic and quorum queues), with the
	// checks of max-age and max-length-bytes.
	"history-max-age":          {validMaxAge, "%s is not a valid history max age"},
	"history-max-length-bytes": {intAtLeast(0), "%s is not a valid history maximum length in bytes"},
}

// validMaxAge is rabbit_amqqueue:check_max_age/1 on a definition value.
func validMaxAge(v any) (any, bool) {
	s, ok := amqptab.DecodedString(v)
	if !ok || s == "" || s[0] < '0' || s[0] > '9' {
		return s, false
	}
	_, ok = ParseMaxAge(s)
	return s, ok
}

// validateDefinition checks a definition as rabbit_policy:validation/3
// does: not empty, every key known and valid (the first invalid key in
// key order is reported), then the unrecognised keys. It returns the
// normalized definition.
func validateDefinition(def map[string]any) (map[string]any, []string) {
	if len(def) == 0 {
		return nil, []string{"no policy provided"}
	}
	out := make(map[string]any, len(def))
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(def)) {
		v := def[k]
		val, known := validators[k]
		if !known {
			unknown = append(unknown, fmt.Sprintf("{%s,%s}", erlTerm(k), erlTerm(v)))
			continue
		}
		nv, ok := val.value(v)
		if !ok {
			reason := val.reason
			if strings.Contains(reason, "%s") {
				reason = fmt.Sprintf(reason, erlTerm(v))
			}
			return nil, []string{reason}
		}
		out[k] = nv
	}
	if r := checkDelayedRetry(out); r != "" {
		return nil, []string{r}
	}
	if len(unknown) > 0 {
		return nil, []string{fmt.Sprintf("[%s] are not recognised policy settings", strings.Join(unknown, ","))}
	}
	return out, nil
}

// checkDelayedRetry is rabbit_quorum_queue:validate_delayed_retry_constraints/1.
func checkDelayedRetry(def map[string]any) string {
	typ, hasType := def["delayed-retry-type"].(string)
	lo, hasMin := def["delayed-retry-min"].(int64)
	hi, hasMax := def["delayed-retry-max"].(int64)
	switch {
	case hasType && typ != "disabled" && !hasMin:
		return fmt.Sprintf("delayed-retry-min is required when delayed-retry-type is %s", typ)
	case hasMin && hasMax && hi < lo:
		return fmt.Sprintf("delayed-retry-max (%d) must not be smaller than delayed-retry-min (%d)", hi, lo)
	}
	return ""
}

// intOf returns an integer definition value: a Go integer, a
// json.Number holding an integer, or an integral float64 (encoding/json
// decodes every JSON number so; RabbitMQ would refuse 5.0, which cannot
// be told from 5 then).
func intOf(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case float32:
		return intOf(float64(x))
	case bool:
		return 0, false
	}
	return amqptab.DecodedInt(v)
}

// erlTerm prints a JSON-decoded value as Erlang's ~tp prints the term
// RabbitMQ decodes it to, for validation texts.
func erlTerm(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "<<" + strconv.Quote(x) + ">>"
	case []byte:
		return "<<" + strconv.Quote(string(x)) + ">>"
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
		if f, err := x.Float64(); err == nil {
			return erlterm.Float(f)
		}
		return string(x)
	case float64:
		if n, ok := intOf(x); ok {
			return strconv.FormatInt(n, 10)
		}
		return erlterm.Float(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = erlTerm(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		parts := make([]string, 0, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			parts = append(parts, erlTerm(k)+" => "+erlTerm(x[k]))
		}
		return "#{" + strings.Join(parts, ",") + "}"
	}
	if n, ok := amqptab.DecodedInt(v); ok {
		return strconv.FormatInt(n, 10)
	}
	return fmt.Sprint(v)
}
