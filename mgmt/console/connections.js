// Connections (list, a connection's page with its channels, AMQP 1.0
// sessions and links, or stream publishers and consumers, closing it
// with a reason) and channels.

import { api, enc, get } from './client.js';
import { facts, field, fill, fmtArgs, fmtBytes, fmtNum, fmtTime, form, h, input, link, notify, route, section, table } from './dom.js';
import { pagedList } from './list.js';

const peer = (c) => `${c.peer_host}:${c.peer_port}`;

export function connectionsPage(ctx) {
  const list = pagedList(ctx, {
    id: 'connections', noun: 'connections', empty: 'No connections.',
    path: (v) => (v ? `/vhosts/${enc(v)}/connections` : '/connections'),
    columns: 'name,user_provided_name,protocol,user,vhost,state,channels,subscriptions,peer_host,peer_port,recv_oct,send_oct,connected_at,timeout',
    cols: () => [
      { title: 'Virtual host', sort: 'vhost', render: (c) => c.vhost, allOnly: true },
      { title: 'Name', sort: 'name', render: (c) => link(route('connections', c.name), c.name), cls: 'name' },
      { title: 'Client name', sort: 'user_provided_name', render: (c) => c.user_provided_name || '' },
      { title: 'User', sort: 'user', render: (c) => c.user },
      { title: 'Protocol', sort: 'protocol', render: (c) => c.protocol },
      { title: 'State', sort: 'state', render: (c) => h('span', { class: 'state ' + c.state }, c.state) },
      { title: 'Channels', sort: 'channels', render: (c) => (c.subscriptions !== undefined ? `${fmtNum(c.subscriptions)} subs.` : fmtNum(c.channels)), cls: 'num' },
      { title: 'From client', sort: 'recv_oct', render: (c) => fmtBytes(c.recv_oct), cls: 'num' },
      { title: 'To client', sort: 'send_oct', render: (c) => fmtBytes(c.send_oct), cls: 'num' },
      { title: 'Connected at', sort: 'connected_at', render: (c) => fmtTime(c.connected_at) },
    ],
  });
  const el = h('div', { class: 'page', id: 'page-connections' }, h('div', { class: 'page-head' }, h('h1', null, 'Connections')),
    section('All connections', list.el));
  return { el, refresh: list.refresh };
}

