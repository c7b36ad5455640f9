// Exchanges: the paged list with a form to add one, an exchange's page
// with its binding editor, and the bindings table and publish form the
// queue pages share.

import { api, enc, get } from './client.js';
import {
  confirmButton, facts, field, fill, fmtArgs, form, h, input, link, notify, parseArgs, route, section, select, table,
} from './dom.js';
import { pagedList } from './list.js';

// xname shows an exchange name ("" is the default exchange); xpath is
// its name in API paths.
export const xname = (n) => (n === '' ? '(AMQP default)' : n);
export const xpath = (n) => enc(n === '' ? 'amq.default' : n);

function xlink(vhost, n) {
  return link(route('exchanges', vhost, n === '' ? 'amq.default' : n), xname(n));
}

export function exchangesPage(ctx) {
  const list = pagedList(ctx, {
    id: 'exchanges', noun: 'exchanges', empty: 'No exchanges.',
    columns: 'name,vhost,type,durable,auto_delete,internal,arguments,policy',
    path: (v) => (v ? `/exchanges/${enc(v)}` : '/exchanges'),
    cols: () => [
      { title: 'Virtual host', sort: 'vhost', render: (x) => x.vhost, allOnly: true },
      { title: 'Name', sort: 'name', render: (x) => xlink(x.vhost, x.name), cls: 'name' },
      { title: 'Type', sort: 'type', render: (x) => x.type },
      {
        title: 'Features',
        render: (x) => [x.durable ? h('abbr', { class: 'tag', title: 'durable' }, 'D') : null,
          x.auto_delete ? h('abbr', { class: 'tag', title: 'auto-delete' }, 'AD') : null,
          x.internal ? h('abbr', { class: 'tag', title: 'internal' }, 'I') : null,
          Object.keys(x.arguments || {}).map((k) => h('abbr', { class: 'tag arg', title: `${k}: ${JSON.stringify(x.arguments[k])}` }, k.replace(/^x-/, '')))],
      },
      { title: 'Policy', sort: 'policy', render: (x) => x.policy || '' },
    ],
  });
  const types = ['direct', 'fanout', 'topic', 'headers', 'x-consistent-hash', 'x-modulus-hash', 'x-local-random'];
  const f = form('grid', async (v) => {
    if (!v.name) throw new Error('An exchange needs a name.');
    await api('PUT', `/exchanges/${enc(v.vhost)}/${enc(v.name)}`, {
      body: { type: v.type, durable: v.durable === 'true', auto_delete: v.auto_delete, internal: v.internal, arguments: parseArgs(v.arguments) },
    });
    notify(`Exchange ${v.name} added.`);
    f.reset();
    ctx.refreshNow();
  },
  field('Virtual host', select('vhost', ctx.vhosts, ctx.vhost || ctx.vhosts[0])),
  field('Name', input('name', { id: 'add-exchange-name' })),
  field('Type', select('type', types, 'direct')),
  field('Durability', select('durable', [['true', 'Durable'], ['false', 'Transient']], 'true')),
  field('Auto delete', h('input', { type: 'checkbox', name: 'auto_delete' })),
  field('Internal', h('input', { type: 'checkbox', name: 'internal' })),
  field('Arguments', h('textarea', { name: 'arguments', rows: 2, placeholder: 'alternate-exchange = my-ae' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'add-exchange' }, 'Add exchange')));
  const el = h('div', { class: 'page', id: 'page-exchanges' }, h('div', { class: 'page-head' }, h('h1', null, 'Exchanges')),
    section('All exchanges', list.el),
    h('details', { class: 'panel' }, h('summary', null, 'Add a new exchange'), f));
  return { el, refresh: list.refresh };
}

// bindingsTable lists bindings; dir "from" shows their destinations (an
// exchange's page), "to" their sources (a queue's page).
export function bindingsTable(ctx, binds, dir) {
  const unbind = (b) => {
    if (b.source === '') return h('span', { class: 'muted' }, '(Default exchange binding)');
    const seg = b.destination_type === 'exchange' ? 'e' : 'q';
    return confirmButton('Unbind', `Remove this binding?`, async () => {
      await api('DELETE', `/bindings/${enc(b.vhost)}/e/${xpath(b.source)}/${seg}/${enc(b.destination)}/${enc(b.properties_key)}`);
      notify('Binding removed.');
      ctx.refreshNow();
    }, 'small danger');
  };
  const cols = dir === 'from'
    ? [
      { title: 'To', render: (b) => (b.destination_type === 'exchange' ? [xlink(b.vhost, b.destination), ' (exchange)'] : link(route('queues', b.vhost, b.destination), b.destination)), cls: 'name' },
      { title: 'Routing key', render: (b) => b.routing_key },
      { title: 'Arguments', render: (b) => fmtArgs(b.arguments) },
      { title: '', render: unbind },
    ]
    : [
      { title: 'From', render: (b) => (b.source === '' ? '(AMQP default)' : xlink(b.vhost, b.source)), cls: 'name' },
      { title: 'Routing key', render: (b) => b.routing_key },
      { title: 'Arguments', render: (b) => fmtArgs(b.arguments) },
      { title: '', render: unbind },
    ];
  return table(cols, binds, { empty: 'No bindings.', cls: 'bindings' });
}

