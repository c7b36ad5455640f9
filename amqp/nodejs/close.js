// amqplib against Warren's close handling: frames still in flight when
// the connection closes, the failing method named in a channel.close,
// and crossing channel closes. Exits non-zero on any mismatch.
// WARREN_AMQP_URL names the broker.
'use strict';
const amqp = require('amqplib');

const url = process.env.WARREN_AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672/';

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

process.on('uncaughtException', (e) => fail('uncaught: ' + e.stack));
process.on('unhandledRejection', (e) => fail('unhandled rejection: ' + (e && e.stack)));

async function main() {
  // amqplib writes a channel's frames and the connection.close in
  // separate writes: publishes can still be on the wire after the close.
  // The close must end cleanly, without EPIPE or ECONNRESET.
  for (let round = 0; round < 20; round++) {
    const conn = await amqp.connect(url);
    conn.on('error', (e) => fail('round ' + round + ': connection error ' + e.message));
    const ch = await conn.createChannel();
    await ch.assertQueue('js-close', { durable: false });
    for (let i = 0; i < 10; i++) ch.sendToQueue('js-close', Buffer.alloc(1000, 'm'));
    await conn.close();
  }
  console.log('20 closes with publishes in flight: clean');

  const conn = await amqp.connect(url);
  conn.on('error', (e) => fail('connection error ' + e.message));

  // A channel.close names the failing method: amqplib matches it to the
  // pending call.
  const ch = await conn.createChannel();
  ch.on('error', () => {});
  try {
    await ch.checkQueue('js-missing');
    fail('checkQueue of a missing queue succeeded');
  } catch (e) {
    if (!/^Operation failed: QueueDeclare; 404 \(NOT-FOUND\) with message "NOT_FOUND - no queue 'js-missing' in vhost '\/'"/.test(e.message)) {
      fail('checkQueue of a missing queue: ' + e.message);
    }
  }
  console.log('channel.close names queue.declare');

  // A consumer whose queue its own channel deletes: the delete is
  // answered before the cancel, on which the channel closes.
  const chc = await conn.createChannel();
  await chc.assertQueue('js-cancelled');
  await new Promise((resolve, reject) => {
    chc.consume('js-cancelled', (msg) => {
      if (msg === null) resolve();
      else reject(new Error('message not expected'));
    }).then(() => chc.deleteQueue('js-cancelled'));
  });
  await chc.close();
  console.log('queue deleted under its consumer: delete-ok, then cancel');

  // Crossing closes: the server closes ch1 for a publish to a missing
  // exchange while the client closes it too; ch2 carries on.
  const ch1 = await conn.createChannel();
  ch1.on('error', () => {});
  const ch2 = await conn.createChannel();
  ch1.publish('js-nonexisting', '', Buffer.from('x'));
  await ch1.close().catch(() => {});
  await ch2.assertExchange('js-still-here', 'direct', { autoDelete: true });
  await ch2.close();
  await conn.close();
  console.log('crossing closes: other channel unaffected');
}

main().catch((e) => fail(e.stack));
