// Queues and Streams: the paged list with a form to add one, and a
// classic or quorum queue's page (a stream's page is in streams.js).

import { api, enc, get } from './client.js';
import {
  confirmButton, facts, field, fill, fmtArgs, fmtBytes, fmtNum, fmtRate, fmtTime, form, h, input, link, notify, parseArgs,
  route, section, select, stat, table,
} from './dom.js';
import { History, lineChart } from './chart.js';
import { pagedList } from './list.js';
import { bindingsTable, publishForm } from './exchanges.js';
import { streamPage } from './streams.js';

const QUEUE_COLUMNS = [
  'name', 'vhost', 'type', 'durable', 'auto_delete', 'exclusive', 'arguments', 'policy', 'state', 'consumers',
  'messages', 'messages_ready', 'messages_unacknowledged', 'message_stats.publish_details.rate',
  'message_stats.deliver_get_details.rate', 'message_stats.ack_details.rate',
].join(',');

function features(q) {
  const f = [];
  if (q.durable) f.push(h('abbr', { class: 'tag', title: 'durable' }, 'D'));
  if (q.auto_delete) f.push(h('abbr', { class: 'tag', title: 'auto-delete' }, 'AD'));
  if (q.exclusive) f.push(h('abbr', { class: 'tag', title: 'exclusive' }, 'Excl'));
  const args = q.arguments || {};
  for (const k of Object.keys(args)) if (k !== 'x-queue-type') f.push(h('abbr', { class: 'tag arg', title: `${k}: ${JSON.stringify(args[k])}` }, k.replace(/^x-/, '')));
  return f;
}

const rate = (q, k) => (q.message_stats && q.message_stats[k + '_details'] ? fmtRate(q.message_stats[k + '_details']) : '');

export function queuesPage(ctx) {
  const list = pagedList(ctx, {
    id: 'queues', noun: 'queues and streams', columns: QUEUE_COLUMNS, empty: 'No queues or streams.',
    path: (v) => (v ? `/queues/${enc(v)}` : '/queues'),
    cols: () => [
      { title: 'Virtual host', sort: 'vhost', render: (q) => q.vhost, allOnly: true },
      { title: 'Name', sort: 'name', render: (q) => link(route('queues', q.vhost, q.name), q.name), cls: 'name' },
      { title: 'Type', sort: 'type', render: (q) => h('span', { class: 'qtype ' + q.type }, q.type) },
      { title: 'Features', render: features },
      { title: 'Policy', sort: 'policy', render: (q) => q.policy || '' },
      { title: 'State', sort: 'state', render: (q) => q.state },
      { title: 'Ready', sort: 'messages_ready', render: (q) => fmtNum(q.messages_ready), cls: 'num' },
      { title: 'Unacked', sort: 'messages_unacknowledged', render: (q) => fmtNum(q.messages_unacknowledged), cls: 'num' },
      { title: 'Total', sort: 'messages', render: (q) => fmtNum(q.messages), cls: 'num messages' },
      { title: 'Incoming', sort: 'message_stats.publish_details.rate', render: (q) => rate(q, 'publish'), cls: 'num' },
      { title: 'Deliver / get', sort: 'message_stats.deliver_get_details.rate', render: (q) => rate(q, 'deliver_get'), cls: 'num' },
      { title: 'Ack', sort: 'message_stats.ack_details.rate', render: (q) => rate(q, 'ack'), cls: 'num' },
      { title: 'Consumers', sort: 'consumers', render: (q) => fmtNum(q.consumers), cls: 'num' },
    ],
  });
  const add = addQueueForm(ctx);
  const el = h('div', { class: 'page', id: 'page-queues' },
    h('div', { class: 'page-head' }, h('h1', null, 'Queues and Streams'),
      h('nav', { class: 'subtabs' }, h('a', { href: '#/queues', class: 'current' }, 'Queues and streams'), h('a', { href: '#/superstreams', id: 'to-superstreams' }, 'Super streams'))),
    section('All queues and streams', list.el), add);
  return { el, refresh: list.refresh };
}

function addQueueForm(ctx) {
  const f = form('grid', async (v) => {
    if (!v.name) throw new Error('A queue needs a name.');
    const args = parseArgs(v.arguments);
    if (v.type) args['x-queue-type'] = v.type;
    await api('PUT', `/queues/${enc(v.vhost)}/${enc(v.name)}`, { body: { durable: v.durable === 'true', auto_delete: v.auto_delete, arguments: args } });
    notify(`${v.type === 'stream' ? 'Stream' : 'Queue'} ${v.name} added.`);
    f.reset();
    ctx.refreshNow();
  },
  field('Virtual host', select('vhost', ctx.vhosts, ctx.vhost || ctx.vhosts[0])),
  field('Type', select('type', [['classic', 'Classic'], ['quorum', 'Quorum'], ['stream', 'Stream']], 'classic')),
  field('Name', input('name', { id: 'add-queue-name', required: true })),
  field('Durability', select('durable', [['true', 'Durable'], ['false', 'Transient']], 'true')),
  field('Auto delete', h('input', { type: 'checkbox', name: 'auto_delete' })),
  field('Arguments', h('textarea', { name: 'arguments', rows: 2, placeholder: 'x-max-length = 1000' }), 'key = value, one per line'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'add-queue' }, 'Add queue')));
  return h('details', { class: 'panel', id: 'add-queue-panel', open: true }, h('summary', null, 'Add a new queue or stream'), f);
}