// publishForm publishes one message through exchange (routing key fixed
// when key is given).
export function publishForm(ctx, vhost, exchange, key) {
  const f = form('grid', async (v) => {
    const props = { delivery_mode: Number(v.delivery_mode), headers: parseArgs(v.headers) };
    if (v.content_type) props.content_type = v.content_type;
    const res = await api('POST', `/exchanges/${enc(vhost)}/${xpath(exchange)}/publish`, {
      body: { routing_key: key === undefined ? v.routing_key : key, properties: props, payload: v.payload, payload_encoding: v.payload_encoding },
    });
    notify(res.routed ? 'Message published.' : 'Message published, but not routed.', res.routed ? 'ok' : 'error');
    ctx.refreshNow();
  },
  key === undefined ? field('Routing key', input('routing_key', { id: 'publish-routing-key' })) : null,
  field('Delivery mode', select('delivery_mode', [['1', '1 - Non-persistent'], ['2', '2 - Persistent']], '2')),
  field('Headers', h('textarea', { name: 'headers', rows: 2, placeholder: 'key = value' })),
  field('Content type', input('content_type', { placeholder: 'text/plain' })),
  field('Payload encoding', select('payload_encoding', [['string', 'String (default)'], ['base64', 'Base64']], 'string')),
  field('Payload', h('textarea', { name: 'payload', rows: 4, id: 'publish-payload' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'publish' }, 'Publish message')));
  return f;
}

export function exchangePage(ctx, vhost, pathName) {
  const name = pathName === 'amq.default' ? '' : pathName;
  const base = `/exchanges/${enc(vhost)}/${xpath(name)}`;
  const details = h('div');
  const from = h('div', { id: 'bindings-from' });
  const to = h('div', { id: 'bindings-to' });

  const editor = form('grid', async (v) => {
    if (!v.destination) throw new Error('Name the queue or exchange to bind to.');
    const seg = v.destination_type === 'exchange' ? 'e' : 'q';
    await api('POST', `/bindings/${enc(vhost)}/e/${xpath(name)}/${seg}/${enc(v.destination)}`, {
      body: { routing_key: v.routing_key, arguments: parseArgs(v.arguments) },
    });
    notify(`Bound ${v.destination} to ${xname(name)}.`);
    editor.reset();
    ctx.refreshNow();
  },
  field('To', select('destination_type', [['queue', 'Queue or stream'], ['exchange', 'Exchange']], 'queue')),
  field('Name', input('destination', { id: 'bind-destination' })),
  field('Routing key', input('routing_key', { id: 'bind-routing-key' })),
  field('Arguments', h('textarea', { name: 'arguments', rows: 2, placeholder: 'x-match = any' }), 'key = value, one per line (headers exchanges)'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'bind' }, 'Bind')));

  const isDefault = name === '';
  const el = h('div', { class: 'page', id: 'page-exchange' },
    h('div', { class: 'page-head' }, h('h1', null, 'Exchange ', h('span', { class: 'obj-name', id: 'exchange-name' }, xname(name))), h('span', { class: 'muted' }, 'in virtual host ', vhost)),
    section('Details', details),
    section('Bindings from this exchange', from, isDefault ? h('p', { class: 'muted' }, 'The default exchange is bound to every queue by its name; it takes no other bindings.') : h('div', { class: 'subform', id: 'binding-editor' }, h('h3', null, 'Add binding from this exchange'), editor)),
    section('Bindings to this exchange', to),
    section('Publish message', publishForm(ctx, vhost, name)),
    isDefault || name.startsWith('amq.') ? null : section('Delete this exchange', confirmButton('Delete', `Delete exchange ${name}?`, async () => {
      await api('DELETE', base);
      notify(`Exchange ${name} deleted.`);
      ctx.go('/exchanges');
    })));

  async function refresh() {
    const [x, src, dst] = await Promise.all([get(base), isDefault ? [] : get(base + '/bindings/source'), get(base + '/bindings/destination')]);
    fill(details, facts([
      ['Type', x.type], ['Features', [x.durable ? 'durable' : 'transient', x.auto_delete ? ', auto-delete' : '', x.internal ? ', internal' : ''].join('')],
      ['Arguments', fmtArgs(x.arguments) || '\u2013'], ['Policy', x.policy || '\u2013'],
    ]));
    fill(from, bindingsTable(ctx, src, 'from'));
    fill(to, bindingsTable(ctx, dst, 'to'));
  }
  return { el, refresh };
}
