// Package amqp1 is Warren's AMQP 1.0 front end, served on the AMQP port
// as RabbitMQ 4.x serves it: the AMQP 0-9-1 listener (package amqp)
// hands over a connection whose protocol header is AMQP 1.0's
// (amqp.Config.AMQP10 = Server.Handoff), and this package runs it over
// the codec of internal/amqp10/frame and the model of package queues.
// Neither front end imports the other; message conversion between the
// two protocols is internal/msgconv's.
//
// A connection goes as RabbitMQ 4.x's rabbit_amqp_reader and
// rabbit_amqp_session run it:
//
//	client                           Warren
//	AMQP 3 1 0 0              →                         (AMQP 0 1 0 0 or 2 1 0 0: ← AMQP 3 1 0 0, closed)
//	                          ←      AMQP 3 1 0 0, sasl-mechanisms: auth_mechanisms (PLAIN AMQPLAIN ANONYMOUS)
//	sasl-init PLAIN \0u\0p    →
//	                          ←      sasl-outcome ok (auth: after the silent-close delay, then closed)
//	AMQP 0 1 0 0, open        →                         hostname "vhost:<name>" picks the vhost, else "/"
//	                          ←      AMQP 0 1 0 0, open (max-frame-size 131072, channel-max 63,
//	                                 idle-time-out 30000: half of the 60 s Warren waits)
//	begin, attach, flow, transfer, disposition, detach, end, close
//
// Errors before open close the socket without a frame, after a delay
// (RabbitMQ's silent close); after open a bad frame closes the
// connection with amqp:connection:framing-error or amqp:decode-error, a
// silent client with amqp:resource-limit-exceeded. A link refused at
// attach is attached with a null terminus and detached with its error
// (amqp:not-found "no queue 'q' in vhost '/'", amqp:unauthorized-access,
// amqp:invalid-field for an address that is not RabbitMQ's v2 format).
//
// Addresses are in address.go, publishing (the client's senders) in
// publish.go, consuming (its receivers) in consume.go, the filters of a
// stream source (rabbitmq:stream-offset-spec, the Bloom filter's
// rabbitmq:stream-filter and rabbitmq:stream-match-unfiltered, the
// property filter expressions amqp:properties-filter and
// amqp:application-properties-filter, matched per record before the
// record takes link credit) in filter.go, direct reply-to (RabbitMQ
// 4.2's volatile queues, shared with AMQP 0-9-1 through
// queues.ReplyRegistry) in reply_to.go, sessions and their flow control
// in session.go. The management node at /management ("HTTP over AMQP
// 1.0": declaring and deleting queues, exchanges and bindings over a
// link pair, as RabbitMQ 4.x's rabbit_amqp_management) is in
// management.go, its operations in management_ops.go:
//
//	client sender (settled, paired)   → transfer: to "/queues/q", subject "PUT",
//	                                    message-id 1, reply-to "$me", amqp-value {durable: true}
//	client receiver (paired)          ← transfer: subject "201", correlation-id 1,
//	                                    http:response "1.1", amqp-value {name: "q", type: "classic", ...}
package amqp1
