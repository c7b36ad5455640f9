// Smoke test of Warren's AMQP 0-9-1 with amqplib: declare, publish with
// confirms, consume with manual acks, a topic exchange and basic.get.
// Exits non-zero on any mismatch. WARREN_AMQP_URL names the broker.
'use strict';
const amqp = require('amqplib');

const url = process.env.WARREN_AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672/';
const N = 100;

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

async function main() {
  const conn = await amqp.connect(url);
  const ch = await conn.createConfirmChannel();
  const q = await ch.assertQueue('js-smoke', { durable: true });
  if (q.queue !== 'js-smoke' || q.messageCount !== 0) fail('declare-ok ' + JSON.stringify(q));

  for (let i = 0; i < N; i++) {
    ch.sendToQueue('js-smoke', Buffer.from('m' + i), { persistent: true, headers: { i: i, b: 'x', a: 'y' } });
  }
  await ch.waitForConfirms();
  const q2 = await ch.checkQueue('js-smoke');
  if (q2.messageCount !== N) fail('message count ' + q2.messageCount);

  const got = [];
  await new Promise((resolve, reject) => {
    ch.consume('js-smoke', (m) => {
      got.push(m);
      if (got.length === N) {
        ch.ack(m, true);
        resolve();
      }
    }, { noAck: false }).catch(reject);
  });
  for (let i = 0; i < N; i++) {
    const m = got[i];
    if (m.content.toString() !== 'm' + i) fail('body ' + i + ': ' + m.content.toString());
    if (m.fields.deliveryTag !== i + 1) fail('tag ' + m.fields.deliveryTag);
    if (m.properties.headers.i !== i) fail('header i ' + m.properties.headers.i);
    if (m.properties.deliveryMode !== 2) fail('delivery mode ' + m.properties.deliveryMode);
  }

  // Topic routing and basic.get.
  await ch.assertExchange('js-topic', 'topic', { durable: false });
  const tq = await ch.assertQueue('', { exclusive: true });
  if (!tq.queue.startsWith('amq.gen-')) fail('server-named queue ' + tq.queue);
  await ch.bindQueue(tq.queue, 'js-topic', 'a.*.c');
  ch.publish('js-topic', 'a.b.c', Buffer.from('routed'));
  ch.publish('js-topic', 'a.b.d', Buffer.from('dropped'));
  await ch.waitForConfirms();
  const m = await ch.get(tq.queue, { noAck: true });
  if (!m || m.content.toString() !== 'routed' || m.fields.routingKey !== 'a.b.c' || m.fields.messageCount !== 0) {
    fail('get ' + (m && m.content.toString()));
  }
  const empty = await ch.get(tq.queue, { noAck: true });
  if (empty !== false) fail('expected get-empty');

  // A channel error carries RabbitMQ's code and text.
  const ch2 = await conn.createChannel();
  let err = null;
  ch2.on('error', () => {});
  try {
    await ch2.checkQueue('js-missing');
  } catch (e) {
    err = e;
  }
  if (!err || err.code !== 404 || !/NOT_FOUND - no queue 'js-missing' in vhost '\/'/.test(err.message)) {
    fail('passive declare of a missing queue: ' + (err && err.message));
  }
  await ch.deleteQueue('js-smoke');
  await conn.close();
  console.log('ok: ' + N + ' messages round-tripped with amqplib');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
