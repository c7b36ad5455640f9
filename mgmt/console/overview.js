// Overview: totals, message rates and queued messages over the last
// minutes (the API's msg_rates_age/lengths_age samples), node facts,
// alarms and listeners.

import { get } from './client.js';
import { facts, fill, fmtBytes, fmtDuration, fmtNum, fmtRate, h, section, stat, table } from './dom.js';
import { lineChart, ratePoints, samplePoints } from './chart.js';

const AGE = 300; // seconds of history charted
const INCR = 5;

export function overviewPage(ctx) {
  const totals = h('div', { class: 'stats-row', id: 'overview-totals' });
  const objects = h('div', { class: 'stats-row', id: 'overview-objects' });
  const charts = h('div', { class: 'charts' });
  const node = h('div', { id: 'node-facts' });
  const alarms = h('div', { id: 'alarms' });
  const listeners = h('div', { id: 'listeners' });
  const el = h('div', { class: 'page', id: 'page-overview' },
    h('div', { class: 'page-head' }, h('h1', null, 'Overview')),
    section('Totals', totals, objects),
    section('Recent activity (up to five minutes)', charts),
    h('div', { class: 'two-col' }, section('Node', node, alarms), section('Ports and contexts', listeners)));

  async function refresh() {
    const q = `?lengths_age=${AGE}&lengths_incr=${INCR}&msg_rates_age=${AGE}&msg_rates_incr=${INCR}`;
    const [o, nodes] = await Promise.all([get('/overview' + q), ctx.isMonitor() ? get('/nodes') : Promise.resolve(null)]);
    const qt = o.queue_totals || {};
    const ms = o.message_stats || {};
    const ot = o.object_totals || {};
    fill(totals,
      stat('Ready', fmtNum(qt.messages_ready), 'total-ready'),
      stat('Unacked', fmtNum(qt.messages_unacknowledged), 'total-unacked'),
      stat('Total messages', fmtNum(qt.messages), 'total-messages'),
      stat('Publish', fmtRate(ms.publish_details), 'rate-publish'),
      stat('Deliver / get', fmtRate(ms.deliver_get_details), 'rate-deliver'),
      stat('Ack', fmtRate(ms.ack_details), 'rate-ack'));
    fill(objects,
      stat('Connections', fmtNum(ot.connections), 'count-connections'),
      stat('Channels', fmtNum(ot.channels), 'count-channels'),
      stat('Exchanges', fmtNum(ot.exchanges), 'count-exchanges'),
      stat('Queues and streams', fmtNum(ot.queues), 'count-queues'),
      stat('Consumers', fmtNum(ot.consumers), 'count-consumers'));
    fill(charts,
      lineChart([
        { name: 'Ready', points: samplePoints(qt.messages_ready_details) },
        { name: 'Unacked', points: samplePoints(qt.messages_unacknowledged_details) },
        { name: 'Total', points: samplePoints(qt.messages_details) },
      ], { title: 'Queued messages', id: 'chart-queued' }),
      lineChart([
        { name: 'Publish', points: ratePoints(ms.publish_details) },
        { name: 'Deliver / get', points: ratePoints(ms.deliver_get_details) },
        { name: 'Ack', points: ratePoints(ms.ack_details) },
        { name: 'Redeliver', points: ratePoints(ms.redeliver_details) },
      ], { title: 'Message rates', unit: '/s', id: 'chart-rates' }));
    const n = nodes && nodes[0];
    fill(node, facts([
      ['Node', h('span', { id: 'node-name' }, o.node)],
      ['Cluster', o.cluster_name],
      ['Version', `${o.product_name} ${o.product_version} (RabbitMQ ${o.rabbitmq_version} API)`],
      ['Runtime', o.erlang_full_version],
      n ? ['Uptime', fmtDuration(n.uptime)] : null,
      n ? ['Memory', fmtBytes(n.mem_used)] : null,
      n ? ['File descriptors', `${fmtNum(n.fd_used)}` + (n.fd_total ? ` of ${fmtNum(n.fd_total)}` : '')] : null,
      n && n.disk_free !== undefined ? ['Disk free', fmtBytes(n.disk_free)] : null,
      n ? ['Processors', fmtNum(n.processors)] : null,
      n ? ['Goroutines', fmtNum(n.proc_used)] : null,
    ]));
    const on = n ? [n.mem_alarm ? 'memory' : null, n.disk_free_alarm ? 'disk' : null].filter(Boolean) : [];
    fill(alarms, n
      ? (on.length ? h('p', { class: 'alarm on' }, `Resource alarm: ${on.join(', ')}. Publishers are blocked.`) : h('p', { class: 'alarm off' }, 'No resource alarms (memory, disk).'))
      : h('p', { class: 'muted' }, 'Node facts need the monitoring or administrator tag.'));
    fill(listeners,
      table([
        { title: 'Protocol', render: (l) => l.protocol },
        { title: 'Bound to', render: (l) => l.ip_address },
        { title: 'Port', render: (l) => l.port, cls: 'num' },
      ], o.listeners || [], { empty: 'Listeners are shown to monitoring users.', cls: 'listeners' }),
      (o.contexts || []).length ? h('p', { class: 'muted' }, `Web console and HTTP API on port ${o.contexts[0].port}.`) : null);
  }
  return { el, refresh };
}
