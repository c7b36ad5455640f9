// End-to-end scenarios of Warren's AMQP 1.0 with rhea, run by
// amqp1/e2e_rhea_test.go: `node e2e.js <scenario>` prints one JSON
// object, the scenario's results, which the Go test asserts (the Go test
// sets up queues and checks what the broker holds afterwards).
// WARREN_AMQP_URL names the broker (amqp://host:port).
'use strict';
const rhea = require('rhea');

const url = new URL(process.env.WARREN_AMQP_URL || 'amqp://127.0.0.1:5672');
const host = url.hostname;
const port = Number(url.port || 5672);

function within(ms, p, what) {
  return Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error('timeout: ' + what)), ms))]);
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

function errorOf(e) {
  if (!e) return null;
  return { condition: e.condition || null, description: e.description || e.message || String(e) };
}

// connect opens a connection (PLAIN as guest unless opts say otherwise).
function connect(opts) {
  const o = Object.assign({ host, port, hostname: 'vhost:/', reconnect: false, username: 'guest', password: 'guest' }, opts || {});
  return within(5000, new Promise((resolve, reject) => {
    const conn = rhea.create_container().connect(o);
    conn.on('connection_open', () => resolve(conn));
    conn.on('connection_error', (ctx) => reject(ctx.connection.error || new Error('connection error')));
    conn.on('disconnected', (ctx) => reject(ctx.error || new Error('disconnected')));
    conn.on('error', (e) => reject(e));
  }), 'connect');
}

function close(conn) {
  return within(5000, new Promise((resolve) => {
    conn.on('connection_close', () => resolve());
    conn.close();
  }), 'close').catch(() => {});
}

// openSender attaches a sender; it resolves with the sender once it has
// credit, or rejects with the attach's error.
function openSender(conn, address) {
  return within(5000, new Promise((resolve, reject) => {
    const opts = address === null ? { target: {} } : { target: { address } };
    const s = conn.open_sender(Object.assign(opts, { autosettle: false }));
    s.once('sendable', () => resolve(s));
    s.on('sender_error', (ctx) => reject(ctx.sender.error));
    s.on('sender_close', () => reject(new Error('sender closed')));
  }), 'sender ' + address);
}

// send sends one unsettled message and resolves with its outcome.
function send(sender, msg) {
  return within(5000, new Promise((resolve) => {
    const d = sender.send(msg);
    d.resolve = resolve;
    if (!sender._outcomes) {
      sender._outcomes = true;
      for (const o of ['accepted', 'released', 'rejected', 'modified']) {
        sender.on(o, (ctx) => {
          const st = ctx.delivery.remote_state;
          ctx.delivery.resolve({ outcome: o, error: errorOf(st && st.error) });
        });
      }
    }
  }), 'send');
}

// openReceiver attaches a receiver with manual credit and settlement.
function openReceiver(conn, source, extra) {
  return within(5000, new Promise((resolve, reject) => {
    const r = conn.open_receiver(Object.assign({ source, credit_window: 0, autoaccept: false }, extra || {}));
    r.got = [];
    r.waiters = [];
    r.on('message', (ctx) => {
      r.got.push(ctx);
      const w = r.waiters.shift();
      if (w) w();
    });
    r.once('receiver_open', () => {
      // A refused link is attached with a null source, then detached
      // with its error.
      // (rhea keeps a null terminus as a typed Null).
      const src = r.remote.attach.source;
      if (src && !(src.type && src.type.name === 'Null')) resolve(r);
    });
    r.on('receiver_error', (ctx) => reject(ctx.receiver.error));
    r.on('receiver_close', () => reject(new Error('receiver closed')));
  }), 'receiver');
}

// next resolves with the next message context, or null after ms.
function next(r, ms) {
  if (r.got.length > 0) return Promise.resolve(r.got.shift());
  return new Promise((resolve) => {
    const t = setTimeout(() => { r.waiters = r.waiters.filter((w) => w !== fire); resolve(null); }, ms);
    const fire = () => { clearTimeout(t); resolve(r.got.shift()); };
    r.waiters.push(fire);
  });
}

// text is a message's body as a string (a data section from 0-9-1, or
// an amqp-value string).
function text(c) {
  if (!c) return null;
  const b = bodyOf(c.message);
  return typeof b.value === 'string' ? b.value : JSON.stringify(b);
}

const data = (s) => rhea.message.data_section(Buffer.from(s));

function bodyOf(m) {
  const b = m.body;
  if (b && b.constructor && b.constructor.name === 'Section') {
    if (b.typecode === 0x75) return { kind: 'data', value: Buffer.from(b.content).toString() };
    if (b.typecode === 0x76) return { kind: 'sequence', value: b.content };
  }
  if (Buffer.isBuffer(b)) return { kind: 'value-binary', value: b.toString() };
  return { kind: 'value', value: b };
}

