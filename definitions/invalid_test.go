package definitions

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues"
)

// good are valid entities of every kind, added to each bad document
// below so that a refusal is seen to apply none of them.
const good = `{
	"users": [{"name": "good-user", "password_hash": "", "tags": []}],
	"vhosts": [{"name": "good-vhost"}],
	"permissions": [{"user": "good-user", "vhost": "good-vhost", "configure": ".*", "write": ".*", "read": ".*"}],
	"topic_permissions": [{"user": "good-user", "vhost": "defs-a", "exchange": "good-x", "write": ".*", "read": ".*"}],
	"global_parameters": [{"name": "good-gp", "value": 1}],
	"parameters": [{"vhost": "good-vhost", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 1}}],
	"policies": [{"vhost": "defs-a", "name": "good-pol", "pattern": "^good", "apply-to": "queues", "definition": {"max-length": 1}, "priority": 0}],
	"exchanges": [{"name": "good-x", "vhost": "defs-a", "type": "topic", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}],
	"queues": [{"name": "good-q", "vhost": "defs-a", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "quorum"}},
		{"name": "good-s", "vhost": "good-vhost", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "stream"}}],
	"bindings": [{"source": "good-x", "vhost": "defs-a", "destination": "good-q", "destination_type": "queue", "routing_key": "#", "arguments": {}}]
}`