// queuePage shows a classic or quorum queue, or hands over to the
// stream page when the object turns out to be a stream.
export function queuePage(ctx, vhost, name) {
  const el = h('div', { class: 'page', id: 'page-queue' });
  let inner = null;
  async function refresh() {
    if (!inner) {
      const q = await get(`/queues/${enc(vhost)}/${enc(name)}`);
      inner = q.type === 'stream' ? streamPage(ctx, vhost, name) : classicQueuePage(ctx, vhost, name);
      fill(el, inner.el);
      return inner.refresh(q);
    }
    return inner.refresh();
  }
  return { el, refresh };
}

function classicQueuePage(ctx, vhost, name) {
  const base = `/queues/${enc(vhost)}/${enc(name)}`;
  // The API keeps no history of one queue's depth: the chart accumulates
  // what each 5 s refresh saw, for as long as the page is open.
  const depth = new History(60, 3);
  const rates = new History(60, 3);
  const head = h('div', { class: 'stats-row' });
  const chartBox = h('div', { class: 'charts' });
  const details = h('div');
  const historyBox = h('div');
  const historySection = section('History', historyBox);
  historySection.id = 'queue-history';
  historySection.hidden = true;
  const consumers = h('div');
  const bindings = h('div');
  const messages = h('div', { class: 'messages', id: 'got-messages' });

  const getForm = form('inline', async (v) => {
    const got = await api('POST', base + '/get', { body: { count: Number(v.count) || 1, ackmode: v.ackmode, encoding: v.encoding, truncate: 50000 } });
    fill(messages, got.length ? got.map((m, i) => messageView(m, i + 1)) : h('p', { class: 'empty' }, 'Queue is empty.'));
    ctx.refreshNow();
  },
  field('Ack mode', select('ackmode', [['ack_requeue_true', 'Nack message requeue true'], ['ack_requeue_false', 'Automatic ack'],
    ['reject_requeue_true', 'Reject requeue true'], ['reject_requeue_false', 'Reject requeue false']], 'ack_requeue_true')),
  field('Encoding', select('encoding', [['auto', 'Auto string / base64'], ['base64', 'base64']], 'auto')),
  field('Messages', input('count', { type: 'number', min: 1, value: 1, id: 'get-count' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'get-messages' }, 'Get messages')));

  const el = h('div', null,
    h('div', { class: 'page-head' }, h('h1', null, 'Queue ', h('span', { class: 'obj-name', id: 'queue-name' }, name)), h('span', { class: 'muted' }, 'in virtual host ', vhost)),
    head,
    section('Overview', chartBox, details),
    historySection,
    section('Consumers', consumers),
    section('Bindings', bindings, bindForm(ctx, vhost, name)),
    section('Publish message', h('p', { class: 'muted' }, 'Published to the default exchange with the queue\u2019s name as routing key.'),
      publishForm(ctx, vhost, '', name)),
    section('Get messages', h('p', { class: 'muted' }, 'Getting messages takes them from the queue; with a requeue ack mode they go back.'), getForm, messages),
    section('Purge or delete',
      h('div', { class: 'actions' },
        confirmButton('Purge messages', 'Remove every ready message?', async () => {
          await api('DELETE', base + '/contents');
          notify(`Queue ${name} purged.`);
          ctx.refreshNow();
        }),
        ' ',
        confirmButton('Delete queue', `Delete queue ${name}?`, async () => {
          await api('DELETE', base);
          notify(`Queue ${name} deleted.`);
          ctx.go('/queues');
        }))));

  async function refresh(pre) {
    const [q, cons, binds] = await Promise.all([
      pre || get(base), get(`/consumers/${enc(vhost)}`), get(base + '/bindings'),
    ]);
    const now = Date.now();
    depth.add('Ready', q.messages_ready, now);
    depth.add('Unacked', q.messages_unacknowledged, now);
    depth.add('Total', q.messages, now);
    const ms = q.message_stats || {};
    rates.add('Publish', (ms.publish_details || {}).rate || 0, now);
    rates.add('Deliver / get', (ms.deliver_get_details || {}).rate || 0, now);
    rates.add('Ack', (ms.ack_details || {}).rate || 0, now);
    fill(head,
      stat('Ready', fmtNum(q.messages_ready), 'queue-ready'),
      stat('Unacked', fmtNum(q.messages_unacknowledged), 'queue-unacked'),
      stat('Total', fmtNum(q.messages), 'queue-messages'),
      stat('Consumers', fmtNum(q.consumers), 'queue-consumers'),
      stat('Incoming', fmtRate(ms.publish_details)),
      stat('Deliver / get', fmtRate(ms.deliver_get_details)));
    fill(chartBox,
      lineChart(depth.list(), { title: 'Queued messages (since this page opened)', id: 'queue-depth-chart' }),
      lineChart(rates.list(), { title: 'Message rates (since this page opened)', unit: '/s' }));
    const pol = q.effective_policy_definition || {};
    fill(details, facts([
      ['Type', q.type], ['State', q.state], ['Node', q.node],
      ['Features', [q.durable ? 'durable' : 'transient', q.auto_delete ? ', auto-delete' : '', q.exclusive ? ', exclusive' : ''].join('')],
      ['Arguments', fmtArgs(q.arguments) || '\u2013'],
      ['Policy', h('span', { id: 'queue-policy' }, q.policy || '\u2013')],
      ['Effective policy definition', fmtArgs(pol) || '\u2013'],
      ['Message bytes', fmtBytes(q.message_bytes)],
      q.single_active_consumer_tag ? ['Single active consumer', q.single_active_consumer_tag] : null,
      q.idle_since ? ['Idle since', q.idle_since] : null,
    ]));
    historySection.hidden = !q.history;
    if (q.history) fill(historyBox, historyView(q.history));
    const mine = cons.filter((c) => c.queue.name === name);
    fill(consumers, table([
      { title: 'Channel', render: (c) => c.channel_details.name },
      { title: 'Consumer tag', render: (c) => c.consumer_tag },
      { title: 'Ack required', render: (c) => (c.ack_required ? '\u25cf' : '\u25cb') },
      { title: 'Exclusive', render: (c) => (c.exclusive ? '\u25cf' : '\u25cb') },
      { title: 'Prefetch', render: (c) => fmtNum(c.prefetch_count), cls: 'num' },
      { title: 'Active', render: (c) => (c.active ? 'yes' : 'no') },
      { title: 'Arguments', render: (c) => fmtArgs(c.arguments) },
    ], mine, { empty: 'No consumers.' }));
    fill(bindings, bindingsTable(ctx, binds, 'to'));
  }
  return { el, refresh };
}

