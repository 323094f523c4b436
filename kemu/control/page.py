"""The dashboard page served at ``/`` and ``/dashboard``: plain HTML, CSS and JavaScript, nothing
fetched from elsewhere (the page must work on a machine without internet).

It polls ``GET /state`` (``dashboard.py``) once a second. Each share partition is one canvas as
wide as the window (redrawn when the window is resized): the upper bar runs from the log start
to the high watermark — records below SPSO (done), the in-flight window by record state, and the
backlog [SPEO, high watermark) in stripes — under SPSO/SPEO markers and above an offset axis; the
lower bar enlarges the in-flight window. Hovering shows a record range's state, delivery count,
owner and staging transaction. ``window.kemu.point(key, offset, row)`` gives the canvas point
where an offset is drawn (tests read the screenshot's pixel there).
"""

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kemu dashboard</title>
<style>
  :root { --ink: #1f2933; --muted: #616e7c; --line: #d9e2ec; --card: #fff; }
  * { box-sizing: border-box; }
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
         color: var(--ink); background: #f0f4f8; }
  header.top { display: flex; align-items: center; gap: 12px; flex-wrap: wrap;
               padding: 10px 20px; background: #243b53; color: #f0f4f8; }
  header.top h1 { font-size: 18px; margin: 0; letter-spacing: .5px; }
  header.top a { color: #bcccdc; }
  #status { color: #d9e2ec; }
  .spacer { flex: 1; }
  .pill { display: inline-block; padding: 0 8px; border-radius: 9px; font-size: 12px;
          background: #3e9b58; color: #fff; margin-right: 4px; }
  .pill.down { background: #d64545; } .pill.stopped { background: #829ab1; }
  main { padding: 8px 20px 40px; }
  h2 { font-size: 16px; margin: 22px 0 8px; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
          padding: 10px 14px 8px; margin: 0 0 12px; box-shadow: 0 1px 2px rgba(0,0,0,.04); }
  .card header { display: flex; align-items: baseline; gap: 10px; flex-wrap: wrap;
                 margin-bottom: 4px; }
  .card .title { font-size: 15px; font-weight: 600; }
  .card .group { color: var(--muted); }
  .chip { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
          background: #e6ecf2; color: #334e68; margin-left: 4px; white-space: nowrap; }
  .chip.lag { background: #243b53; color: #fff; font-weight: 600; }
  canvas.strip { display: block; width: 100%; }
  .words { margin: 4px 0 0; color: #334e68; font-size: 13px; }
  .explain { color: #334e68; max-width: 1100px; margin: 0 0 8px; }
  .legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 0 0 12px; font-size: 13px; }
  .legend span { display: inline-flex; align-items: center; gap: 6px; cursor: help; }
  .swatch { display: inline-block; width: 14px; height: 14px; border-radius: 3px;
            border: 1px solid rgba(0,0,0,.15); vertical-align: -2px; }
  table { border-collapse: collapse; background: var(--card); font-size: 13px; }
  td, th { border: 1px solid var(--line); padding: 3px 10px; text-align: left;
           vertical-align: top; }
  th { background: #e6ecf2; font-weight: 600; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .member { white-space: nowrap; } .member code { color: var(--muted); }
  .lagbar { display: inline-block; height: 8px; background: #e0b25c; border-radius: 2px;
            vertical-align: 0; margin-left: 6px; }
  .empty { color: var(--muted); font-style: italic; }
  #rate { display: block; width: 100%; height: 56px; background: var(--card);
          border: 1px solid var(--line); border-radius: 6px; }
  #tip { position: fixed; pointer-events: none; display: none; z-index: 10; max-width: 420px;
         background: #102a43; color: #f0f4f8; padding: 7px 10px; border-radius: 5px;
         font-size: 12.5px; box-shadow: 0 3px 10px rgba(0,0,0,.25); }
  #tip b { color: #fff; } #tip .swatch { border-color: rgba(255,255,255,.5); }
</style>
</head>
<body>
<header class="top"><h1>kemu</h1><span id="status">connecting…</span><span id="brokers"></span>
<span class="spacer"></span><a href="metrics">/metrics</a><a href="state">/state</a>
<a href="openapi.json">/openapi.json</a></header>
<main>
<h2>Share partitions</h2>
<p class="explain">Each bar runs from the log start offset to the <b>high watermark</b> (HWM).
<b>SPSO</b>, the share-partition start offset: every record before it is done (acknowledged,
archived, or skipped). <b>SPEO</b>, the share-partition end offset: the records from SPSO up to
it are <b>in flight</b>, each tracked with its state, delivery count and owner; the records from
SPEO to the high watermark are the <b>backlog</b>, fetched by no consumer yet. <b>Lag</b> = HWM
&minus; SPSO &minus; records already done inside the window, as
<code>kafka-share-groups.sh --describe</code> reports it. The lower bar enlarges the in-flight
window; hover over a bar for details.</p>
<div class="legend" id="legend"></div>
<div id="shares"></div>
<h2>Groups</h2>
<table id="groups"><thead><tr><th>group</th><th>type</th><th>state</th><th>lag</th>
<th>members (client id, member id, host → partitions)</th></tr></thead><tbody></tbody></table>
<h2>Consumer group lag</h2>
<table id="consumer-lag"><thead><tr><th>group</th><th>partition</th><th>committed offset</th>
<th>log end offset</th><th>lag</th></tr></thead><tbody></tbody></table>
<h2>Open transactions</h2>
<table id="transactions"><thead><tr><th>transactional id</th><th>state</th><th>producer</th>
<th>partitions</th><th>pending markers</th><th>staged share records</th></tr></thead><tbody>
</tbody></table>
<h2>Topics</h2>
<table id="topics"><thead><tr><th>topic</th><th>partition</th><th>leader</th><th>log start</th>
<th>LSO</th><th>high watermark</th><th>records</th></tr></thead><tbody></tbody></table>
<h2>Requests per second</h2>
<canvas id="rate"></canvas>
</main>
<div id="tip"></div>
<script>
"use strict";
// canvas geometry, in CSS pixels
const PAD = 1, MARK_Y = 12, BAR_Y = 18, BAR_H = 30, AXIS_H = 18, GAP_H = 24, ZOOM_H = 24;
const ZOOM_Y = BAR_Y + BAR_H + AXIS_H + GAP_H;
const FULL_H = ZOOM_Y + ZOOM_H + AXIS_H, SHORT_H = BAR_Y + BAR_H + AXIS_H;
const FONT = "12px system-ui, -apple-system, 'Segoe UI', sans-serif";
const MEANING = {
  DONE: "below SPSO: done (acknowledged, archived, or skipped)",
  AVAILABLE: "can be acquired by the next fetch",
  ACQUIRED: "delivered to a consumer, locked until it acknowledges or the lock expires",
  TX_PENDING: "acknowledged inside an open transaction (KIP-1289): settled when it ends",
  ACKNOWLEDGED: "processed; SPSO moves past it once the records before it are done",
  ARCHIVING: "being written to the dead-letter queue",
  ARCHIVED: "rejected or out of deliveries: never delivered again",
  BACKLOG: "from SPEO to the high watermark: no consumer has fetched it yet",
};
const rates = [];
const cards = new Map();
let state = null, lastTotal = null, lastTime = null, clients = new Map(), owners = new Map();

const fmt = n => Number(n).toLocaleString("en-US");
function shortId(id, client) {  // a classic member id starts with its client id: skip it
  const rest = client && id.startsWith(client + "-") ? id.slice(client.length + 1) : id || "";
  return rest.length > 10 ? rest.slice(0, 8) + "…" : rest;
}
const range = (a, b) => a === b ? fmt(a) : fmt(a) + "\u2013" + fmt(b);
const plural = (n, word) => fmt(n) + " " + word + (n === 1 ? "" : "s");
function esc(text) {
  return String(text).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
                                                 '"': "&quot;"})[c]);
}
function swatch(colour) { return '<span class="swatch" style="background:' + colour + '"></span>'; }
function colourOf(name) {
  return name === "DONE" ? state.region_colours.DONE : name === "BACKLOG"
    ? state.region_colours.BACKLOG_STRIPE : state.colours[name] || "#000";
}

function bounds(share) {
  const lo = Math.min(share.log_start_offset ?? share.start_offset, share.start_offset);
  const hi = Math.max(share.high_watermark ?? share.end_offset, share.end_offset);
  return [lo, hi];
}

function geometry(share, width) {
  const [lo, hi] = bounds(share), w = width - 2 * PAD;
  const spso = share.start_offset, speo = share.end_offset;
  return {
    lo, hi, w, width, window: speo > spso,
    x: o => PAD + (hi > lo ? (o - lo) / (hi - lo) : 0) * w,
    zx: o => PAD + (speo > spso ? (o - spso) / (speo - spso) : 0) * w,
  };
}

let stripeTile = null;
function backlogPattern(ctx) {
  if (!stripeTile) {  // 45° stripes drawn pixel by pixel, so they stay two exact colours
    stripeTile = document.createElement("canvas");
    stripeTile.width = stripeTile.height = 8;
    const t = stripeTile.getContext("2d");
    for (let y = 0; y < 8; y++) {
      for (let x = 0; x < 8; x++) {
        t.fillStyle = (x + y) % 8 < 3 ? state.region_colours.BACKLOG_STRIPE
          : state.region_colours.BACKLOG;
        t.fillRect(x, y, 1, 1);
      }
    }
  }
  return ctx.createPattern(stripeTile, "repeat");
}

function fillBetween(ctx, x0, x1, y, h, style) {
  const a = Math.round(x0), b = Math.round(x1);
  ctx.fillStyle = style;
  ctx.fillRect(a, y, Math.max(b - a, 1), h);
}

function centred(ctx, text, x0, x1, y, colour) {
  ctx.font = FONT;
  if (ctx.measureText(text).width + 10 > x1 - x0) return;
  ctx.fillStyle = colour; ctx.textAlign = "center"; ctx.textBaseline = "middle";
  ctx.fillText(text, (x0 + x1) / 2, y);
}

function niceTicks(lo, hi, pixels) {
  if (hi <= lo) return [];
  const raw = (hi - lo) / Math.max(1, Math.floor(pixels / 90));
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = Math.max(1, [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw));
  const out = [];
  for (let o = Math.ceil(lo / step) * step; o <= hi; o += step) out.push(o);
  return out;
}

function axis(ctx, lo, hi, x, y, width, first, last) {
  ctx.font = FONT; ctx.textBaseline = "top"; ctx.fillStyle = "#486581";
  ctx.strokeStyle = "#9fb3c8"; ctx.lineWidth = 1;
  const left = first + " " + fmt(lo), right = last + " " + fmt(hi);
  const taken = [[0, ctx.measureText(left).width + 8],
                 [width - ctx.measureText(right).width - 8, width]];
  ctx.textAlign = "left"; ctx.fillText(left, PAD, y + 5);
  ctx.textAlign = "right"; ctx.fillText(right, width - PAD, y + 5);
  for (const o of [lo, ...niceTicks(lo, hi, width), hi]) {
    const px = Math.round(x(o)) + 0.5;
    ctx.beginPath(); ctx.moveTo(px, y); ctx.lineTo(px, y + 4); ctx.stroke();
    if (o === lo || o === hi) continue;
    const label = fmt(o), half = ctx.measureText(label).width / 2 + 6;
    if (taken.some(([a, b]) => px + half > a && px - half < b)) continue;
    taken.push([px - half, px + half]);
    ctx.textAlign = "center"; ctx.fillText(label, px, y + 5);
  }
}

function markers(ctx, g, share) {
  ctx.font = FONT; ctx.textBaseline = "alphabetic"; ctx.fillStyle = "#243b53";
  ctx.strokeStyle = "#243b53"; ctx.lineWidth = 1;
  const spso = share.start_offset, speo = share.end_offset;
  const points = spso === speo ? [[spso, "SPSO = SPEO " + fmt(spso), "center"]]
    : [[spso, "SPSO " + fmt(spso) + " ▸", "right"], [speo, "◂ SPEO " + fmt(speo), "left"]];
  const labels = points.map(([offset, text, align]) => {
    const px = Math.round(g.x(offset)) + 0.5, w = ctx.measureText(text).width;
    ctx.beginPath(); ctx.moveTo(px, MARK_Y - 2); ctx.lineTo(px, BAR_Y); ctx.stroke();
    const start = align === "right" ? px - 4 - w : align === "left" ? px + 4 : px - w / 2;
    return {text, w, start: Math.min(Math.max(start, 0), g.width - w)};
  });
  const [first, second] = labels;
  if (second && second.start < first.start + first.w + 8) {  // close together: push apart
    first.start = Math.max(0, second.start - 8 - first.w);
    second.start = Math.max(second.start, first.start + first.w + 8);
  }
  ctx.textAlign = "left";
  for (const label of labels) ctx.fillText(label.text, label.start, MARK_Y - 3);
}

function drawShare(card) {
  const {canvas, share} = card;
  const width = Math.max(canvas.clientWidth, 50), dpr = window.devicePixelRatio || 1;
  const g = geometry(share, width), height = g.window ? FULL_H : SHORT_H;
  canvas.style.height = height + "px";
  canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, height);
  card.g = g;
  const spso = share.start_offset, speo = share.end_offset, hi = g.hi;
  ctx.fillStyle = "#f7f9fb"; ctx.fillRect(PAD, BAR_Y, g.w, BAR_H);
  if (spso > g.lo) {
    fillBetween(ctx, g.x(g.lo), g.x(spso), BAR_Y, BAR_H, state.region_colours.DONE);
    centred(ctx, "done " + fmt(spso - g.lo), g.x(g.lo), g.x(spso), BAR_Y + BAR_H / 2, "#334e68");
  }
  for (const [first, last, name] of share.spans) {
    fillBetween(ctx, g.x(first), g.x(last + 1), BAR_Y, BAR_H, colourOf(name));
  }
  if (hi > speo) {
    fillBetween(ctx, g.x(speo), g.x(hi), BAR_Y, BAR_H, backlogPattern(ctx));
    centred(ctx, "backlog " + fmt(hi - speo), g.x(speo), g.x(hi), BAR_Y + BAR_H / 2, "#7c5e10");
  }
  if (hi === g.lo) centred(ctx, "no records yet", 0, width, BAR_Y + BAR_H / 2, "#829ab1");
  ctx.strokeStyle = "#9fb3c8"; ctx.lineWidth = 1;
  ctx.strokeRect(PAD - 0.5, BAR_Y - 0.5, g.w + 1, BAR_H + 1);
  if (g.window) {
    const bottom = BAR_Y + BAR_H + 0.5;
    ctx.beginPath();
    ctx.moveTo(g.x(spso), bottom); ctx.lineTo(g.x(speo), bottom);
    ctx.lineTo(PAD + g.w, ZOOM_Y - 1); ctx.lineTo(PAD, ZOOM_Y - 1); ctx.closePath();
    ctx.fillStyle = "rgba(72, 101, 129, 0.08)"; ctx.fill();
    ctx.setLineDash([3, 3]); ctx.strokeStyle = "#9fb3c8"; ctx.stroke(); ctx.setLineDash([]);
  }
  axis(ctx, g.lo, hi, g.x, BAR_Y + BAR_H, width, "log start", "HWM");
  markers(ctx, g, share);
  if (!g.window) return;
  for (const [first, last, name] of share.spans) {
    const x0 = g.zx(Math.max(first, spso)), x1 = g.zx(last + 1);
    fillBetween(ctx, x0, x1, ZOOM_Y, ZOOM_H, colourOf(name));
    if (x1 - x0 >= 6) {
      ctx.fillStyle = "rgba(255,255,255,0.9)"; ctx.fillRect(Math.round(x1) - 1, ZOOM_Y, 1, ZOOM_H);
    }
    const text = name + " " + fmt(last + 1 - Math.max(first, spso));
    centred(ctx, text, x0, x1, ZOOM_Y + ZOOM_H / 2, "#fff");
  }
  ctx.strokeStyle = "#9fb3c8"; ctx.strokeRect(PAD - 0.5, ZOOM_Y - 0.5, g.w + 1, ZOOM_H + 1);
  axis(ctx, spso, speo, g.zx, ZOOM_Y + ZOOM_H, width, "SPSO", "SPEO");
}

function spanAt(share, offset) {
  let low = 0, high = share.spans.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1, span = share.spans[mid];
    if (offset < span[0]) high = mid - 1; else if (offset > span[1]) low = mid + 1;
    else return span;
  }
  return null;
}

function hit(card, mx, my) {
  const {share, g} = card;
  if (!g) return null;
  let offset;
  if (my >= BAR_Y && my < BAR_Y + BAR_H && g.hi > g.lo) {
    offset = Math.floor(g.lo + (mx - PAD) / g.w * (g.hi - g.lo));
  } else if (g.window && my >= ZOOM_Y && my < ZOOM_Y + ZOOM_H) {
    const spso = share.start_offset, speo = share.end_offset;
    offset = Math.floor(spso + (mx - PAD) / g.w * (speo - spso));
  } else return null;
  offset = Math.min(Math.max(offset, g.lo), Math.max(g.hi - 1, g.lo));
  if (offset < share.start_offset) {
    return {name: "DONE", first: g.lo, last: share.start_offset - 1};
  }
  if (offset >= share.end_offset) {
    return {name: "BACKLOG", first: share.end_offset, last: g.hi - 1};
  }
  const span = spanAt(share, offset);
  return span && {name: span[2], first: span[0], last: span[1], span};
}

function describe(card, found) {
  const share = card.share, count = found.last - found.first + 1;
  const lines = ["<b>offsets " + range(found.first, found.last) + "</b> · " +
                 plural(count, "record"),
                 swatch(colourOf(found.name)) + " <b>" + found.name + "</b>: " +
                 MEANING[found.name]];
  if (found.name === "BACKLOG") {
    lines.push("SPEO " + fmt(share.end_offset) + " to the high watermark " +
               fmt(share.high_watermark));
  }
  if (found.span) {
    const [, , , deliveries, member, deadline, staging] = found.span;
    if (deliveries !== undefined) lines.push("delivery count " + deliveries);
    if (member) {
      const client = clients.get(member);
      lines.push("owner: " + esc(client || "member") + " (member " +
                 esc(shortId(member, client)) + ")");
    }
    if (deadline !== null && deadline !== undefined) {
      lines.push("lock expires in " + Math.max(0, (deadline - state.now_ms) / 1000).toFixed(0) +
                 " s");
    }
    if (staging) {
      lines.push("staged in transaction <b>" + esc(staging.transactional_id ?? "?") +
                 "</b> (producer " + staging.producer_id + ", epoch " +
                 staging.producer_epoch + ")");
      lines.push("its commit makes them " + staging.on_commit + ", its abort " +
                 staging.on_abort);
    }
  }
  return lines.join("<br>");
}

function showTip(card, event) {
  const tip = document.getElementById("tip");
  const box = card.canvas.getBoundingClientRect();
  const found = hit(card, event.clientX - box.left, event.clientY - box.top);
  if (!found) { tip.style.display = "none"; return; }
  tip.innerHTML = describe(card, found);
  tip.style.display = "block";
  const left = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const top = event.clientY + 16 + tip.offsetHeight > window.innerHeight
    ? event.clientY - tip.offsetHeight - 10 : event.clientY + 16;
  tip.style.left = left + "px"; tip.style.top = top + "px";
}

function card(key) {
  let found = cards.get(key);
  if (found) return found;
  const element = document.createElement("section");
  element.className = "card share";
  element.innerHTML = '<header><span class="title"></span><span class="group"></span>' +
    '<span class="chips"></span></header><canvas class="strip"></canvas><p class="words"></p>';
  const canvas = element.querySelector("canvas");
  canvas.dataset.key = key;
  found = {element, canvas, share: null, g: null, last: null};
  canvas.addEventListener("mousemove", event => { found.last = event; showTip(found, event); });
  canvas.addEventListener("mouseleave", () => {
    found.last = null; document.getElementById("tip").style.display = "none";
  });
  cards.set(key, found);
  return found;
}

function words(share) {
  const counts = {};
  for (const [first, last, name] of share.spans) {
    counts[name] = (counts[name] || 0) + last + 1 - Math.max(first, share.start_offset);
  }
  const inFlight = share.end_offset - share.start_offset;
  const parts = [];
  const [lo, hi] = bounds(share);
  parts.push(share.start_offset > lo
    ? "Records " + range(lo, share.start_offset - 1) + " are done (SPSO " +
      fmt(share.start_offset) + ")."
    : "Nothing is done yet (SPSO " + fmt(share.start_offset) + ").");
  if (inFlight > 0) {
    parts.push(plural(inFlight, "record") + " in flight, " + range(share.start_offset,
      share.end_offset - 1) + ": " + Object.entries(counts).map(([n, c]) => fmt(c) + " " + n)
      .join(", ") + ".");
  }
  parts.push(hi > share.end_offset
    ? fmt(hi - share.end_offset) + " in the backlog from SPEO " + fmt(share.end_offset) +
      " to the high watermark " + fmt(hi) + "."
    : "No backlog: SPEO " + fmt(share.end_offset) + " is the high watermark.");
  const owned = owners.get(share.group + "/" + share.topic + "/" + share.partition);
  if (owned) parts.push("Assigned to " + owned + ".");  // "client (member…)"
  if ((share.last_stable_offset ?? hi) < hi) {
    parts.push("LSO " + fmt(share.last_stable_offset) + ": the records from it on are in an " +
               "open transaction.");
  }
  return parts.join(" ");
}

function renderShares() {
  const container = document.getElementById("shares");
  const seen = new Set();
  for (const share of state.share_partitions) {
    const key = share.group + "/" + share.topic + "/" + share.partition;
    const found = card(key);
    seen.add(key);
    found.share = share;
    const el = found.element;
    el.querySelector(".title").textContent = share.topic + "-" + share.partition;
    el.querySelector(".group").textContent = "share group " + share.group;
    const chips = [["lag", "lag " + fmt(share.lag ?? 0)],
                   ["", "in flight " + fmt(share.end_offset - share.start_offset)]];
    if (share.backlog !== undefined) chips.push(["", "backlog " + fmt(share.backlog)]);
    el.querySelector(".chips").innerHTML = chips.map(([cls, text]) =>
      '<span class="chip ' + cls + '">' + text + "</span>").join(" ");
    el.querySelector(".words").textContent = words(share);
    if (el.parentNode !== container) container.append(el);
    drawShare(found);
    if (found.last) showTip(found, found.last);
  }
  for (const [key, found] of cards) {
    if (!seen.has(key)) { found.element.remove(); cards.delete(key); }
  }
  if (!state.share_partitions.length) {
    container.innerHTML = '<p class="empty">No share partition is loaded yet: one appears ' +
      "when a share consumer first fetches from it.</p>";
  } else container.querySelector(".empty")?.remove();
}

function fill(id, rows, build, empty) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of rows) build(body.insertRow(), item);
  if (!rows.length) {
    const cell = body.insertRow().insertCell();
    cell.colSpan = 9; cell.className = "empty"; cell.textContent = empty;
  }
}
function cell(row, text, cls) {
  const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; return td;
}

