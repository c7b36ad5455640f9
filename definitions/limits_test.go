package definitions

import (
	"errors"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues"
)

// Ensure an import that would take a vhost over its max-queues (the
// document's limit, else the current one) is refused whole with
// rabbit_definitions' text, and that queues already there do not count
// as added.
func TestImportQueueLimit(t *testing.T) {
	b := openBroker(t)
	doc := `{"vhosts":[{"name":"lim","limits":{"max-queues":2}}],
	"queues":[{"name":"q1","vhost":"lim","durable":true},{"name":"q2","vhost":"lim","durable":true},{"name":"q3","vhost":"lim","durable":true}]}`
	err := Import(b, mustParse(t, doc), "")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Adding 3 queue(s) to virtual host \"lim\" would exceed the limit of 2 queue(s).\n\nThis virtual host currently has 0 queue(s) defined.\n\nImport aborted!") {
		t.Fatalf("import over the limit: %v", err)
	}
	if b.VHostExists("lim") {
		t.Fatal("the refused import created the vhost")
	}
	doc = strings.Replace(doc, `"max-queues":2`, `"max-queues":3`, 1)
	if err := Import(b, mustParse(t, doc), ""); err != nil {
		t.Fatal(err)
	}
	// Again: the three exist, nothing is added.
	if err := Import(b, mustParse(t, doc), ""); err != nil {
		t.Fatalf("re-import: %v", err)
	}
	if _, _, _, err := b.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "lim", Name: "q4", Durable: true}}); err == nil {
		t.Fatal("a fourth queue over max-queues 3")
	}
}