// Ensure each kind of bad document is refused with a reason naming the
// fault, and that nothing of it (nor of the good entities beside it) is
// applied: the broker exports the same before and after.
func TestImportRefusesBadDocuments(t *testing.T) {
	b := openBroker(t)
	importFile(t, b, fixtureHTTP)
	before := exportJSON(t, b, "")
	goodDefs := mustParse(t, good)

	for _, tc := range []struct {
		name, doc string
		reason    string // a part of the error's text
	}{
		// Users.
		{"bad hash", `{"users": [{"name": "u", "password_hash": "not base64!", "tags": []}]}`,
			"user 'u': password_hash is not a rabbit_password_hashing_sha256 hash"},
		{"hash of another algorithm", `{"users": [{"name": "u", "password_hash": "siG4WwKSzqYQoDCp+2vt09giJSJWHqA249kT9GGResH3dKfS", "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": []}]}`,
			"is not a rabbit_password_hashing_sha512 hash"},
		{"unknown algorithm", `{"users": [{"name": "u", "password_hash": "", "hashing_algorithm": "rabbit_password_hashing_bcrypt", "tags": []}]}`,
			`unknown hashing algorithm "rabbit_password_hashing_bcrypt"`},
		{"no tags", `{"users": [{"name": "u", "password_hash": ""}]}`, "user 'u' has no tags"},
		{"password and hash", `{"users": [{"name": "u", "password": "p", "password_hash": "siG4WwKSzqYQoDCp+2vt09giJSJWHqA249kT9GGResH3dKfS", "tags": []}]}`,
			"both a password and a password_hash"},
		{"too many tags", `{"users": [{"name": "u", "password_hash": "", "tags": "` + strings.Repeat("t,", 33) + `"}]}`, "has 33 tags, more than 32"},
		{"unknown user limit", `{"users": [{"name": "u", "password_hash": "", "tags": [], "limits": {"max-queues": 1}}]}`,
			"user 'u': unknown limit 'max-queues'"},
		{"user twice", `{"users": [{"name": "u", "password_hash": "", "tags": []}, {"name": "u", "password_hash": "", "tags": ["x"]}]}`,
			"user 'u' is defined twice, differently"},
		// Vhosts.
		{"bad default queue type", `{"vhosts": [{"name": "v", "metadata": {"default_queue_type": "lazy"}}]}`,
			"vhost 'v': lazy is not a valid queue type"},
		{"unknown vhost limit", `{"vhosts": [{"name": "v", "limits": [["max-channels", 1]]}]}`, "vhost 'v': unknown limit 'max-channels'"},
		// Permissions.
		{"permission of no user", `{"permissions": [{"user": "nobody", "vhost": "defs-a", "configure": "", "write": "", "read": ""}]}`,
			"permissions of user 'nobody' in vhost 'defs-a': no user 'nobody'"},
		{"permission in no vhost", `{"permissions": [{"user": "guest", "vhost": "nowhere", "configure": "", "write": "", "read": ""}]}`,
			"permissions of user 'guest' in vhost 'nowhere': no vhost 'nowhere'"},
		{"bad permission regexp", `{"permissions": [{"user": "guest", "vhost": "defs-a", "configure": "(", "write": "", "read": ""}]}`,
			"configure: invalid regular expression '('"},
		{"PCRE lookahead", `{"permissions": [{"user": "guest", "vhost": "defs-a", "configure": "^(?!amq\\.).*", "write": "", "read": ""}]}`,
			"invalid regular expression '^(?!amq\\.).*'"},
		{"topic permission on no exchange", `{"topic_permissions": [{"user": "guest", "vhost": "defs-a", "exchange": "nope", "write": ".*", "read": ".*"}]}`,
			"no exchange 'nope'"},
		{"bad topic permission regexp", `{"topic_permissions": [{"user": "guest", "vhost": "defs-a", "exchange": "amq.topic", "write": "[", "read": ".*"}]}`,
			"write: invalid regular expression '['"},
		// Parameters.
		{"federation upstream", `{"parameters": [{"vhost": "defs-a", "component": "federation-upstream", "name": "up", "value": {"uri": "amqp://elsewhere"}}]}`,
			"parameter 'up' of component 'federation-upstream' in vhost 'defs-a': component federation-upstream not found"},
		{"shovel", `{"parameters": [{"vhost": "defs-a", "component": "shovel", "name": "s", "value": {}}]}`, "component shovel not found"},
		{"operator policy", `{"parameters": [{"vhost": "defs-a", "component": "operator_policy", "name": "op", "value": {}}]}`,
			"operator policies are not supported"},
		{"bad vhost limits", `{"parameters": [{"vhost": "defs-a", "component": "vhost-limits", "name": "limits", "value": {"max-queues": "x"}}]}`,
			`max-queues should be a number, actually was "x"`},
		{"vhost limits of no vhost", `{"parameters": [{"vhost": "nowhere", "component": "vhost-limits", "name": "limits", "value": {}}]}`,
			"no vhost 'nowhere'"},
		// Policies.
		{"bad policy value", `{"policies": [{"vhost": "defs-a", "name": "p", "pattern": "^x", "apply-to": "queues", "definition": {"max-length": "many"}, "priority": 0}]}`,
			`policy 'p' in vhost 'defs-a': <<"many">> is not a valid maximum length`},
		{"unknown policy key", `{"policies": [{"vhost": "defs-a", "name": "p", "pattern": "^x", "apply-to": "queues", "definition": {"ha-mode": "all"}, "priority": 0}]}`,
			`[{<<"ha-mode">>,<<"all">>}] are not recognised policy settings`},
		{"bad apply-to", `{"policies": [{"vhost": "defs-a", "name": "p", "pattern": "^x", "apply-to": "everything", "definition": {"max-length": 1}, "priority": 0}]}`,
			"apply-to 'everything' unrecognised"},
		{"bad pattern", `{"policies": [{"vhost": "defs-a", "name": "p", "pattern": "(", "apply-to": "all", "definition": {"max-length": 1}, "priority": 0}]}`,
			"pattern should be regular expression but is invalid"},
		{"policy in no vhost", `{"policies": [{"vhost": "nowhere", "name": "p", "pattern": "^x", "apply-to": "all", "definition": {"max-length": 1}, "priority": 0}]}`,
			"policy 'p' in vhost 'nowhere': no vhost 'nowhere'"},
		// Queues.
		{"bad queue argument", `{"queues": [{"name": "q", "vhost": "defs-a", "durable": true, "auto_delete": false, "arguments": {"x-max-length": "many"}}]}`,
			"PRECONDITION_FAILED - invalid arg 'x-max-length' for queue 'q' in vhost 'defs-a'"},
		{"non-durable quorum queue", `{"queues": [{"name": "q", "vhost": "defs-a", "durable": false, "auto_delete": false, "arguments": {"x-queue-type": "quorum"}}]}`,
			"invalid property 'non-durable' for queue 'q' in vhost 'defs-a'"},
		{"classic argument on a stream", `{"queues": [{"name": "s", "vhost": "defs-a", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "stream", "x-message-ttl": 5}}]}`,
			"invalid arg 'x-message-ttl' for queue 's' in vhost 'defs-a' of queue type rabbit_stream_queue"},
		{"existing queue, other arguments", `{"queues": [{"name": "defs-cq", "vhost": "defs-a", "durable": true, "auto_delete": false,
			"arguments": {"x-max-length": 500, "x-overflow": "reject-publish", "x-dead-letter-exchange": "defs-dlx", "x-dead-letter-routing-key": "dead", "x-max-priority": 10}}]}`,
			"inequivalent arg 'x-message-ttl' for queue 'defs-cq' in vhost 'defs-a': received none but current is the value '60000' of type 'long'"},
		{"existing queue, not durable", `{"queues": [{"name": "defs-dead", "vhost": "defs-a", "durable": false}]}`,
			"inequivalent arg 'durable' for queue 'defs-dead' in vhost 'defs-a': received 'false' but current is 'true'"},
		{"existing stream as a classic queue", `{"queues": [{"name": "defs-stream", "vhost": "defs-a", "durable": true, "auto_delete": false,
			"arguments": {"x-max-age": "7D", "x-max-length-bytes": 100000000, "x-stream-max-segment-size-bytes": 5000000}}]}`,
			"inequivalent arg 'x-queue-type' for queue 'defs-stream' in vhost 'defs-a': received 'classic' but current is 'stream'"},
		{"existing quorum queue as a stream", `{"queues": [{"name": "defs-qq", "vhost": "defs-a", "durable": true, "auto_delete": false,
			"arguments": {"x-queue-type": "stream", "x-delivery-limit": 3, "x-max-length-bytes": 1048576}}]}`,
			"inequivalent arg 'x-queue-type' for queue 'defs-qq' in vhost 'defs-a': received 'stream' but current is 'quorum'"},
		{"queue in no vhost", `{"queues": [{"name": "q", "vhost": "nowhere", "durable": true, "auto_delete": false, "arguments": {}}]}`,
			"queue 'q' in vhost 'nowhere': no vhost 'nowhere'"},
		{"queue twice", `{"queues": [{"name": "q", "vhost": "defs-a"}, {"name": "q", "vhost": "defs-a", "durable": false}]}`,
			"queue 'q' in vhost 'defs-a' is defined twice, differently"},
		{"queue of a single vhost's export", `{"queues": [{"name": "q", "durable": true, "auto_delete": false, "arguments": {}}]}`,
			"queues[0] 'q' has no vhost: a single virtual host's definitions are imported into a vhost"},
		// Exchanges.
		{"unknown exchange type", `{"exchanges": [{"name": "x", "vhost": "defs-a", "type": "x-delayed-message", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}]}`,
			"exchange 'x' in vhost 'defs-a': PRECONDITION_FAILED - unknown exchange type 'x-delayed-message'"},
		{"exchange without a type", `{"exchanges": [{"name": "x", "vhost": "defs-a"}]}`, "exchange 'x' in vhost 'defs-a': no type"},
		{"existing exchange, other type", `{"exchanges": [{"name": "defs-direct", "vhost": "defs-a", "type": "fanout", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}]}`,
			"inequivalent arg 'type' for exchange 'defs-direct' in vhost 'defs-a': received 'fanout' but current is 'direct'"},
		{"alternate exchange not a string", `{"exchanges": [{"name": "x", "vhost": "defs-a", "type": "direct", "durable": true, "auto_delete": false, "internal": false, "arguments": {"alternate-exchange": 1}}]}`,
			"invalid type 'long' for arg 'alternate-exchange' in exchange 'x' in vhost 'defs-a'"},
		// Bindings.
		{"binding from no exchange", `{"bindings": [{"source": "nope", "vhost": "defs-a", "destination": "defs-cq", "destination_type": "queue", "routing_key": "k", "arguments": {}}]}`,
			"binding of exchange 'nope' in vhost 'defs-a' with key 'k' to queue 'defs-cq': no exchange 'nope' in vhost 'defs-a'"},
		{"binding to no queue", `{"bindings": [{"source": "defs-direct", "vhost": "defs-a", "destination": "nope", "destination_type": "queue", "routing_key": "k", "arguments": {}}]}`,
			"no queue 'nope' in vhost 'defs-a' (it neither exists nor is in the definitions)"},
		{"binding to no exchange", `{"bindings": [{"source": "defs-direct", "vhost": "defs-a", "destination": "nope", "destination_type": "exchange", "routing_key": "k", "arguments": {}}]}`,
			"no exchange 'nope' in vhost 'defs-a'"},
		{"binding to a skipped amq. queue", `{"queues": [{"name": "amq.q", "vhost": "defs-a"}], "bindings": [{"source": "defs-direct", "vhost": "defs-a", "destination": "amq.q", "destination_type": "queue", "routing_key": "k", "arguments": {}}]}`,
			"no queue 'amq.q' in vhost 'defs-a'"},
		{"bad destination type", `{"bindings": [{"source": "defs-direct", "vhost": "defs-a", "destination": "defs-cq", "destination_type": "stream", "routing_key": "k", "arguments": {}}]}`,
			"destination_type 'stream' is neither queue nor exchange"},
		{"bad x-match", `{"bindings": [{"source": "defs-headers", "vhost": "defs-a", "destination": "defs-cq", "destination_type": "queue", "routing_key": "", "arguments": {"x-match": "some"}}]}`,
			"Invalid x-match field value <<\"some\">>; expected all, any, all-with-x, or any-with-x"},
		{"binding from the default exchange", `{"bindings": [{"source": "", "vhost": "defs-a", "destination": "defs-cq", "destination_type": "queue", "routing_key": "defs-cq", "arguments": {}}]}`,
			"ACCESS_REFUSED - operation not permitted on the default exchange"},
		{"topic key with three #", `{"bindings": [{"source": "defs-topic", "vhost": "defs-a", "destination": "defs-cq", "destination_type": "queue", "routing_key": "#.#.#", "arguments": {}}]}`,
			"uses 3 '#' wildcards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, tc.doc)
			merge(d, goodDefs)
			err := Import(b, d, "")
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Import = %v, want an *InvalidError", err)
			}
			if !strings.Contains(ie.Reason(), tc.reason) {
				t.Errorf("reason %q\nwant it to contain %q", ie.Reason(), tc.reason)
			}
			if len(ie.Reasons) != 1 {
				t.Errorf("reasons %q, want one", ie.Reasons)
			}
			if after := exportJSON(t, b, ""); after != before {
				t.Fatalf("the refused import changed the broker:\n%s", after)
			}
		})
	}

	// The good entities alone import.
	if err := Import(b, goodDefs, ""); err != nil {
		t.Fatalf("the good entities: %v", err)
	}
}

