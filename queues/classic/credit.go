package classic

// Link credit: a consumer made with ConsumerOptions.Credited gets as many
// deliveries as its credit, as an AMQP 1.0 receiver grants them, rather
// than a prefetch window that acks reopen.

// SetCredit sets a credited consumer's credit to n (an AMQP 1.0 flow's
// link-credit); deliveries resume if n > 0.
func (c *Consumer) SetCredit(n int) {
	q := c.q
	q.mu.Lock()
	c.credit = max(n, 0)
	wake := c.credit > 0 && q.mu.dispatching && q.mu.ready > 0
	q.mu.Unlock()
	if wake {
		q.Kick()
	}
}

// DrainCredit uses up a credited consumer's credit as an AMQP 1.0 drain
// asks: it waits while the queue has ready messages the consumer could
// take (the dispatcher delivers them), then sets the credit to 0 and
// returns what was left unused. It must not be called from the Sink.
func (c *Consumer) DrainCredit() int {
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.mu.closed && !c.cancelled && (q.mu.delivering == c ||
		c.credit > 0 && q.mu.ready > 0 && q.mu.dispatching && (q.mu.active == nil || q.mu.active == c)) {
		q.mu.Unlock()
		q.Kick()
		q.mu.Lock()
		if q.mu.delivering == nil && !(c.credit > 0 && q.mu.ready > 0) {
			break
		}
		q.mu.waiters++
		q.mu.idle.Wait()
		q.mu.waiters--
	}
	left := c.credit
	c.credit = 0
	return left
}