// historyView is a queue's history (x-history-max-age,
// x-history-max-length-bytes): what its log holds, settled or not, the
// limits in effect and the readers replaying it.
function historyView(hi) {
  const empty = !hi.messages;
  return [
    h('div', { class: 'stats-row' },
      stat('Messages', fmtNum(hi.messages), 'history-messages'),
      stat('Size', fmtBytes(hi.bytes), 'history-bytes'),
      stat('Segments', fmtNum(hi.segments), 'history-segments'),
      stat('Readers', fmtNum(hi.readers), 'history-readers')),
    facts([
      ['Offsets', h('span', { id: 'history-offsets' }, empty ? '\u2013' : `${fmtNum(hi.first_offset)} \u2013 ${fmtNum(hi.last_offset)}`)],
      ['Oldest message', h('span', { id: 'history-first-timestamp' }, empty ? '\u2013' : fmtTime(hi.first_timestamp))],
      ['Max age', h('span', { id: 'history-max-age' }, hi.max_age_seconds ? fmtAge(hi.max_age_seconds) : 'not set')],
      ['Max length', h('span', { id: 'history-max-length' }, hi.max_length_bytes ? fmtBytes(hi.max_length_bytes) : 'not set')],
    ]),
    h('p', { class: 'muted' }, 'What the queue\u2019s log holds: the settled messages kept and those still queued. ',
      'A consumer with an x-stream-offset argument (basic.qos and manual acks) replays it without taking anything from the queue.'),
  ];
}

// fmtAge shows seconds in the largest unit that divides them.
function fmtAge(sec) {
  for (const [n, u] of [[86400, 'd'], [3600, 'h'], [60, 'min']]) if (sec % n === 0) return `${fmtNum(sec / n)} ${u}`;
  return `${fmtNum(sec)} s`;
}

function messageView(m, n) {
  const p = m.properties || {};
  return h('div', { class: 'message' },
    h('h3', null, `Message ${n}`),
    facts([
      ['Exchange', m.exchange || '(AMQP default)'], ['Routing key', m.routing_key], ['Redelivered', m.redelivered ? 'yes' : 'no'],
      ['Remaining', fmtNum(m.message_count)],
      ['Properties', Object.keys(p).length ? fmtArgs(p) : '\u2013'],
      ['Payload', h('span', null, `${fmtNum(m.payload_bytes)} bytes, encoding: ${m.payload_encoding}`)],
    ]),
    h('pre', { class: 'payload' }, m.payload));
}

// bindForm binds the queue to an exchange.
function bindForm(ctx, vhost, queue) {
  const f = form('inline', async (v) => {
    if (!v.source) throw new Error('Name the exchange to bind from.');
    await api('POST', `/bindings/${enc(vhost)}/e/${enc(v.source)}/q/${enc(queue)}`, { body: { routing_key: v.routing_key, arguments: parseArgs(v.arguments) } });
    notify(`Bound ${queue} to ${v.source}.`);
    f.reset();
    ctx.refreshNow();
  },
  field('From exchange', input('source', { id: 'bind-from-exchange' })),
  field('Routing key', input('routing_key')),
  field('Arguments', input('arguments', { placeholder: 'key = value' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Bind')));
  return h('div', { class: 'subform' }, h('h3', null, 'Add binding to this queue'), f);
}