// Ensure Parse refuses malformed documents with a reason naming the
// place.
func TestParseRefusesMalformedDocuments(t *testing.T) {
	for _, tc := range []struct{ doc, reason string }{
		{`{"queues": [`, "not a JSON object: invalid JSON: it ends after 12 bytes"},
		{`{"queues": []} {}`, "not one JSON object: more follows at byte 15"},
		{`[1, 2]`, "not a JSON object: an array where an object was expected"},
		{`null`, "not a JSON object: null"},
		{`{"queues": {}}`, "queues: an object where an array was expected"},
		{`{"queues": [1]}`, "queues[0]: a number where an object was expected"},
		{`{"queues": [{"name": "q", "vhost": "/", "durable": "yes"}]}`, `queues[0] "q": durable: a string where a boolean was expected`},
		{`{"policies": [{"name": "p", "priority": 1.5}]}`, `policies[0] "p": priority: the number 1.5 where an integer was expected`},
		{`{"queues": [{"name": "q", "arguments": {"x-dead-letter-exchange": null}}]}`, `queues[0] "q": argument "x-dead-letter-exchange": null is not allowed`},
		{`{"queues": [{"name": "q", "arguments": {"x-a": {"b": [null]}}}]}`, `argument "x-a": "b": null is not allowed`},
		{`{"queues": [{"name": "q", "arguments": {"x-big": 1e400}}]}`, `argument "x-big": 1e400 is out of range`},
		{`{"queues": [{"name": "q", "arguments": []}]}`, "arguments must be an object, not an array"},
		{`{"users": [{"name": "u", "tags": 3}]}`, `users[0] "u": tags must be an array of strings or a comma-separated string, not a number`},
		{`{"users": [{"name": "u", "tags": [], "limits": {"max-channels": 1.5}}]}`, "max-channels should be a number, actually was 1.5"},
		{`{"vhosts": [{"name": "v", "limits": [["max-queues"]]}]}`, "limits must be an object or a list of [name, value] pairs"},
		{`{"rabbit_version": 3}`, "rabbit_version: a number where a string was expected"},
		{"{\"users\": [{\"name\": \"\xff\"}]}", "the document is not UTF-8"},
	} {
		_, err := Parse([]byte(tc.doc))
		var ie *InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("Parse(%s) = %v, want an *InvalidError", tc.doc, err)
			continue
		}
		if !strings.Contains(ie.Reason(), tc.reason) {
			t.Errorf("Parse(%s): reason %q\nwant it to contain %q", tc.doc, ie.Reason(), tc.reason)
		}
	}
	// Every element's fault is listed, up to maxReasons.
	var many []string
	for range maxReasons + 5 {
		many = append(many, `{"durable": 1}`)
	}
	_, err := Parse([]byte(`{"queues": [` + strings.Join(many, ",") + `]}`))
	var ie *InvalidError
	if !errors.As(err, &ie) || len(ie.Reasons) != maxReasons || ie.More != 5 || !strings.HasSuffix(ie.Error(), "; and 5 more") {
		t.Errorf("many faults: %v", err)
	}
	// What RabbitMQ accepts: an empty document, a BOM, unknown keys, tags
	// as a string, limits as pairs.
	for _, doc := range []string{"", " \n", "\xef\xbb\xbf{}", `{"unknown": [1], "users": [{"name": "u", "tags": "a, b", "extra": {}}]}`,
		`{"vhosts": [{"name": "v", "limits": []}]}`} {
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("Parse(%q): %v", doc, err)
		}
	}
	d := mustParse(t, `{"users": [{"name": "u", "tags": " a, b ,,c"}], "vhosts": [{"name": "v", "limits": [["max-queues", 3]]}],
		"queues": [{"name": "q", "arguments": {"i": 1, "f": 1.0, "e": 1e2, "s": "x", "b": true, "l": [1, "a"], "t": {"k": 2}}}]}`)
	if got := strings.Join(d.Users[0].Tags, "|"); got != "a|b|c" {
		t.Errorf("tags %q", got)
	}
	if d.VHosts[0].Limits["max-queues"] != 3 {
		t.Errorf("limits %v", d.VHosts[0].Limits)
	}
	args, _ := json.Marshal(d.Queues[0].Arguments)
	if want := `{"b":true,"e":100.0,"f":1.0,"i":1,"l":[1,"a"],"s":"x","t":{"k":2}}`; string(args) != want {
		t.Errorf("arguments %s, want %s", args, want)
	}
	if !d.Queues[0].Durable {
		t.Error("a queue without durable is not durable")
	}
	if _, ok := d.Queues[0].Arguments["i"].(int64); !ok {
		t.Errorf("integer argument is %T", d.Queues[0].Arguments["i"])
	}
}

