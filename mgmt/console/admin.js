// Admin: users, virtual hosts, permissions, policies, definitions
// (download and upload).

import { api, enc, get } from './client.js';
import { confirmButton, field, fill, fmtArgs, fmtBytes, fmtNum, form, h, input, notify, section, select, table } from './dom.js';

const SUBPAGES = [
  ['users', 'Users', (ctx) => ctx.isAdmin()],
  ['vhosts', 'Virtual hosts', () => true],
  ['permissions', 'Permissions', (ctx) => ctx.isAdmin()],
  ['policies', 'Policies', () => true],
  ['definitions', 'Definitions', (ctx) => ctx.isAdmin()],
];

export function adminPage(ctx, sub) {
  const allowed = SUBPAGES.filter(([, , ok]) => ok(ctx));
  if (!allowed.some(([id]) => id === sub)) sub = allowed[0][0];
  const page = { users: usersPage, vhosts: vhostsPage, permissions: permissionsPage, policies: policiesPage, definitions: definitionsPage }[sub](ctx);
  const el = h('div', { class: 'page', id: 'page-admin-' + sub },
    h('div', { class: 'page-head' }, h('h1', null, 'Admin'),
      h('nav', { class: 'subtabs' }, allowed.map(([id, label]) => h('a', { href: '#/admin/' + id, id: 'admin-' + id, class: id === sub ? 'current' : null }, label)))),
    page.el);
  return { el, refresh: page.refresh };
}

const yes = (b) => (b ? '\u25cf' : '\u25cb');

function usersPage(ctx) {
  const list = h('div', { id: 'users-list' });
  const f = form('grid', async (v) => {
    if (!v.name) throw new Error('A user needs a name.');
    const body = { tags: v.tags.split(',').map((t) => t.trim()).filter(Boolean).join(',') };
    if (v.password) body.password = v.password;
    await api('PUT', `/users/${enc(v.name)}`, { body });
    notify(`User ${v.name} saved.`);
    f.reset();
    ctx.refreshNow();
  },
  field('Username', input('name', { id: 'add-user-name' })),
  field('Password', input('password', { type: 'password', autocomplete: 'new-password', id: 'add-user-password' }), 'leave empty to keep an existing user\u2019s'),
  field('Tags', input('tags', { id: 'add-user-tags', placeholder: 'administrator, monitoring, policymaker, management' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'add-user' }, 'Add or update user')));
  async function refresh() {
    const [users, perms] = await Promise.all([get('/users'), get('/permissions')]);
    fill(list, table([
      { title: 'Name', render: (u) => u.name, cls: 'name' },
      { title: 'Tags', render: (u) => (u.tags || []).map((t) => h('span', { class: 'tag' }, t)) },
      { title: 'Can access virtual hosts', render: (u) => perms.filter((p) => p.user === u.name).map((p) => p.vhost).join(', ') || h('span', { class: 'muted' }, 'No access') },
      { title: 'Has password', render: (u) => yes(!!u.password_hash) },
      { title: '', render: (u) => (u.name === ctx.user.name ? h('span', { class: 'muted' }, '(you)') : confirmButton('Delete', `Delete user ${u.name}?`, async () => {
        await api('DELETE', `/users/${enc(u.name)}`);
        notify(`User ${u.name} deleted.`);
        ctx.refreshNow();
      }, 'small danger')) },
    ], users, { cls: 'users' }));
  }
  return { el: h('div', null, section('Users', list), section('Add or update a user', f)), refresh };
}

