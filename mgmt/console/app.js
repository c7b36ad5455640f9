// The console's shell: log-in, tabs, the hash router and the refresh
// loop. Each page is a function (ctx, args) returning {el, refresh}; the
// loop calls the shown page's refresh every 5 s while the tab is visible,
// never while the previous refresh is still running.

import { api, clearCredentials, credentials, setUnauthorisedHandler, storeCredentials } from './client.js';
import { asking, clearToasts, field, fill, h, input, notify } from './dom.js';
import { overviewPage } from './overview.js';
import { queuePage, queuesPage } from './queues.js';
import { superStreamsPage } from './streams.js';
import { exchangePage, exchangesPage } from './exchanges.js';
import { channelsPage, connectionPage, connectionsPage } from './connections.js';
import { adminPage } from './admin.js';

const REFRESH_MS = 5000;
const VHOST_KEY = 'warren.vhost';

const tabs = [
  ['overview', 'Overview', ''],
  ['connections', 'Connections', 'connections'],
  ['channels', 'Channels', 'channels'],
  ['exchanges', 'Exchanges', 'exchanges'],
  ['queues', 'Queues and Streams', 'queues'],
  ['admin', 'Admin', 'admin'],
];

// routes: the first path segment picks the page; tab is the tab shown
// as current.
const routes = {
  '': { tab: 'overview', page: overviewPage },
  connections: { tab: 'connections', page: (ctx, a) => (a.length ? connectionPage(ctx, a[0]) : connectionsPage(ctx)) },
  channels: { tab: 'channels', page: channelsPage },
  exchanges: { tab: 'exchanges', page: (ctx, a) => (a.length >= 2 ? exchangePage(ctx, a[0], a[1]) : exchangesPage(ctx)) },
  queues: { tab: 'queues', page: (ctx, a) => (a.length >= 2 ? queuePage(ctx, a[0], a[1]) : queuesPage(ctx)) },
  superstreams: { tab: 'queues', page: superStreamsPage },
  admin: { tab: 'admin', page: (ctx, a) => adminPage(ctx, a[0] || 'users') },
};

const root = document.getElementById('root');
const ctx = {
  user: null,
  vhosts: [],
  // vhost is the virtual host the lists show ('' for all).
  get vhost() { return sessionStorage.getItem(VHOST_KEY) || ''; },
  set vhost(v) { sessionStorage.setItem(VHOST_KEY, v); },
  isAdmin: () => ctx.user && ctx.user.tags.includes('administrator'),
  isMonitor: () => ctx.user && (ctx.user.tags.includes('administrator') || ctx.user.tags.includes('monitoring')),
  isPolicymaker: () => ctx.user && (ctx.user.tags.includes('administrator') || ctx.user.tags.includes('policymaker')),
  refreshNow: () => refresh(true),
  go: (r) => { location.hash = '#' + r; },
  loadVHosts: async () => {
    ctx.vhosts = (await api('GET', '/vhosts?columns=name')).map((v) => v.name);
    renderVHostSelect();
  },
};

let current = null; // the page shown: {el, refresh}
let inflight = false;
let again = false;
let timer = null;
let main, status, vhostSelect, nav;

setUnauthorisedHandler(() => {
  clearCredentials();
  showLogin();
  notify('Your credentials were refused: log in again.', 'error');
});

function showLogin(message) {
  stopLoop();
  clearToasts();
  current = null;
  ctx.user = null;
  nav = null; // the shell goes with the login form
  const err = h('p', { class: 'login-error', role: 'alert' }, message || '');
  const user = input('username', { autocomplete: 'username', autofocus: true, id: 'login-user' });
  const pass = input('password', { type: 'password', autocomplete: 'current-password', id: 'login-password' });
  const f = h('form', { class: 'login-form', id: 'login' },
    h('div', { class: 'brand big' }, h('img', { src: '/favicon.svg', alt: '' }), 'Warren'),
    field('Username', user), field('Password', pass),
    h('button', { type: 'submit', class: 'primary' }, 'Log in'), err);
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    storeCredentials(user.value, pass.value);
    try {
      await start();
    } catch (x) {
      clearCredentials();
      fill(err, x.status === 401 ? 'Login failed: wrong username or password, or not a management user.' : x.message);
    }
  });
  fill(root, h('div', { class: 'login' }, f));
  user.focus();
}