function renderTables() {
  clients = new Map(); owners = new Map();
  for (const group of state.groups) {
    for (const m of group.members) {
      clients.set(m.member_id, m.client_id || "member");
      for (const [topic, index] of m.partitions) {
        const key = group.group + "/" + topic + "/" + index;
        const who = (m.client_id || "member") + " (" + shortId(m.member_id, m.client_id) + ")";
        owners.set(key, owners.has(key) ? owners.get(key) + ", " + who : who);
      }
    }
  }
  fill("groups", state.groups, (row, g) => {
    cell(row, g.group); cell(row, g.type); cell(row, g.state);
    cell(row, g.lag === null || g.lag === undefined ? "\u2013" : fmt(g.lag), "num");
    const td = row.insertCell();
    td.innerHTML = g.members.length ? g.members.map(m =>
      '<div class="member">' + esc(m.client_id || "?") + " <code title=\"" + esc(m.member_id) +
      '">' + esc(shortId(m.member_id, m.client_id)) + "</code> " + esc(m.client_host || "") +
      " → " +
      (m.partitions.length ? esc(m.partitions.map(([t, p]) => t + "-" + p).join(", "))
        : "no partitions") + "</div>").join("") : '<span class="empty">no members</span>';
  }, "No groups yet.");
  const top = Math.max(1, ...state.consumer_lag.map(c => c.lag));
  fill("consumer-lag", state.consumer_lag, (row, c) => {
    cell(row, c.group); cell(row, c.topic + "-" + c.partition);
    cell(row, fmt(c.committed_offset), "num"); cell(row, fmt(c.log_end_offset), "num");
    const td = cell(row, fmt(c.lag), "num");
    const bar = document.createElement("span");
    bar.className = "lagbar"; bar.style.width = Math.round(c.lag / top * 120) + "px";
    td.append(bar);
  }, "No group has committed an offset yet.");
  fill("transactions", state.transactions, (row, t) => {
    cell(row, t.transactional_id); cell(row, t.state);
    cell(row, t.producer_id + " / epoch " + t.producer_epoch);
    cell(row, t.partitions.map(p => p.join("-")).join(", ") || "\u2013");
    cell(row, t.marker_status ? (t.pending_markers.map(p => p.join("-")).join(", ") ||
      "COMPLETE record") + " (" + t.marker_status + ")" : "\u2013");
    const staged = t.staged_share_records;
    const total = staged.reduce((n, s) => n + s.last_offset - s.first_offset + 1, 0);
    cell(row, total ? fmt(total) + " (" + staged.map(s => s.group + " " + s.topic + "-" +
      s.partition + " " + range(s.first_offset, s.last_offset)).join(", ") + ")" : "0");
  }, "No open transaction.");
  const partitions = state.topics.filter(t => !t.internal)
    .flatMap(t => t.partitions.map(p => ({topic: t.name, ...p})));
  fill("topics", partitions, (row, p) => {
    cell(row, p.topic); cell(row, p.partition, "num"); cell(row, p.leader, "num");
    for (const value of [p.log_start_offset, p.last_stable_offset, p.high_watermark,
                         p.high_watermark - p.log_start_offset]) cell(row, fmt(value), "num");
  }, "No topics yet.");
}

