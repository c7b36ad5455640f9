package amqp

import (
	"sort"
	"sync"

	"github.com/warren-mq/warren/amqp/wire"
)

// txState buffers a transactional channel's publishes and acks until
// tx.commit.
type txState struct {
	pubs []txPub
	acks []txAck
}

type txPub struct {
	exchange, key string
	mandatory     bool
	props, body   []byte
}

type txAck struct {
	acks []pendingAck
	mode settleMode
}

// reset forgets what the transaction buffered.
func (t *txState) reset() {
	t.pubs = nil
	t.acks = nil
}

// rollback is tx.rollback: buffered publishes are dropped and buffered
// acks go back to the unacked set (nothing was settled), as RabbitMQ
// does.
func (ch *channel) rollback() {
	var back []pendingAck
	for _, a := range ch.tx.acks {
		back = append(back, a.acks...)
	}
	ch.tx.reset()
	if len(back) == 0 {
		return
	}
	ch.mu.Lock()
	u := append(ch.mu.unacked, back...)
	sort.Slice(u, func(i, j int) bool { return u[i].tag < u[j].tag })
	ch.mu.unacked = u
	ch.mu.Unlock()
}

// commit publishes and settles what the transaction buffered, waits until
// every queue has stored the publishes, then replies commit-ok.
func (ch *channel) commit() error {
	t := ch.tx
	var wg sync.WaitGroup
	var failed bool
	var mu sync.Mutex
	for _, p := range t.pubs {
		wg.Add(1)
		tracker := &txTracker{wg: &wg, mu: &mu, failed: &failed}
		if err := ch.publishTx(p, tracker); err != nil {
			wg.Done()
			return err
		}
	}
	wg.Wait()
	for _, a := range t.acks {
		ch.settle(a.acks, a.mode)
	}
	ch.kickLimit()
	t.reset()
	if failed {
		return newError(wire.PreconditionFailed, "partial tx completion")
	}
	ch.c.send(ch.id, &wire.TxCommitOk{})
	return nil
}

// txTracker counts a transactional publish's queue outcomes.
type txTracker struct {
	wg     *sync.WaitGroup
	mu     *sync.Mutex
	failed *bool
}

// publishTx publishes one buffered message; the tracker's WaitGroup is
// released once every queue has stored it.
func (ch *channel) publishTx(p txPub, tr *txTracker) error {
	pc := &pubConfirm{ch: ch}
	pc.remaining.Store(1)
	ch.barrier.add()
	pc.onDone = func(failed bool) {
		if failed {
			tr.mu.Lock()
			*tr.failed = true
			tr.mu.Unlock()
		}
		tr.wg.Done()
	}
	return ch.publish(p.exchange, p.key, p.mandatory, p.props, p.body, pc)
}