export function connectionPage(ctx, name) {
  const base = `/connections/${enc(name)}`;
  const details = h('div');
  const client = h('div');
  const children = h('div', { id: 'connection-children' });
  const childTitle = h('h2', { id: 'connection-children-title' }, 'Channels');
  let closed = false;
  const closeNote = h('p', { class: 'muted' });
  const closeForm = form('inline', async (v) => {
    await api('DELETE', base, { headers: { 'X-Reason': v.reason || 'Closed via management plugin' } });
    closed = true;
    notify(`Connection ${name} closed.`);
    ctx.go('/connections');
  },
  field('Reason', input('reason', { id: 'close-reason', value: 'Closed via management plugin', size: 40 })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger', id: 'close-connection' }, 'Force close')));

  const el = h('div', { class: 'page', id: 'page-connection' },
    h('div', { class: 'page-head' }, h('h1', null, 'Connection ', h('span', { class: 'obj-name', id: 'connection-name' }, name))),
    section('Details', details),
    h('section', { class: 'panel' }, childTitle, children),
    section('Client properties', client),
    section('Close this connection', closeNote, closeForm));

  async function refresh() {
    if (closed) return;
    const c = await get(base);
    fill(details, facts([
      c.user_provided_name ? ['Client-provided name', c.user_provided_name] : null,
      ['Virtual host', c.vhost], ['User', c.user], ['Protocol', c.protocol], ['State', c.state],
      ['Client', peer(c)], ['Server', `${c.host}:${c.port}`], ['Authentication', c.auth_mechanism], ['TLS', c.ssl ? 'yes' : 'no'],
      ['Heartbeat', `${c.timeout} s`], ['Frame max', fmtNum(c.frame_max)], ['Channel max', fmtNum(c.channel_max)],
      ['From client', `${fmtBytes(c.recv_oct)} in ${fmtNum(c.recv_cnt)} frames`], ['To client', `${fmtBytes(c.send_oct)} in ${fmtNum(c.send_cnt)} frames`],
      ['Connected at', fmtTime(c.connected_at)],
    ]));
    fill(client, facts(Object.entries(c.client_properties || {}).map(([k, v]) => [k, typeof v === 'object' ? fmtArgs(v) : String(v)])));
    fill(closeNote, c.protocol === 'stream'
      ? 'The socket is closed; as with RabbitMQ, a stream client is not sent the reason (the broker logs it).'
      : c.protocol === AMQP10
        ? 'The client is told the reason: a close frame with the error amqp:internal-error, described as Connection forced: "reason".'
        : 'The client is told the reason: connection.close with code 320 (CONNECTION_FORCED).');
    if (c.protocol === 'stream') {
      fill(childTitle, 'Publishers and consumers');
      const v = enc(c.vhost);
      const [pubs, cons] = await Promise.all([get(`/stream/connections/${v}/${enc(name)}/publishers`), get(`/stream/connections/${v}/${enc(name)}/consumers`)]);
      fill(children,
        h('h3', null, 'Publishers'),
        table([
          { title: 'Stream', render: (p) => link(route('queues', p.queue.vhost, p.queue.name), p.queue.name) },
          { title: 'Publisher', render: (p) => p.publisher_id, cls: 'num' },
          { title: 'Reference', render: (p) => p.reference || '' },
          { title: 'Published', render: (p) => fmtNum(p.published), cls: 'num' },
          { title: 'Confirmed', render: (p) => fmtNum(p.confirmed), cls: 'num' },
        ], pubs, { empty: 'No publishers.' }),
        h('h3', null, 'Consumers'),
        table([
          { title: 'Stream', render: (s) => link(route('queues', s.queue.vhost, s.queue.name), s.queue.name) },
          { title: 'Subscription', render: (s) => s.subscription_id, cls: 'num' },
          { title: 'Offset', render: (s) => fmtNum(s.offset), cls: 'num' },
          { title: 'Offset lag', render: (s) => fmtNum(s.offset_lag), cls: 'num' },
          { title: 'Consumed', render: (s) => fmtNum(s.consumed), cls: 'num' },
        ], cons, { empty: 'No consumers.' }));
    } else if (c.protocol === AMQP10) {
      // As RabbitMQ 4.x's connection page: sessions instead of channels.
      const sessions = await get(base + '/sessions');
      fill(childTitle, `Sessions (${sessions.length})`);
      fill(children, sessionsTable(sessions, c.vhost));
    } else {
      fill(childTitle, 'Channels');
      fill(children, channelTable(await get(base + '/channels')));
    }
  }
  return { el, refresh };
}

// AMQP10 is an AMQP 1.0 connection's protocol in the API.
const AMQP10 = 'AMQP 1-0';

const yesNo = (b) => (b ? '\u25cf' : '\u25cb');

// zero marks a window or credit of 0, as RabbitMQ's page does: the peer
// cannot send on it until it is raised.
const zero = (v) => (v === 0 ? h('span', { class: 'zero', title: '0: nothing can be sent until it is raised' }, '0') : fmtNum(v));

// address shows a link's address; the management node's is greyed.
const address = (a) => (a === '/management' ? h('span', { class: 'muted' }, a) : a || h('span', { class: 'muted', title: 'the null address' }, '\u2013'));

// filters shows an outgoing link's filters by name, each with its
// descriptor and value in the tooltip.
const filters = (fs) => (fs || []).map((f) => h('abbr', { class: 'tag', title: `(descriptor: ${f.descriptor}) ${filterValue(f.value)}` }, f.name));

// filterValue writes a filter's value as RabbitMQ's page does: a map
// (the API's list of key and value) as {k=v, ...}, a list as [a, b].
function filterValue(v) {
  if (Array.isArray(v)) {
    if (v.length && v[0] && v[0].key !== undefined) return '{' + v.map((kv) => `${kv.key}=${filterValue(kv.value)}`).join(', ') + '}';
    return '[' + v.map(filterValue).join(', ') + ']';
  }
  return v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v);
}

// sessionsTable lists an AMQP 1.0 connection's sessions with RabbitMQ
// 4.x's columns, each followed by its incoming links (the client's
// senders) and outgoing links (its receivers).
function sessionsTable(sessions, vhost) {
  if (!sessions.length) return h('p', { class: 'empty' }, 'No sessions.');
  const cols = [
    ['Channel', 'channel_number', fmtNum, 'The session\u2019s channel on the connection'],
    ['handle-max', 'handle_max', fmtNum], ['next-incoming-id', 'next_incoming_id', fmtNum], ['incoming-window', 'incoming_window', zero],
    ['next-outgoing-id', 'next_outgoing_id', fmtNum], ['remote-incoming-window', 'remote_incoming_window', zero],
    ['remote-outgoing-window', 'remote_outgoing_window', fmtNum],
    ['Outgoing unsettled', 'outgoing_unsettled_deliveries', fmtNum, 'Deliveries sent to the client that it has not settled yet'],
  ];
  const rows = [];
  for (const s of sessions) {
    rows.push(h('tr', { class: 'session' }, cols.map(([, k, f]) => h('td', { class: 'num ' + k.replace(/_/g, '-') }, f(s[k])))));
    const inl = s.incoming_links || [];
    const outl = s.outgoing_links || [];
    if (!inl.length && !outl.length) continue;
    rows.push(h('tr', { class: 'links' }, h('td', { colspan: cols.length },
      inl.length ? [h('h4', null, `Incoming links (${inl.length})`, h('span', { class: 'muted' }, ' \u2013 the client sends')), table([
        { title: 'Handle', render: (l) => fmtNum(l.handle), cls: 'num' },
        { title: 'Link name', render: (l) => l.link_name, cls: 'name link-name' },
        { title: 'Target address', render: (l) => address(l.target_address), cls: 'address' },
        { title: 'snd-settle-mode', render: (l) => l.snd_settle_mode },
        { title: 'max-message-size', render: (l) => fmtBytes(l.max_message_size), cls: 'num' },
        { title: 'delivery-count', render: (l) => fmtNum(l.delivery_count), cls: 'num delivery-count' },
        { title: 'link-credit', render: (l) => zero(l.credit), cls: 'num credit' },
        { title: 'Unconfirmed', render: (l) => fmtNum(l.unconfirmed_messages), cls: 'num unconfirmed' },
      ], inl, { cls: 'incoming-links' })] : null,
      outl.length ? [h('h4', null, `Outgoing links (${outl.length})`, h('span', { class: 'muted' }, ' \u2013 the client receives')), table([
        { title: 'Handle', render: (l) => fmtNum(l.handle), cls: 'num' },
        { title: 'Link name', render: (l) => l.link_name, cls: 'name link-name' },
        { title: 'Source address', render: (l) => address(l.source_address), cls: 'address' },
        { title: 'Source queue', render: (l) => (l.queue_name ? link(route('queues', vhost, l.queue_name), l.queue_name) : ''), cls: 'queue' },
        { title: 'Sender settles', render: (l) => yesNo(l.send_settled) },
        { title: 'max-message-size', render: (l) => (l.max_message_size ? fmtBytes(l.max_message_size) : 'no limit'), cls: 'num' },
        { title: 'delivery-count', render: (l) => fmtNum(l.delivery_count), cls: 'num delivery-count' },
        { title: 'link-credit', render: (l) => fmtNum(l.credit), cls: 'num credit' },
        { title: 'Filters', render: (l) => filters(l.filter) },
      ], outl, { cls: 'outgoing-links' })] : null)));
  }
  return h('table', { class: 'list sessions', id: 'sessions' },
    h('thead', null, h('tr', null, cols.map(([t, k, , tip]) => h('th', { class: 'num', title: tip }, t)))),
    h('tbody', null, rows));
}

function mode(ch) {
  return [ch.confirm ? h('abbr', { class: 'tag', title: 'confirm' }, 'C') : null, ch.transactional ? h('abbr', { class: 'tag', title: 'transactional' }, 'T') : null];
}

// channelTable lists a connection's channels.
function channelTable(items) {
  return table([
    { title: 'Channel', sort: 'name', render: (c) => c.name, cls: 'name' },
    { title: 'User', sort: 'user', render: (c) => c.user },
    { title: 'Mode', render: mode },
    { title: 'State', sort: 'state', render: (c) => c.state },
    { title: 'Prefetch', sort: 'prefetch_count', render: (c) => fmtNum(c.prefetch_count), cls: 'num' },
    { title: 'Unacked', sort: 'messages_unacknowledged', render: (c) => fmtNum(c.messages_unacknowledged), cls: 'num' },
    { title: 'Unconfirmed', sort: 'messages_unconfirmed', render: (c) => fmtNum(c.messages_unconfirmed), cls: 'num' },
    { title: 'Consumers', sort: 'consumer_count', render: (c) => fmtNum(c.consumer_count), cls: 'num' },
  ], items, { empty: 'No channels.' });
}

export function channelsPage(ctx) {
  const list = pagedList(ctx, {
    id: 'channels', noun: 'channels', empty: 'No channels.',
    path: (v) => (v ? `/vhosts/${enc(v)}/channels` : '/channels'),
    cols: () => [
      { title: 'Channel', sort: 'name', render: (c) => link(route('connections', c.connection_details.name), c.name), cls: 'name' },
      { title: 'Virtual host', sort: 'vhost', render: (c) => c.vhost, allOnly: true },
      { title: 'User', sort: 'user', render: (c) => c.user },
      { title: 'Mode', render: mode },
      { title: 'State', sort: 'state', render: (c) => c.state },
      { title: 'Prefetch', sort: 'prefetch_count', render: (c) => fmtNum(c.prefetch_count), cls: 'num' },
      { title: 'Unacked', sort: 'messages_unacknowledged', render: (c) => fmtNum(c.messages_unacknowledged), cls: 'num' },
      { title: 'Unconfirmed', sort: 'messages_unconfirmed', render: (c) => fmtNum(c.messages_unconfirmed), cls: 'num' },
      { title: 'Consumers', sort: 'consumer_count', render: (c) => fmtNum(c.consumer_count), cls: 'num' },
    ],
  });
  const el = h('div', { class: 'page', id: 'page-channels' }, h('div', { class: 'page-head' }, h('h1', null, 'Channels')), section('All channels', list.el));
  return { el, refresh: list.refresh };
}
