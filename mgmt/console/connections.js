// Connections (list, a connection's page with its channels or stream
// publishers and consumers, closing it with a reason) and channels.

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
    } else {
      fill(childTitle, 'Channels');
      fill(children, channelTable(await get(base + '/channels')));
    }
  }
  return { el, refresh };
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
