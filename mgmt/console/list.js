// pagedList is a list backed by the API's server-side filtering, sorting
// and pagination (page, page_size, name, use_regex, sort, sort_reverse,
// columns): only one page is ever fetched, so it stays quick with
// 10,000 queues. Its state survives navigation within the tab.

import { api, query } from './client.js';
import { fill, fmtNum, h, table } from './dom.js';

const PAGE_SIZES = [20, 50, 100, 500];

export function pagedList(ctx, opts) {
  const key = 'warren.list.' + opts.id;
  const st = Object.assign({ page: 1, pageSize: 50, filter: '', regex: false, sort: opts.sort || 'name', reverse: false },
    JSON.parse(sessionStorage.getItem(key) || '{}'));
  const save = () => sessionStorage.setItem(key, JSON.stringify(st));
  const changed = () => { save(); ctx.refreshNow(); };

  let debounce;
  const filterInput = h('input', {
    type: 'search', id: opts.id + '-filter', placeholder: 'Filter by name', value: st.filter, autocomplete: 'off',
    oninput: () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => { st.filter = filterInput.value; st.page = 1; changed(); }, 250);
    },
  });
  const regex = h('input', { type: 'checkbox', id: opts.id + '-regex', checked: st.regex, onchange: () => { st.regex = regex.checked; st.page = 1; changed(); } });
  const size = h('select', { id: opts.id + '-size', onchange: () => { st.pageSize = Number(size.value); st.page = 1; changed(); } },
    PAGE_SIZES.map((n) => h('option', { value: n, selected: n === st.pageSize }, n)));
  const filterError = h('span', { class: 'filter-error' });
  const summary = h('span', { class: 'summary', id: opts.id + '-summary' });
  const pager = h('span', { class: 'pager' });
  const body = h('div', { class: 'list-body', id: opts.id + '-table' });

  const go = (p) => { st.page = p; changed(); };
  const sortState = {
    get key() { return st.sort; },
    get reverse() { return st.reverse; },
    onSort: (k) => { if (st.sort === k) st.reverse = !st.reverse; else { st.sort = k; st.reverse = false; } st.page = 1; changed(); },
  };

  const el = h('div', { class: 'paged', id: opts.id },
    h('div', { class: 'list-controls' },
      h('label', null, 'Filter ', filterInput), h('label', { class: 'check' }, regex, ' Regex'), filterError,
      h('span', { class: 'spacer' }), summary, pager, h('label', null, 'Page size ', size)),
    body);

  async function refresh() {
    const vhost = ctx.vhost;
    const q = {
      page: st.page, page_size: st.pageSize, name: st.filter, use_regex: st.regex ? 'true' : '',
      sort: st.sort, sort_reverse: st.reverse ? 'true' : '', columns: opts.columns,
    };
    let res;
    try {
      res = await api('GET', opts.path(vhost) + query(q));
      fill(filterError);
    } catch (e) {
      if (e.status === 400 && e.error === 'page_out_of_range' && st.page > 1) { st.page = 1; save(); return refresh(); }
      if (e.status === 400 && st.filter && st.regex) {
        fill(filterError, 'Not a valid regular expression');
        return;
      }
      throw e;
    }
    const from = res.item_count ? (res.page - 1) * res.page_size + 1 : 0;
    fill(summary, res.item_count
      ? `${fmtNum(from)}\u2013${fmtNum(from + res.item_count - 1)} of ${fmtNum(res.filtered_count)} ${opts.noun}` +
        (res.filtered_count !== res.total_count ? ` (filtered from ${fmtNum(res.total_count)})` : '')
      : `No ${opts.noun}` + (res.total_count ? ` match (of ${fmtNum(res.total_count)})` : ''));
    const pageBtn = (label, p, id, title) => h('button', { type: 'button', id: id ? opts.id + '-' + id : null, title, disabled: p < 1 || p > res.page_count || p === res.page, onclick: () => go(p) }, label);
    fill(pager,
      pageBtn('\u00ab', 1, 'first', 'First page'), pageBtn('\u2039', res.page - 1, 'prev', 'Previous page'),
      h('span', { class: 'page-of', id: opts.id + '-page' }, `Page ${res.page} of ${res.page_count}`),
      pageBtn('\u203a', res.page + 1, 'next', 'Next page'), pageBtn('\u00bb', res.page_count, 'last', 'Last page'));
    const cols = opts.cols(ctx).filter((c) => !(c.allOnly && ctx.vhost));
    fill(body, table(cols, res.items, { sortState, empty: opts.empty, cls: opts.id + '-rows' }));
  }

  return { el, refresh };
}
