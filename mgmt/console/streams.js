// A stream's page (offsets, segments, size, retention, publishers,
// consumers with their offset lag charted) and the super streams page.

import { api, enc, get, query } from './client.js';
import {
  confirmButton, facts, field, fill, fmtArgs, fmtBytes, fmtNum, fmtRate, fmtTime, form, h, input, link, notify, route,
  section, select, stat, table,
} from './dom.js';
import { History, lineChart } from './chart.js';

const none = '\u2013';

// retention describes the stream's retention from its arguments and the
// policy in effect (a declared argument wins, as in RabbitMQ).
function retention(q) {
  const a = q.arguments || {};
  const p = q.effective_policy_definition || {};
  const bytes = a['x-max-length-bytes'] ?? p['max-length-bytes'];
  const age = a['x-max-age'] ?? p['max-age'];
  const seg = a['x-stream-max-segment-size-bytes'] ?? p['stream-max-segment-size-bytes'];
  const parts = [];
  if (bytes !== undefined) parts.push(`max ${fmtBytes(Number(bytes))}`);
  if (age !== undefined) parts.push(`max age ${age}`);
  return [parts.length ? parts.join(', ') : 'unlimited', seg !== undefined ? fmtBytes(Number(seg)) : 'default (500 MiB)'];
}

export function streamPage(ctx, vhost, name) {
  const base = `/queues/${enc(vhost)}/${enc(name)}`;
  // The API keeps no per-stream or per-consumer history: these charts
  // accumulate what each 5 s refresh saw while the page is open.
  const lag = new History(60, 12);
  const size = new History(60, 1);
  const head = h('div', { class: 'stats-row' });
  const info = h('div');
  const charts = h('div', { class: 'charts' });
  const publishers = h('div', { id: 'stream-publishers' });
  const consumers = h('div', { id: 'stream-consumers' });
  const offsets = h('div', { id: 'stream-offsets' });
  const producers = h('div', { id: 'stream-producers' });

  const el = h('div', { id: 'page-stream' },
    h('div', { class: 'page-head' }, h('h1', null, 'Stream ', h('span', { class: 'obj-name', id: 'stream-name' }, name)), h('span', { class: 'muted' }, 'in virtual host ', vhost)),
    head,
    section('Overview', charts, info),
    section('Consumers', consumers),
    section('Publishers', publishers),
    section('Stored consumer offsets', offsets),
    section('Named producers (deduplication)', producers),
    section('Delete this stream', confirmButton('Delete', `Delete stream ${name} and all its messages?`, async () => {
      await api('DELETE', base);
      notify(`Stream ${name} deleted.`);
      ctx.go('/queues');
    })));

  async function refresh(pre) {
    const [q, pubs, cons, offs, prods] = await Promise.all([
      pre || get(base),
      get(`/stream/publishers/${enc(vhost)}/${enc(name)}`),
      get(`/stream/consumers/${enc(vhost)}`),
      get(`/stream/offsets/${enc(vhost)}/${enc(name)}`),
      get(`/stream/producers/${enc(vhost)}/${enc(name)}`),
    ]);
    const s = q.stream || {};
    const mine = cons.filter((c) => c.queue.name === name);
    const now = Date.now();
    const seen = new Set();
    for (const c of mine) {
      const ref = (c.properties || {}).name;
      const k = ref ? `${ref} (${c.connection_details.name} #${c.subscription_id})` : `${c.connection_details.name} #${c.subscription_id}`;
      seen.add(k);
      lag.add(k, c.offset_lag, now);
    }
    lag.keep(seen);
    size.add('Messages', q.messages, now);
    const [ret, segMax] = retention(q);
    fill(head,
      stat('Messages', fmtNum(q.messages), 'stream-messages'),
      stat('First offset', s.first_offset ?? none, 'stream-first'),
      stat('Last offset', s.last_offset ?? none, 'stream-last'),
      stat('Committed offset', s.committed_offset ?? none, 'stream-committed'),
      stat('Segments', fmtNum(s.segments), 'stream-segments'),
      stat('Size on disk', fmtBytes(s.size_bytes), 'stream-size'),
      stat('Incoming', fmtRate((q.message_stats || {}).publish_details)));
    fill(charts,
      lineChart(lag.list(), { title: 'Consumer offset lag (since this page opened)', id: 'lag-chart' }),
      lineChart(size.list(), { title: 'Messages in the stream (since this page opened)' }));
    fill(info, facts([
      ['Retention', h('span', { id: 'stream-retention' }, ret)],
      ['Max segment size', segMax],
      ['Next offset', fmtNum(s.next_offset)],
      ['First message at', s.first_timestamp ? fmtTime(s.first_timestamp) : none],
      ['Duplicates dropped', fmtNum(s.duplicates)],
      ['Arguments', fmtArgs(q.arguments) || none],
      ['Policy', q.policy || none],
      ['Leader', q.leader || q.node],
    ]));
    fill(consumers, table([
      { title: 'Connection', render: (c) => link(route('connections', c.connection_details.name), c.connection_details.name) },
      { title: 'Subscription', render: (c) => c.subscription_id, cls: 'num' },
      { title: 'Reference', render: (c) => (c.properties || {}).name || '' },
      { title: 'Offset', render: (c) => fmtNum(c.offset), cls: 'num' },
      { title: 'Offset lag', render: (c) => fmtNum(c.offset_lag), cls: 'num lag' },
      { title: 'Consumed', render: (c) => fmtNum(c.consumed), cls: 'num' },
      { title: 'Credits', render: (c) => fmtNum(c.credits), cls: 'num' },
      { title: 'Active', render: (c) => (c.active ? 'yes' : 'no') },
    ], mine, { empty: 'No consumers.' }));
    fill(publishers, table([
      { title: 'Connection', render: (p) => link(route('connections', p.connection_details.name), p.connection_details.name) },
      { title: 'Publisher', render: (p) => p.publisher_id, cls: 'num' },
      { title: 'Reference', render: (p) => p.reference || '' },
      { title: 'Published', render: (p) => fmtNum(p.published), cls: 'num' },
      { title: 'Confirmed', render: (p) => fmtNum(p.confirmed), cls: 'num' },
      { title: 'Errored', render: (p) => fmtNum(p.errored), cls: 'num' },
    ], pubs, { empty: 'No publishers.' }));
    fill(offsets, table([
      { title: 'Reference', render: (o) => o.reference },
      { title: 'Offset', render: (o) => fmtNum(o.offset), cls: 'num' },
      { title: 'Lag', render: (o) => fmtNum(o.lag), cls: 'num' },
    ], offs, { empty: 'No stored offsets.' }));
    fill(producers, table([
      { title: 'Reference', render: (p) => p.reference },
      { title: 'Last publishing id', render: (p) => fmtNum(p.last_publishing_id), cls: 'num' },
      { title: 'Duplicates', render: (p) => fmtNum(p.duplicates), cls: 'num' },
    ], prods, { empty: 'No named producers.' }));
  }
  return { el, refresh };
}