function drawRate() {
  const canvas = document.getElementById("rate");
  const width = canvas.clientWidth, height = 56, dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const top = Math.max(1, ...rates);
  ctx.strokeStyle = "#1e88e5"; ctx.lineWidth = 1.5; ctx.beginPath();
  rates.forEach((value, i) => {
    const x = 4 + i / 59 * (width - 8), y = height - 4 - value / top * (height - 22);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.font = FONT; ctx.fillStyle = "#334e68"; ctx.textAlign = "left"; ctx.textBaseline = "top";
  ctx.fillText((rates.at(-1) || 0).toFixed(0) + " requests/s (last minute's highest " +
               top.toFixed(0) + ")", 8, 4);
}

function render(next) {
  state = next;
  const now = performance.now();
  if (lastTotal !== null) {
    rates.push((state.requests_total - lastTotal) / Math.max((now - lastTime) / 1000, 0.001));
    if (rates.length > 60) rates.shift();
  }
  lastTotal = state.requests_total; lastTime = now;
  state.region_colours ||= {DONE: "#cfd8dc", BACKLOG: "#fff3d6", BACKLOG_STRIPE: "#f2d49b"};
  document.getElementById("status").textContent =
    state.clock + " clock · " + new Date(state.now_ms).toISOString().replace("T", " ");
  document.getElementById("brokers").innerHTML = state.brokers.map(b =>
    '<span class="pill ' + (b.stopped ? "stopped" : b.down ? "down" : "") + '">broker ' +
    b.node_id + (b.stopped ? " stopped" : b.down ? " down" : "") + "</span>").join("");
  const names = ["DONE", ...Object.keys(state.colours), "BACKLOG"];
  document.getElementById("legend").innerHTML = names.map(name =>
    '<span title="' + esc(MEANING[name] || "") + '">' + (name === "BACKLOG"
      ? '<span class="swatch" style="background: repeating-linear-gradient(135deg, ' +
        state.region_colours.BACKLOG_STRIPE + " 0 3px, " + state.region_colours.BACKLOG +
        ' 3px 8px)"></span>' : swatch(colourOf(name))) +
    (name === "DONE" ? "done (below SPSO)" : name === "BACKLOG" ? "backlog (not fetched yet)"
      : name === "TX_PENDING" ? "TX_PENDING (KIP-1289)" : name) + "</span>").join("");
  renderTables();
  renderShares();
  drawRate();
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

function redraw() {
  if (!state) return;
  for (const found of cards.values()) drawShare(found);
  drawRate();
}
window.addEventListener("resize", redraw);

window.kemu = {
  // where `offset` is drawn in the share partition `key`'s canvas (CSS pixels), on the
  // "overview" bar or the enlarged "window" bar, clear of the bar's text
  point(key, offset, row) {
    const found = cards.get(key);
    const x = row === "window" ? found.g.zx(offset + 0.5) : found.g.x(offset + 0.5);
    return {x, y: (row === "window" ? ZOOM_Y : BAR_Y) + 3};
  },
};

async function poll() {
  try {
    const answer = await fetch("state");
    render(await answer.json());
  } catch (error) {
    document.getElementById("status").textContent = "unreachable: " + error;
  }
  setTimeout(poll, 1000);
}
poll();
</script>
</body>
</html>
"""
