// Package msgconv converts messages between AMQP 0-9-1 and AMQP 1.0 as
// RabbitMQ 4.x's message containers (mc_amqpl, mc_amqp) do, for every
// front end that needs it: the 0-9-1 front end publishing to and
// consuming from streams (which store AMQP 1.0 messages), the 1.0 front
// end publishing to and consuming from classic and quorum queues (which
// store 0-9-1 records). convert.go holds the mapping table.
package msgconv