const reEscape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function superStreamsPage(ctx) {
  const list = h('div', { id: 'superstreams-list' });
  const f = form('grid', async (v) => {
    if (!v.name) throw new Error('A super stream needs a name.');
    const body = {};
    if (v.keys.trim()) body.binding_keys = v.keys; else body.partitions = Number(v.partitions) || 1;
    const args = {};
    if (v.max_age) args['max-age'] = v.max_age;
    if (v.max_bytes) args['max-length-bytes'] = Number(v.max_bytes);
    body.arguments = args;
    await api('PUT', `/stream/super-streams/${enc(v.vhost)}/${enc(v.name)}`, { body });
    notify(`Super stream ${v.name} added.`);
    f.reset();
    ctx.refreshNow();
  },
  field('Virtual host', select('vhost', ctx.vhosts, ctx.vhost || ctx.vhosts[0])),
  field('Name', input('name', { id: 'add-superstream-name' })),
  field('Partitions', input('partitions', { type: 'number', min: 1, value: 3 })),
  field('Binding keys', input('keys', { placeholder: 'amer, emea, apac' }), 'instead of a number of partitions'),
  field('Max age', input('max_age', { placeholder: '7D' })),
  field('Max length bytes', input('max_bytes', { type: 'number', min: 0 })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'add-superstream' }, 'Add super stream')));

  const el = h('div', { class: 'page', id: 'page-superstreams' },
    h('div', { class: 'page-head' }, h('h1', null, 'Super Streams'),
      h('nav', { class: 'subtabs' }, h('a', { href: '#/queues' }, 'Queues and streams'), h('a', { href: '#/superstreams', class: 'current' }, 'Super streams'))),
    section('Super streams and their partitions', list),
    h('details', { class: 'panel' }, h('summary', null, 'Add a super stream'), f));

  async function refresh() {
    const v = ctx.vhost;
    const supers = await get(v ? `/stream/super-streams/${enc(v)}` : '/stream/super-streams');
    // One request per virtual host for the partitions' counts, by a
    // regular expression over their names (bounded by a page of 500).
    const byVHost = new Map();
    for (const s of supers) for (const p of s.partitions) {
      if (!byVHost.has(s.vhost)) byVHost.set(s.vhost, []);
      byVHost.get(s.vhost).push(p);
    }
    const counts = new Map();
    await Promise.all([...byVHost].map(async ([vh, parts]) => {
      const res = await get(`/queues/${enc(vh)}` + query({
        page: 1, page_size: 500, use_regex: 'true', name: `^(${parts.slice(0, 500).map(reEscape).join('|')})$`,
        columns: 'name,messages,stream.size_bytes,message_stats.publish_details.rate',
      }));
      for (const q of res.items) counts.set(vh + '\u0000' + q.name, q);
    }));
    fill(list, supers.length ? supers.map((s) => h('div', { class: 'superstream', dataset: { name: s.name } },
      h('h3', null, s.name, ctx.vhost ? null : h('span', { class: 'muted' }, ` in ${s.vhost}`), ' ',
        confirmButton('Delete', `Delete super stream ${s.name} and its ${s.partitions.length} partitions?`, async () => {
          await api('DELETE', `/stream/super-streams/${enc(s.vhost)}/${enc(s.name)}`);
          notify(`Super stream ${s.name} deleted.`);
          ctx.refreshNow();
        }, 'small danger')),
      table([
        { title: 'Partition', render: (p) => link(route('queues', s.vhost, p.name), p.name), cls: 'name' },
        { title: 'Binding key', render: (p) => p.key },
        { title: 'Messages', render: (p) => fmtNum((p.q || {}).messages), cls: 'num' },
        { title: 'Size on disk', render: (p) => fmtBytes(((p.q || {}).stream || {}).size_bytes), cls: 'num' },
        { title: 'Incoming', render: (p) => fmtRate(((p.q || {}).message_stats || {}).publish_details), cls: 'num' },
      ], s.partitions.map((p, i) => ({ name: p, key: s.binding_keys[i], q: counts.get(s.vhost + '\u0000' + p) })))))
      : h('p', { class: 'empty' }, 'No super streams.'));
  }
  return { el, refresh };
}
