// A small hand-written SVG line chart, and the helpers that turn the
// API's samples into series.

import { h } from './dom.js';

const W = 640, H = 200, PAD = { l: 52, r: 12, t: 10, b: 24 };

export const COLORS = ['#2f7ed8', '#e4572e', '#17a673', '#f2a007', '#8e44ad', '#16a2b8', '#7f8c8d', '#c0392b'];

// niceStep returns a round step giving about n ticks up to max.
function niceStep(max, n) {
  const raw = max / n;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function shortNum(v) {
  if (v >= 1e9) return (v / 1e9).toFixed(v % 1e9 ? 1 : 0) + 'G';
  if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
  if (v >= 1e4) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
  return String(Math.round(v * 100) / 100);
}

function clock(ms) {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((x) => String(x).padStart(2, '0')).join(':');
}

// lineChart draws series [{name, points: [[ms, value], ...] oldest first}]
// over the last spanMs milliseconds (by default from the oldest point,
// at least a minute and at most five); unit is appended to the legend's
// latest values.
export function lineChart(series, { title, unit = '', spanMs, id } = {}) {
  const now = Date.now();
  if (!spanMs) {
    let first = now;
    for (const s of series) if (s.points.length) first = Math.min(first, s.points[0][0]);
    spanMs = Math.min(5 * 60 * 1000, Math.max(60 * 1000, now - first));
  }
  const x0 = now - spanMs;
  let max = 0;
  for (const s of series) for (const [, v] of s.points) max = Math.max(max, v);
  const step = max > 0 ? niceStep(max, 4) : 1;
  const top = max > 0 ? Math.ceil(max / step) * step : 4;
  const sx = (t) => PAD.l + ((t - x0) / spanMs) * (W - PAD.l - PAD.r);
  const sy = (v) => H - PAD.b - (v / top) * (H - PAD.t - PAD.b);

  const grid = [];
  for (let v = 0; v <= top + 1e-9; v += (top > 0 && max > 0 ? step : 1)) {
    grid.push(h('svg:line', { x1: PAD.l, x2: W - PAD.r, y1: sy(v), y2: sy(v), class: 'grid' }));
    grid.push(h('svg:text', { x: PAD.l - 6, y: sy(v) + 4, 'text-anchor': 'end', class: 'tick' }, shortNum(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = x0 + (spanMs * i) / 4;
    grid.push(h('svg:text', { x: sx(t), y: H - 6, 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle', class: 'tick' }, clock(t)));
  }
  const lines = series.map((s, i) => {
    const pts = s.points.filter(([t]) => t >= x0 - 1);
    const color = s.color || COLORS[i % COLORS.length];
    if (pts.length === 1) return h('svg:circle', { cx: sx(pts[0][0]), cy: sy(pts[0][1]), r: 2.5, fill: color });
    const d = pts.map(([t, v], j) => `${j ? 'L' : 'M'}${sx(t).toFixed(1)},${sy(v).toFixed(1)}`).join('');
    return d ? h('svg:path', { d, fill: 'none', stroke: color, 'stroke-width': 2, 'stroke-linejoin': 'round' }) : null;
  });
  const empty = series.every((s) => s.points.length === 0)
    ? h('svg:text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'nodata' }, 'Collecting data\u2026') : null;
  const svg = h('svg:svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': title || 'chart' },
    h('svg:line', { x1: PAD.l, x2: PAD.l, y1: PAD.t, y2: H - PAD.b, class: 'axis' }),
    grid, lines, empty);
  const legend = h('ul', { class: 'legend' }, series.map((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    return h('li', { dataset: { series: s.name } },
      h('span', { class: 'swatch', style: { background: s.color || COLORS[i % COLORS.length] } }),
      s.name, h('span', { class: 'legend-value' }, last === null ? '' : `${shortNum(last)}${unit}`));
  }));
  return h('figure', { class: 'chart', id }, title ? h('figcaption', null, title) : null, svg, legend);
}

// samplePoints turns RabbitMQ samples ([{sample, timestamp}], newest
// first) into points oldest first.
export function samplePoints(details) {
  const s = (details && details.samples) || [];
  return s.map((x) => [x.timestamp, x.sample]).reverse();
}

// ratePoints turns cumulative samples into per-second rates between
// consecutive samples (negative steps, a counter restart, count as 0).
export function ratePoints(details) {
  const p = samplePoints(details);
  const out = [];
  for (let i = 1; i < p.length; i++) {
    const dt = (p[i][0] - p[i - 1][0]) / 1000;
    if (dt > 0) out.push([p[i][0], Math.max(0, (p[i][1] - p[i - 1][1]) / dt)]);
  }
  return out;
}

// History accumulates values seen at each refresh, for the charts whose
// history the API does not keep (a queue's depth, a consumer's lag):
// at most max points per series and maxSeries series, oldest dropped.
export class History {
  constructor(max = 60, maxSeries = 12) {
    this.max = max;
    this.maxSeries = maxSeries;
    this.series = new Map();
  }

  add(name, value, at = Date.now()) {
    let s = this.series.get(name);
    if (!s) {
      if (this.series.size >= this.maxSeries) this.series.delete(this.series.keys().next().value);
      s = [];
      this.series.set(name, s);
    }
    s.push([at, value]);
    if (s.length > this.max) s.shift();
  }

  // keep drops series not in names.
  keep(names) {
    for (const k of [...this.series.keys()]) if (!names.has(k)) this.series.delete(k);
  }

  list() {
    return [...this.series.entries()].map(([name, points]) => ({ name, points }));
  }
}
