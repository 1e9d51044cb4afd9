// The hyperframes viewer page: scrubber, timeline, cache and live-run figures.
// Plain JS, no dependencies; talks only to this server's /api routes.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const TIERS = ["hot", "warm", "cold"];

  const state = {
    meta: null,
    frames: 0,
    fps: 25,
    index: -1,        // the frame on screen
    want: null,       // the newest frame asked for, not yet fetched
    target: 0,        // the newest frame asked for (fetched, in flight or waiting)
    inflight: false,
    format: "jpeg",
    pendingKeys: [],  // key-press times waiting for a frame to be shown
    latencies: [],    // key press -> frame shown, ms
    timeline: null,
    playing: false,
    shown: 0,
    stats: null,
  };

  function fmtBytes(n) {
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GiB";
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
    if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
    return n + " B";
  }

  function clamp(i) {
    return Math.max(0, Math.min(state.frames - 1, i));
  }

  function afterPaint() {
    return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  }

  function percentile(values, q) {
    if (!values.length) return 0;
    const sorted = values.slice().sort((a, b) => a - b);
    const rank = Math.max(1, Math.ceil((q / 100) * sorted.length));
    return sorted[Math.min(rank, sorted.length) - 1];
  }

  // -- frames ---------------------------------------------------------------------------

  function show(i) {
    if (!state.frames) return;
    state.want = state.target = clamp(i);
    if (!state.inflight) pump();
  }

  async function pump() {
    state.inflight = true;
    try {
      while (state.want !== null) {
        const i = state.want;
        state.want = null;
        const covered = state.pendingKeys.splice(0);
        if (i === state.index) {
          resolveKeys(covered);
          continue;
        }
        await fetchAndDraw(i);
        await afterPaint();
        resolveKeys(covered);
      }
    } finally {
      state.inflight = false;
    }
  }

  function resolveKeys(covered) {
    const now = performance.now();
    for (const t of covered) state.latencies.push(now - t);
    if (state.latencies.length > 2000) state.latencies.splice(0, state.latencies.length - 2000);
  }

  // Decoded frames, fetched ahead in the scrub direction: key -> Promise of a loaded frame.
  const AHEAD = 2;
  const KEEP = 16;
  const loaded = new Map();

  function load(i) {
    const key = `${state.format}:${i}`;
    let entry = loaded.get(key);
    if (entry === undefined) {
      entry = fetchFrame(i, state.format);
      entry.catch(() => loaded.delete(key));
      loaded.set(key, entry);
      while (loaded.size > KEEP) loaded.delete(loaded.keys().next().value);
    } else {
      loaded.delete(key); // most recently used last
      loaded.set(key, entry);
    }
    return entry;
  }

  async function fetchFrame(i, format) {
    const res = await fetch(`/api/frame/${i}?format=${format}`);
    if (!res.ok) throw new Error(`frame ${i}: ${res.status} ${await res.text()}`);
    const blob = await res.blob();
    const bitmap = await createImageBitmap(blob, {
      colorSpaceConversion: "none",
      premultiplyAlpha: "none",
    });
    return {
      index: i,
      bitmap,
      tier: res.headers.get("x-tier") || "-",
      timestamp: res.headers.get("x-timestamp"),
      fetchMs: Number(res.headers.get("x-fetch-ms")),
    };
  }

  // The next AHEAD frames in the scrub direction, then the one behind (for a reversal).
  function readAhead(i, step) {
    for (const j of [...Array(AHEAD).keys()].map((k) => i + (k + 1) * step).concat([i - step])) {
      if (j >= 0 && j < state.frames) load(j);
    }
  }

  async function fetchAndDraw(i) {
    let frame;
    try {
      frame = await load(i);
    } catch (err) {
      $("status").textContent = String(err);
      return;
    }
    const step = i >= state.index ? 1 : -1;
    const canvas = $("frame");
    const bitmap = frame.bitmap;
    if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
      canvas.width = bitmap.width;
      canvas.height = bitmap.height;
    }
    canvas.getContext("2d").drawImage(bitmap, 0, 0);
    state.index = i;
    state.shown += 1;
    $("index").textContent = String(i);
    $("time").textContent = frame.timestamp ? Number(frame.timestamp).toFixed(3) + " s" : "-";
    const tierBox = $("tier");
    tierBox.textContent = `${frame.tier} (${frame.fetchMs.toFixed(1)} ms)`;
    tierBox.className = "t-" + frame.tier;
    $("slider").value = String(i);
    addRecent(frame.tier);
    drawTimeline();
    readAhead(i, step);
  }

  function addRecent(tier) {
    const box = $("recent");
    const cell = document.createElement("span");
    cell.className = "t-" + tier;
    cell.title = tier;
    box.appendChild(cell);
    while (box.childElementCount > 48) box.removeChild(box.firstChild);
  }

  // SHA-256 of the RGB bytes on the canvas (row-major, alpha dropped): the tests compare it
  // with the store's frame. 127.0.0.1 is a secure context, so crypto.subtle is there.
  async function frameHash() {
    const canvas = $("frame");
    const rgba = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    const rgb = new Uint8Array((rgba.length / 4) * 3);
    for (let k = 0, j = 0; k < rgba.length; k += 4, j += 3) {
      rgb[j] = rgba[k];
      rgb[j + 1] = rgba[k + 1];
      rgb[j + 2] = rgba[k + 2];
    }
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", rgb));
    return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // -- keys, slider, play -----------------------------------------------------------------

  function onKey(ev) {
    if (!state.frames || ev.target.tagName === "SELECT") return;
    const base = state.target;
    const step = ev.shiftKey ? 10 : 1;
    const second = Math.max(1, Math.round(state.fps));
    const moves = {
      ArrowRight: base + step, ArrowLeft: base - step,
      PageDown: base + second, PageUp: base - second,
      Home: 0, End: state.frames - 1,
    };
    if (ev.key in moves) {
      ev.preventDefault();
      ev.stopPropagation();
      if (state.playing) togglePlay();
      const target = clamp(moves[ev.key]);
      if (target !== base) {
        state.pendingKeys.push(ev.timeStamp);
        show(target);
      }
    } else if (ev.key === " ") {
      ev.preventDefault();
      togglePlay();
    }
  }

  function togglePlay() {
    state.playing = !state.playing;
    $("play").textContent = state.playing ? "pause" : "play";
    if (!state.playing) return;
    if (state.index >= state.frames - 1) show(0);
    const start = performance.now();
    const first = Math.max(0, state.index);
    const tick = (now) => {
      if (!state.playing) return;
      const target = first + Math.floor(((now - start) / 1000) * state.fps);
      if (target >= state.frames) {
        togglePlay();
        return;
      }
      if (target !== state.target) show(target);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  // -- timeline -------------------------------------------------------------------------

  const timelineCache = document.createElement("canvas");

  function renderTimeline() {
    const canvas = $("timeline");
    const width = Math.max(200, Math.floor(canvas.clientWidth * devicePixelRatio));
    const height = Math.floor(110 * devicePixelRatio);
    canvas.width = timelineCache.width = width;
    canvas.height = timelineCache.height = height;
    const ctx = timelineCache.getContext("2d");
    ctx.fillStyle = "#101215";
    ctx.fillRect(0, 0, width, height);
    const t = state.timeline;
    if (!t || !state.frames) return;
    ctx.fillStyle = "rgba(248, 81, 73, 0.55)";
    for (const b of t.boundaries) {
      ctx.fillRect(Math.floor((b / state.frames) * width), 0, Math.max(1, devicePixelRatio), height);
    }
    const values = t.mse.filter((v) => v !== null && v > 0);
    if (values.length) {
      const lo = Math.log10(Math.min(...values));
      const hi = Math.log10(Math.max(...values, t.threshold || 0));
      const span = Math.max(hi - lo, 1e-6);
      const y = (v) => height - 4 - ((Math.log10(v) - lo) / span) * (height - 8);
      ctx.strokeStyle = "#4aa3ff";
      ctx.lineWidth = devicePixelRatio;
      ctx.beginPath();
      let open = false;
      t.mse.forEach((v, k) => {
        const x = ((k + 0.5) / t.mse.length) * width;
        if (v === null || v <= 0) {
          open = false;
          return;
        }
        if (open) ctx.lineTo(x, y(v));
        else ctx.moveTo(x, y(v));
        open = true;
      });
      ctx.stroke();
      if (t.threshold) {
        ctx.strokeStyle = "#3fb950";
        ctx.setLineDash([6, 4]);
        ctx.beginPath();
        ctx.moveTo(0, y(t.threshold));
        ctx.lineTo(width, y(t.threshold));
        ctx.stroke();
        ctx.setLineDash([]);
      }
    }
  }

  function drawTimeline() {
    const canvas = $("timeline");
    if (!canvas.width || !state.frames) return;
    const ctx = canvas.getContext("2d");
    ctx.drawImage(timelineCache, 0, 0);
    if (state.index >= 0) {
      const x = ((state.index + 0.5) / state.frames) * canvas.width;
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(Math.round(x - devicePixelRatio), 0, 2 * devicePixelRatio, canvas.height);
    }
  }

  function onTimelineClick(ev) {
    const canvas = $("timeline");
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    let target = Math.floor((x / rect.width) * state.frames);
    const perPixel = state.frames / rect.width;
    let best = null;
    for (const b of state.timeline ? state.timeline.boundaries : []) {
      const d = Math.abs(b - target);
      if (d <= 4 * perPixel && (best === null || d < Math.abs(best - target))) best = b;
    }
    if (best !== null) target = best;
    show(target);
  }

  async function pollTimeline() {
    const res = await fetch("/api/timeline");
    if (!res.ok) return;
    state.timeline = await res.json();
    const t = state.timeline;
    const note = t.complete ? "" : ` · MSE curve: ${t.computed} of ${t.frames} frames`;
    $("timeline-note").textContent =
      `${t.hyperframes} hyperframes · ${t.boundaries_total} boundaries (red) · adjacent MSE (blue, log)` +
      (t.threshold ? " · threshold (green)" : "") + note + (t.error ? " · " + t.error : "");
    renderTimeline();
    drawTimeline();
    if (!t.complete && !t.error) setTimeout(pollTimeline, 1000);
  }

  // -- figures --------------------------------------------------------------------------

  async function pollStats() {
    try {
      const res = await fetch("/api/stats");
      if (res.ok) renderStats(await res.json());
    } finally {
      setTimeout(pollStats, 500);
    }
  }

  function renderStats(s) {
    state.stats = s;
    const rows = ["hot", "warm"].map((name) => {
      const t = s.tiers[name];
      return `<tr><td class="t-${name}">${name}</td><td>${t.hits}</td><td>${t.misses}</td>` +
        `<td>${(100 * t.hit_rate).toFixed(1)}%</td><td>${fmtBytes(t.bytes)}</td></tr>`;
    });
    rows.push(`<tr><td class="t-cold">cold</td><td colspan="3">${s.tiers.cold.reads} LMDB reads</td>` +
      `<td>${fmtBytes(s.tiers.cold.bytes)}</td></tr>`);
    $("tiers").tBodies[0].innerHTML = rows.join("");
    $("served").textContent = "frames served from: " +
      TIERS.map((t) => `${t} ${s.served[t]}`).join(" · ");
    const lat = state.latencies;
    $("timing").textContent =
      `fetch ${s.fetch_ms.last.toFixed(1)} ms (mean ${s.fetch_ms.mean.toFixed(1)}, ` +
      `p95 ${s.fetch_ms.p95.toFixed(1)}) · encode ${s.encode_ms.mean.toFixed(1)} ms` +
      (lat.length ? ` · key to frame p95 ${percentile(lat, 95).toFixed(1)} ms` : "");
  }

  function esc(text) {
    return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  }

  async function pollLive() {
    try {
      const res = await fetch("/api/live");
      if (res.ok) renderLive(await res.json());
    } finally {
      setTimeout(pollLive, 1000);
    }
  }

  function renderLive(v) {
    $("live").hidden = v.state === "none";
    $("live-state").textContent = v.state;
    const run = v.run;
    if (run) {
      const total = run.total ? ` of ${run.total}` : "";
      $("live-summary").textContent =
        `${run.frames}${total} frames · ${run.fps.toFixed(1)} frames/s · ` +
        `${run.elapsed_s.toFixed(1)} s · reorder ${run.reorder_depth} · failures ${run.failures}`;
      $("stages").tBodies[0].innerHTML = run.stages.map((s) =>
        `<tr><td>${esc(s.name)}</td><td>${s.workers}</td><td>${s.frames}</td>` +
        `<td>${s.fps.toFixed(1)}</td><td>${(100 * s.busy_share).toFixed(0)}%</td>` +
        `<td>${s.queue_depth}/${s.queue_capacity}</td></tr>`).join("");
      $("pools").tBodies[0].innerHTML = run.pools.map((p) =>
        `<tr><td>${esc(p.name)}</td><td>${p.in_use}</td><td>${p.slots}</td><td>${p.high_water}</td></tr>`
      ).join("");
      renderExtra(run.extra);
    } else if (v.report) {
      const r = v.report;
      $("live-summary").textContent =
        `${r.frames} frames in ${r.wall_s.toFixed(2)} s = ${r.fps.toFixed(1)} frames/s ` +
        `(slowest stage: ${r.slowest_stage})`;
      renderExtra(r.extra);
    } else {
      $("live-summary").textContent = v.state === "idle" ? "waiting for a run" : "";
    }
  }

  function renderExtra(extra) {
    const parts = Object.entries(extra || {}).map(([stage, figures]) =>
      `<div><b>${esc(stage)}</b>: ` + Object.entries(figures).map(([k, val]) =>
        `${esc(k)} ${esc(typeof val === "number" ? +val.toFixed(4) : JSON.stringify(val))}`
      ).join(", ") + "</div>");
    $("extra").innerHTML = parts.join("");
  }

  // -- start ----------------------------------------------------------------------------

  async function start() {
    const meta = await (await fetch("/api/meta")).json();
    state.meta = meta;
    $("name").textContent = meta.name;
    state.format = meta.format;
    $("format").value = meta.format;
    $("format").addEventListener("change", (ev) => {
      state.format = ev.target.value;
      ev.target.blur(); // the arrow keys scrub again
      const i = state.index;
      state.index = -1;
      loaded.clear();
      show(i);
    });
    if (meta.live) pollLive();
    if (!meta.has_frames) {
      $("facts").textContent = "live run";
      return;
    }
    state.frames = meta.frames;
    state.fps = meta.fps || 25;
    $("facts").textContent =
      `${meta.frames} frames · ${meta.size} · ` +
      `${meta.fps ? meta.fps.toFixed(3) + " fps" : "fps unknown"} · ${meta.hyperframes} hyperframes · ${meta.tier}`;
    $("count").textContent = String(meta.frames - 1);
    $("slider").max = String(meta.frames - 1);
    $("viewer").hidden = false;
    $("cache").hidden = false;
    $("slider").addEventListener("input", (ev) => show(Number(ev.target.value)));
    $("prev").addEventListener("click", () => show(state.index - 1));
    $("next").addEventListener("click", () => show(state.index + 1));
    $("play").addEventListener("click", togglePlay);
    $("timeline").addEventListener("click", onTimelineClick);
    window.addEventListener("keydown", onKey, { capture: true });
    window.addEventListener("resize", () => { renderTimeline(); drawTimeline(); });
    show(0);
    pollTimeline();
    pollStats();
  }

  window.hfViewer = { state, show, frameHash, percentile };
  start().catch((err) => { $("status").textContent = "viewer error: " + err; });
})();