const scenarios = {
  // SASL PLAIN and ANONYMOUS open; a wrong password and no SASL at all
  // do not.
  async sasl() {
    const out = {};
    const plain = await connect();
    out.plain = plain.is_open();
    out.container = plain.remote.open && plain.remote.open.container_id ? 'set' : 'missing';
    out.maxFrame = plain.remote.open.max_frame_size;
    out.channelMax = plain.remote.open.channel_max;
    await close(plain);
    const anon = await connect({ username: 'anonymous', password: undefined });
    out.anonymous = anon.is_open();
    await close(anon);
    for (const [name, o] of [['badPassword', { password: 'wrong' }], ['noSASL', { username: undefined, password: undefined }]]) {
      try {
        const c = await connect(o);
        out[name] = 'opened';
        await close(c);
      } catch (e) {
        out[name] = 'refused';
      }
    }
    return out;
  },

  // Unsettled sends to a queue and an exchange are accepted, an
  // unroutable one released, and to the null target with a bad "to"
  // rejected.
  async publish() {
    const conn = await connect();
    const out = {};
    const q = await openSender(conn, '/queues/q');
    out.queue = [];
    for (let i = 0; i < 3; i++) out.queue.push((await send(q, { body: data('q' + i), message_id: 'q' + i })).outcome);
    const x = await openSender(conn, '/exchanges/amq.direct/rk');
    out.exchange = (await send(x, { body: data('x0') })).outcome;
    const u = await openSender(conn, '/exchanges/amq.direct/nobody');
    out.unroutable = (await send(u, { body: data('u0') })).outcome;
    const anon = await openSender(conn, null);
    out.anonymousTo = (await send(anon, { to: '/queues/q', body: data('q3') })).outcome;
    out.anonymousMissing = await send(anon, { to: '/exchanges/missing', body: 'm' });
    out.anonymousNoTo = await send(anon, { body: 'm' });
    await close(conn);
    return out;
  },

  // Credit: with one credit exactly one message comes until more credit
  // is given; accept, release (the message comes back), reject and
  // modified settle as RabbitMQ settles them.
  async credit() {
    const conn = await connect();
    const r = await openReceiver(conn, { address: '/queues/credit' });
    const out = {};
    r.add_credit(1);
    const first = await next(r, 2000);
    out.first = text(first);
    out.whileUnsettled = (await next(r, 300)) ? 'more' : 'none';
    first.delivery.accept();
    out.afterAccept = (await next(r, 300)) ? 'more' : 'none';
    r.add_credit(1);
    const second = await next(r, 2000);
    out.second = text(second);
    second.delivery.release();
    r.add_credit(1);
    const again = await next(r, 2000);
    out.afterRelease = text(again);
    out.afterReleaseFirstAcquirer = again && again.message.first_acquirer;
    out.afterReleaseDeliveryCount = again && again.message.delivery_count;
    again.delivery.accept();
    r.add_credit(1);
    const third = await next(r, 2000);
    out.third = text(third);
    third.delivery.modified({ delivery_failed: true });
    r.add_credit(1);
    const back = await next(r, 2000);
    out.afterModified = text(back);
    out.afterModifiedDeliveryCount = back && back.message.delivery_count;
    out.afterModifiedFirstAcquirer = back && back.message.first_acquirer;
    out.firstFirstAcquirer = first && first.message.first_acquirer;
    back.delivery.accept();
    await sleep(100);
    await close(conn);
    return out;
  },

  // Reject and modified undeliverable-here dead-letter through the
  // queue's dead-letter exchange.
  async deadletter() {
    const conn = await connect();
    const r = await openReceiver(conn, { address: '/queues/dl-src' });
    r.add_credit(2);
    const a = await next(r, 2000);
    const b = await next(r, 2000);
    a.delivery.reject({ condition: 'amqp:internal-error', description: 'no thanks' });
    b.delivery.modified({ delivery_failed: true, undeliverable_here: true });
    const dl = await openReceiver(conn, { address: '/queues/dl-dst' });
    dl.add_credit(10);
    const got = [];
    for (let i = 0; i < 2; i++) {
      const m = await next(dl, 2000);
      if (!m) break;
      got.push({ body: text(m), xDeath: !!(m.message.application_properties && m.message.application_properties['x-death']) || !!(m.message.message_annotations && m.message.message_annotations['x-death']), annotations: Object.keys(m.message.message_annotations || {}).sort(), firstAcquirer: m.message.first_acquirer });
      m.delivery.accept();
    }
    await sleep(100);
    await close(conn);
    return { rejected: text(a), modified: text(b), deadLettered: got, firstAcquirer: got.length ? got[0].firstAcquirer : null };
  },

  // A stream from the first offset and from offset 3, with the
  // x-stream-offset annotation.
  async stream() {
    const conn = await connect();
    const out = {};
    for (const [name, spec, n] of [['first', 'first', 5], ['offset3', 3, 2]]) {
      const filter = { 'rabbitmq:stream-offset-spec': rhea.types.wrap_described(spec === 'first' ? spec : rhea.types.wrap_long(spec), 'rabbitmq:stream-offset-spec') };
      const r = await openReceiver(conn, { address: '/queues/s', filter });
      r.add_credit(10);
      const got = [];
      // The n messages there are, then nothing more for a while.
      for (let i = 0; i <= n; i++) {
        const m = await next(r, i < n ? 2000 : 300);
        if (!m) break;
        got.push({ body: text(m), offset: Number(m.message.message_annotations['x-stream-offset']) });
        m.delivery.accept();
      }
      out[name] = got;
      out[name + 'Filter'] = r.remote.attach.source && r.remote.attach.source.filter ? Object.keys(r.remote.attach.source.filter) : null;
    }
    await close(conn);
    return out;
  },

  // Properties, application properties and body kinds survive a round
  // trip through the queue named by argv[3].
  async roundtrip() {
    const queue = process.argv[3];
    const conn = await connect();
    const s = await openSender(conn, '/queues/' + encodeURIComponent(queue));
    const props = {
      message_id: 'mid-1', correlation_id: 'cid-1', content_type: 'text/plain', content_encoding: 'identity',
      subject: 'subj', reply_to: '/queues/replies', group_id: 'g1', creation_time: new Date(1700000000000),
      user_id: Buffer.from('guest'),
    };
    const appProps = { s: 'str', i: 42, neg: -7, b: true, d: 1.5 };
    const msgs = [
      Object.assign({ body: rhea.message.data_section(Buffer.from('data-body')), application_properties: appProps, durable: true, priority: 7 }, props),
      { body: 'a string value', message_id: 'mid-2' },
      { body: rhea.message.sequence_section(['x', 1, true]), message_id: 'mid-3' },
      { body: { k: 'v' }, message_id: 'mid-4' },
    ];
    const outcomes = [];
    for (const m of msgs) outcomes.push((await send(s, m)).outcome);
    const r = await openReceiver(conn, Object.assign({ address: '/queues/' + encodeURIComponent(queue) }, queue.startsWith('stream') ? { filter: { 'rabbitmq:stream-offset-spec': rhea.types.wrap_described('first', 'rabbitmq:stream-offset-spec') } } : {}));
    r.add_credit(10);
    const got = [];
    for (let i = 0; i < msgs.length; i++) {
      const c = await next(r, 2000);
      if (!c) break;
      const m = c.message;
      const o = { body: bodyOf(m) };
      for (const k of Object.keys(props)) {
        if (m[k] === undefined) continue;
        o[k] = m[k] instanceof Date ? m[k].getTime() : Buffer.isBuffer(m[k]) ? m[k].toString() : m[k];
      }
      o.durable = m.durable;
      o.priority = m.priority;
      o.application_properties = m.application_properties || null;
      got.push(o);
      c.delivery.accept();
    }
    await sleep(100);
    await close(conn);
    return { outcomes, got };
  },

  // Attaching to what does not exist: amqp:not-found with RabbitMQ's
  // text.
  async notfound() {
    const conn = await connect();
    const out = {};
    try { await openReceiver(conn, { address: '/queues/missing' }); out.receiver = 'attached'; } catch (e) { out.receiver = errorOf(e); }
    try { await openSender(conn, '/queues/missing'); out.sender = 'attached'; } catch (e) { out.sender = errorOf(e); }
    try { await openSender(conn, '/exchanges/missing/k'); out.exchange = 'attached'; } catch (e) { out.exchange = errorOf(e); }
    try { await openSender(conn, '/topic/x'); out.v1 = 'attached'; } catch (e) { out.v1 = errorOf(e); }
    out.stillOpen = conn.is_open();
    await close(conn);
    return out;
  },

  // A direct reply-to requester (RabbitMQ 4.2's volatile queue) replied
  // to by a responder on another connection through the null target.
  async replyto() {
    const req = await connect();
    const replies = await openReceiver(req, { dynamic: true, capabilities: ['rabbitmq:volatile-queue'], expiry_policy: 'link-detach' }, { snd_settle_mode: 1 });
    replies.add_credit(5);
    const address = replies.remote.attach.source.address;
    const snd = await openSender(req, '/queues/rpc');
    const sent = (await send(snd, { body: 'ping', reply_to: address, correlation_id: 'c1' })).outcome;
    const resp = await connect();
    const r = await openReceiver(resp, { address: '/queues/rpc' });
    r.add_credit(1);
    const request = await next(r, 2000);
    request.delivery.accept();
    const anon = await openSender(resp, null);
    const replied = (await send(anon, { to: request.message.reply_to, correlation_id: request.message.correlation_id, body: 'pong' })).outcome;
    const reply = await next(replies, 2000);
    const out = { address, sent, replied, requestReplyTo: request.message.reply_to, reply: reply && reply.message.body, correlation: reply && reply.message.correlation_id, settled: reply && reply.delivery.remote_settled };
    await close(resp);
    await close(req);
    return out;
  },
};

async function main() {
  const name = process.argv[2];
  const f = scenarios[name];
  if (!f) throw new Error('no scenario ' + name);
  const out = await f();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

main().catch((e) => {
  console.error('FAIL: ' + (e && e.stack ? e.stack : JSON.stringify(e)));
  process.exit(1);
});