async function start() {
  ctx.user = await api('GET', '/whoami', { noLogout: true });
  await ctx.loadVHosts();
  renderShell();
  mount();
  startLoop();
}

function renderShell() {
  vhostSelect = h('select', { id: 'vhost-select', onchange: () => { ctx.vhost = vhostSelect.value; mount(); } });
  renderVHostSelect();
  status = h('span', { class: 'status', id: 'refresh-status' });
  nav = h('nav', { class: 'tabs' }, tabs.map(([id, label, r]) => h('a', { href: '#/' + r, id: 'tab-' + id, dataset: { tab: id } }, label)));
  main = h('main', { id: 'main' });
  fill(root,
    h('header', { class: 'top' },
      h('div', { class: 'brand' }, h('img', { src: '/favicon.svg', alt: '' }), 'Warren'),
      h('div', { class: 'top-right' },
        h('label', { class: 'vhost-pick' }, 'Virtual host ', vhostSelect),
        status,
        h('span', { class: 'who' }, 'User ', h('b', { id: 'whoami' }, ctx.user.name)),
        h('button', { type: 'button', id: 'logout', onclick: () => { clearCredentials(); showLogin(); } }, 'Log out'))),
    nav, main);
}

function renderVHostSelect() {
  if (!vhostSelect) return;
  const v = ctx.vhosts.includes(ctx.vhost) ? ctx.vhost : '';
  fill(vhostSelect, h('option', { value: '' }, 'All'), ctx.vhosts.map((n) => h('option', { value: n, selected: n === v }, n)));
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const segs = raw === '' ? [] : raw.split('/').map((s) => { try { return decodeURIComponent(s); } catch { return s; } });
  return { name: segs[0] || '', args: segs.slice(1) };
}

function mount() {
  // Not before the shell exists: start() sets ctx.user, then awaits the
  // vhosts; a hash change meanwhile waits for start's own mount.
  if (!ctx.user || !nav) return;
  const { name, args } = parseHash();
  const r = routes[name] || routes[''];
  for (const a of nav.querySelectorAll('a')) a.classList.toggle('current', a.dataset.tab === r.tab);
  current = r.page(ctx, args);
  fill(main, current.el);
  window.scrollTo(0, 0);
  refresh(true);
}

// refresh runs the page's refresh; a refresh asked for while one runs
// (forced: after an action or navigation) runs once after it; the timer's
// are dropped.
async function refresh(forced) {
  if (!current || !current.refresh) return;
  if (inflight) {
    if (forced) again = true;
    return;
  }
  if (!forced && asking()) return;
  inflight = true;
  const page = current;
  try {
    await page.refresh();
    if (page === current) {
      fill(status, 'Refreshed ' + new Date().toLocaleTimeString('en-GB'));
      status.classList.remove('stale');
      page.el.querySelector(':scope > .page-error')?.remove();
    }
  } catch (e) {
    if (page === current && ctx.user) {
      fill(status, 'Refresh failed');
      status.classList.add('stale');
      let banner = page.el.querySelector(':scope > .page-error');
      if (!banner) { banner = h('div', { class: 'page-error', role: 'alert' }); page.el.prepend(banner); }
      fill(banner, e.status === 404 ? 'Not found: it may have been deleted.' : `Could not refresh: ${e.message}`);
    }
  } finally {
    inflight = false;
    if (again) { again = false; refresh(false); }
  }
}

function startLoop() {
  stopLoop();
  timer = setInterval(() => { if (document.visibilityState === 'visible') refresh(false); }, REFRESH_MS);
}

function stopLoop() {
  if (timer) clearInterval(timer);
  timer = null;
}

document.addEventListener('visibilitychange', () => { if (document.visibilityState === 'visible') refresh(false); });
window.addEventListener('hashchange', mount);

if (credentials()) {
  start().catch((e) => { clearCredentials(); showLogin(e.status === 401 ? '' : e.message); });
} else {
  showLogin();
}