function vhostsPage(ctx) {
  const list = h('div', { id: 'vhosts-list' });
  const f = form('grid', async (v) => {
    if (!v.name) throw new Error('A virtual host needs a name.');
    const body = { description: v.description };
    if (v.default_queue_type) body.default_queue_type = v.default_queue_type;
    await api('PUT', `/vhosts/${enc(v.name)}`, { body });
    notify(`Virtual host ${v.name} added.`);
    f.reset();
    await ctx.loadVHosts();
    ctx.refreshNow();
  },
  field('Name', input('name', { id: 'add-vhost-name' })),
  field('Description', input('description')),
  field('Default queue type', select('default_queue_type', [['', '(classic)'], ['classic', 'Classic'], ['quorum', 'Quorum'], ['stream', 'Stream']], '')),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'add-vhost' }, 'Add virtual host')));
  async function refresh() {
    const vs = await get('/vhosts');
    fill(list, table([
      { title: 'Name', render: (v) => v.name, cls: 'name' },
      { title: 'Description', render: (v) => v.description || '' },
      { title: 'Default queue type', render: (v) => (v.default_queue_type === 'undefined' ? '' : v.default_queue_type) },
      { title: 'Ready', render: (v) => fmtNum(v.messages_ready), cls: 'num' },
      { title: 'Unacked', render: (v) => fmtNum(v.messages_unacknowledged), cls: 'num' },
      { title: 'Total', render: (v) => fmtNum(v.messages), cls: 'num' },
      { title: '', render: (v) => (ctx.isAdmin() ? confirmButton('Delete', `Delete virtual host ${v.name} and everything in it?`, async () => {
        await api('DELETE', `/vhosts/${enc(v.name)}`);
        notify(`Virtual host ${v.name} deleted.`);
        await ctx.loadVHosts();
        ctx.refreshNow();
      }, 'small danger') : '') },
    ], vs, { cls: 'vhosts' }));
  }
  return { el: h('div', null, section('Virtual hosts', list), ctx.isAdmin() ? section('Add a virtual host', f) : null), refresh };
}

function permissionsPage(ctx) {
  const list = h('div', { id: 'permissions-list' });
  const userSel = select('user', []);
  const f = form('grid', async (v) => {
    await api('PUT', `/permissions/${enc(v.vhost)}/${enc(v.user)}`, { body: { configure: v.configure, write: v.write, read: v.read } });
    notify(`Permissions of ${v.user} in ${v.vhost} set.`);
    ctx.refreshNow();
  },
  field('User', userSel),
  field('Virtual host', select('vhost', ctx.vhosts, ctx.vhost || ctx.vhosts[0])),
  field('Configure regexp', input('configure', { value: '.*' })),
  field('Write regexp', input('write', { value: '.*' })),
  field('Read regexp', input('read', { value: '.*' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'set-permission' }, 'Set permission')));
  async function refresh() {
    const [perms, users] = await Promise.all([get('/permissions'), get('/users?columns=name')]);
    const chosen = userSel.value;
    fill(userSel, users.map((u) => h('option', { value: u.name, selected: u.name === chosen }, u.name)));
    fill(list, table([
      { title: 'User', render: (p) => p.user, cls: 'name' },
      { title: 'Virtual host', render: (p) => p.vhost },
      { title: 'Configure', render: (p) => h('code', null, p.configure) },
      { title: 'Write', render: (p) => h('code', null, p.write) },
      { title: 'Read', render: (p) => h('code', null, p.read) },
      { title: '', render: (p) => confirmButton('Clear', `Remove ${p.user}'s permissions in ${p.vhost}?`, async () => {
        await api('DELETE', `/permissions/${enc(p.vhost)}/${enc(p.user)}`);
        notify('Permissions cleared.');
        ctx.refreshNow();
      }, 'small danger') },
    ], perms, { cls: 'permissions' }));
  }
  return { el: h('div', null, section('Permissions', list), section('Set permissions', f)), refresh };
}

function policiesPage(ctx) {
  const list = h('div', { id: 'policies-list' });
  const f = form('grid', async (v) => {
    if (!v.name) throw new Error('A policy needs a name.');
    let def;
    try { def = JSON.parse(v.definition || '{}'); } catch { throw new Error('The definition must be a JSON object, e.g. {"max-length": 1000}.'); }
    await api('PUT', `/policies/${enc(v.vhost)}/${enc(v.name)}`, { body: { pattern: v.pattern, 'apply-to': v.apply_to, priority: Number(v.priority) || 0, definition: def } });
    notify(`Policy ${v.name} set.`);
    f.reset();
    ctx.refreshNow();
  },
  field('Virtual host', select('vhost', ctx.vhosts, ctx.vhost || ctx.vhosts[0])),
  field('Name', input('name', { id: 'add-policy-name' })),
  field('Pattern', input('pattern', { id: 'add-policy-pattern', placeholder: '^orders\\.' })),
  field('Apply to', select('apply_to', [['all', 'Exchanges and queues'], ['queues', 'Queues and streams'], ['classic_queues', 'Classic queues'], ['quorum_queues', 'Quorum queues'], ['streams', 'Streams'], ['exchanges', 'Exchanges']], 'all')),
  field('Priority', input('priority', { type: 'number', value: 0 })),
  field('Definition', h('textarea', { name: 'definition', rows: 3, id: 'add-policy-definition', placeholder: '{"max-length": 10000}' }), 'a JSON object'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'add-policy' }, 'Add or update policy')));
  async function refresh() {
    const ps = await get(ctx.vhost ? `/policies/${enc(ctx.vhost)}` : '/policies');
    fill(list, table([
      { title: 'Virtual host', render: (p) => p.vhost },
      { title: 'Name', render: (p) => p.name, cls: 'name' },
      { title: 'Pattern', render: (p) => h('code', null, p.pattern) },
      { title: 'Apply to', render: (p) => p['apply-to'] },
      { title: 'Definition', render: (p) => fmtArgs(p.definition) },
      { title: 'Priority', render: (p) => p.priority, cls: 'num' },
      { title: '', render: (p) => (ctx.isPolicymaker() ? confirmButton('Delete', `Delete policy ${p.name}?`, async () => {
        await api('DELETE', `/policies/${enc(p.vhost)}/${enc(p.name)}`);
        notify(`Policy ${p.name} deleted.`);
        ctx.refreshNow();
      }, 'small danger') : '') },
    ], ps, { cls: 'policies', empty: 'No policies.' }));
  }
  return { el: h('div', null, section('Policies', list), ctx.isPolicymaker() ? section('Add or update a policy', f) : null), refresh };
}