// Ensure a change that fails after the validation (here a client
// declaring the queue meanwhile with other arguments) stops the import
// with ErrPartial, saying what was applied, which stays.
func TestImportFailingPartWay(t *testing.T) {
	b := openBroker(t)
	d := mustParse(t, `{
		"users": [{"name": "early", "password_hash": "", "tags": []}],
		"vhosts": [{"name": "v"}],
		"queues": [{"name": "late", "vhost": "/", "arguments": {"x-max-length": 1}}, {"name": "later", "vhost": "/"}]
	}`)
	err := importDefs(b, d, "", func() {
		if _, _, _, err := b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: "late", Durable: true,
			Args: map[string]any{"x-max-length": int64(2)}}}); err != nil {
			t.Fatal(err)
		}
	})
	const text = "definitions: import stopped at queue 'late' in vhost '/' after 2 of 4 changes, which stay applied: " +
		"definitions: import failed part way: PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'late' in vhost '/': received '1' but current is '2'"
	if !errors.Is(err, ErrPartial) || errors.Is(err, ErrInvalid) || err.Error() != text {
		t.Fatalf("Import = %v\nwant %s", err, text)
	}
	if _, err := b.GetUser("early"); err != nil || !b.VHostExists("v") {
		t.Errorf("what came before the failure is not applied: %v", err)
	}
	if _, err := b.Queue("/", "later"); err == nil {
		t.Error("what comes after the failure is applied")
	}
}
