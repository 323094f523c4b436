"""The live dashboard: ``GET /dashboard`` (one static page) polling ``GET /state`` (a JSON snapshot
of topics, groups, share partitions, open transactions and the request counter) once a second.

Each share partition is drawn as one strip on a canvas: its in-flight window [SPSO, SPEO) scaled
to the strip's width, each span a rectangle coloured by state, so 10,000 in-flight records take
no more room than 10 (a span narrower than a pixel still gets one pixel).
"""

from __future__ import annotations

from typing import Any

from kemu.broker.share.manager import share_partitions
from kemu.broker.stats import request_stats
from kemu.cluster.context import Runtime
from kemu.control.verbs import Control

STATE_COLOURS = {
    "AVAILABLE": "#4caf50",
    "ACQUIRED": "#2196f3",
    "TX_PENDING": "#ff9800",
    "ACKNOWLEDGED": "#9e9e9e",
    "ARCHIVING": "#9c27b0",
    "ARCHIVED": "#424242",
}


def snapshot(runtime: Runtime, control: Control) -> dict[str, Any]:
    cluster = runtime.cluster
    topics = [
        {
            "name": name,
            "internal": name.startswith("__"),
            "partitions": [
                {
                    "partition": p.index,
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "log_start_offset": p.log_start_offset,
                    "high_watermark": p.high_watermark,
                    "last_stable_offset": p.last_stable_offset,
                }
                for p in topic.partitions
            ],
        }
        for name, topic in sorted(cluster.topics.items())
    ]
    groups: list[dict[str, Any]] = []
    coordinator = runtime.services.get("group_coordinator")
    registry = getattr(coordinator, "registry", None)
    if registry is not None:
        for group in registry:
            state = getattr(group, "state_name", None)
            groups.append(
                {
                    "group": group.group_id,
                    "type": getattr(group, "group_type", type(group).__name__),
                    "state": state() if callable(state) else state,
                    "members": sorted(getattr(group, "members", {})),
                }
            )
    shares = []
    for key, actor in sorted(
        share_partitions(runtime).actors.items(),
        key=lambda item: (item[0].group_id, str(item[0].topic_id), item[0].partition),
    ):
        core = actor.core
        if core is None:
            continue
        topic = cluster.topics_by_id.get(key.topic_id)
        shares.append(
            {
                "group": key.group_id,
                "topic": topic.name if topic is not None else str(key.topic_id),
                "partition": key.partition,
                "start_offset": core.start,
                "end_offset": core.end,
                "spans": [[s.first, s.last, s.state.name] for s in core._spans.spans],
            }
        )
    stats = request_stats(runtime)
    return {
        "now_ms": runtime.clock_ms(),
        "clock": "virtual" if runtime.clock.virtual else "real",
        "brokers": control.brokers(),
        "topics": topics,
        "groups": groups,
        "share_partitions": shares,
        "transactions": control.transactions(),
        "requests_total": sum(stats.requests.values()),
        "colours": STATE_COLOURS,
    }


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kemu dashboard</title>
<style>
  body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; background: #fafafa; }
  h1 { font-size: 18px; margin: 0 0 8px; }
  h2 { font-size: 15px; margin: 18px 0 6px; }
  table { border-collapse: collapse; }
  td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; }
  th { background: #eee; }
  .strip-row { margin: 6px 0; }
  .strip-label { font-family: monospace; }
  canvas.strip { display: block; border: 1px solid #bbb; background: #fff; }
  .legend span { display: inline-block; padding: 1px 6px; margin-right: 4px; color: #fff; }
  #status { color: #666; }
</style>
</head>
<body>
<h1>kemu <span id="status">connecting…</span></h1>
<h2>Requests per second</h2>
<canvas id="rate" width="600" height="80"></canvas>
<h2>Share partitions</h2>
<div class="legend" id="legend"></div>
<div id="shares"></div>
<h2>Topics</h2>
<table id="topics"><thead><tr><th>topic</th><th>partition</th><th>leader</th>
<th>log start</th><th>LSO</th><th>high watermark</th></tr></thead><tbody></tbody></table>
<h2>Groups</h2>
<table id="groups"><thead><tr><th>group</th><th>type</th><th>state</th><th>members</th>
</tr></thead><tbody></tbody></table>
<h2>Open transactions</h2>
<table id="transactions"><thead><tr><th>transactional id</th><th>state</th><th>producer</th>
<th>partitions</th><th>staged share records</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
const STRIP_WIDTH = 800, STRIP_HEIGHT = 18;
const rates = [];
let lastTotal = null, lastTime = null;

function cell(row, text) { const td = row.insertCell(); td.textContent = text; return td; }

function fill(id, rows, build) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of rows) build(body.insertRow(), item);
}

function drawStrip(canvas, share, colours) {
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const width = Math.max(share.end_offset - share.start_offset, 1);
  for (const [first, last, state] of share.spans) {
    const x = Math.floor((first - share.start_offset) / width * canvas.width);
    const end = Math.ceil((last + 1 - share.start_offset) / width * canvas.width);
    ctx.fillStyle = colours[state] || "#000";
    ctx.fillRect(x, 0, Math.max(end - x, 1), canvas.height);
  }
}

function drawRate(canvas) {
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const top = Math.max(1, ...rates);
  ctx.strokeStyle = "#2196f3";
  ctx.beginPath();
  rates.forEach((value, i) => {
    const x = i / 59 * (canvas.width - 1);
    const y = canvas.height - 1 - value / top * (canvas.height - 12);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = "#222";
  ctx.fillText((rates.at(-1) || 0).toFixed(0) + " req/s (max " + top.toFixed(0) + ")", 4, 10);
}

function render(state) {
  const now = performance.now();
  if (lastTotal !== null) {
    rates.push((state.requests_total - lastTotal) / ((now - lastTime) / 1000));
    if (rates.length > 60) rates.shift();
  }
  lastTotal = state.requests_total; lastTime = now;
  drawRate(document.getElementById("rate"));
  document.getElementById("status").textContent =
    state.clock + " clock, " + new Date(state.now_ms).toISOString() + ", brokers " +
    state.brokers.map(
      b => b.node_id + (b.stopped ? " (stopped)" : b.down ? " (down)" : "")).join(", ");
  const legend = document.getElementById("legend");
  legend.replaceChildren(...Object.entries(state.colours).map(([name, colour]) => {
    const span = document.createElement("span");
    span.style.background = colour; span.textContent = name; return span;
  }));
  const shares = document.getElementById("shares");
  shares.replaceChildren();
  for (const share of state.share_partitions) {
    const row = document.createElement("div");
    row.className = "strip-row";
    const label = document.createElement("div");
    label.className = "strip-label";
    label.textContent = share.group + " " + share.topic + "-" + share.partition +
      "  SPSO " + share.start_offset + "  SPEO " + share.end_offset +
      "  (" + (share.end_offset - share.start_offset) + " in flight)";
    const canvas = document.createElement("canvas");
    canvas.className = "strip";
    canvas.width = STRIP_WIDTH; canvas.height = STRIP_HEIGHT;
    canvas.dataset.key = share.group + "/" + share.topic + "/" + share.partition;
    row.append(label, canvas);
    shares.append(row);
    drawStrip(canvas, share, state.colours);
  }
  const partitions = state.topics.filter(t => !t.internal)
    .flatMap(t => t.partitions.map(p => ({topic: t.name, ...p})));
  fill("topics", partitions, (row, p) => {
    for (const value of [p.topic, p.partition, p.leader, p.log_start_offset,
                         p.last_stable_offset, p.high_watermark]) cell(row, value);
  });
  fill("groups", state.groups, (row, g) => {
    for (const value of [g.group, g.type, g.state, g.members.join(", ")]) cell(row, value);
  });
  fill("transactions", state.transactions, (row, t) => {
    for (const value of [t.transactional_id, t.state,
                         t.producer_id + "/" + t.producer_epoch,
                         t.partitions.map(p => p.join("-")).join(", "),
                         t.staged_share_records.length]) cell(row, value);
  });
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

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