function definitionsPage(ctx) {
  const summary = h('div', { id: 'definitions-summary' });
  const result = h('p', { id: 'upload-result', class: 'muted' });
  const scope = () => h('select', { name: 'vhost' }, h('option', { value: '' }, 'All (the whole broker)'), ctx.vhosts.map((v) => h('option', { value: v }, v)));
  const down = form('inline', async (v) => {
    const text = await api('GET', v.vhost ? `/definitions/${enc(v.vhost)}` : '/definitions', { text: true });
    const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    const stamp = new Date().toISOString().slice(0, 19).replace(/[-:T]/g, '');
    const a = h('a', { href: url, download: `warren-definitions-${v.vhost ? v.vhost.replace(/[^\w.-]/g, '_') + '-' : ''}${stamp}.json` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    notify(`Definitions downloaded (${fmtBytes(text.length)}).`);
  }, field('Virtual host', scope()), h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'download-definitions' }, 'Download broker definitions')));
  const up = form('inline', async (v) => {
    const file = v.file && v.file[0];
    if (!file) throw new Error('Choose a definitions file first.');
    const text = await file.text();
    try { JSON.parse(text); } catch { throw new Error(`${file.name} is not JSON.`); }
    await api('POST', v.vhost ? `/definitions/${enc(v.vhost)}` : '/definitions', { body: text });
    fill(result, `Imported ${file.name} (${fmtBytes(file.size)}).`);
    notify('Definitions imported.');
    loaded = false;
    await ctx.loadVHosts();
    ctx.refreshNow();
  }, field('Definitions file', h('input', { type: 'file', name: 'file', accept: '.json,application/json', id: 'upload-file' })),
  field('Virtual host', scope()), h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'upload-definitions' }, 'Upload broker definitions')));
  // The export can be large (every queue): it is read when the page
  // opens and after an import, not on every 5 s refresh.
  let loaded = false;
  async function refresh() {
    if (loaded) return;
    const d = await get('/definitions');
    loaded = true;
    const n = (k) => fmtNum((d[k] || []).length);
    fill(summary, table([
      { title: 'Users', render: () => n('users'), cls: 'num' }, { title: 'Virtual hosts', render: () => n('vhosts'), cls: 'num' },
      { title: 'Permissions', render: () => n('permissions'), cls: 'num' }, { title: 'Policies', render: () => n('policies'), cls: 'num' },
      { title: 'Queues', render: () => n('queues'), cls: 'num' }, { title: 'Exchanges', render: () => n('exchanges'), cls: 'num' },
      { title: 'Bindings', render: () => n('bindings'), cls: 'num' },
    ], [d], { cls: 'definitions' }));
  }
  return {
    el: h('div', null,
      section('What the definitions hold now', summary),
      section('Export definitions', h('p', { class: 'muted' }, 'Users (with password hashes), virtual hosts, permissions, policies, queues, exchanges and bindings, as RabbitMQ\u2019s definitions.json.'), down),
      section('Import definitions', h('p', { class: 'muted' }, 'A RabbitMQ or Warren definitions file. It is checked whole first: a file that fails applies nothing.'), up, result)),
    refresh,
  };
}
