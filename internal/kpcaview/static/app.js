// app.js: the kpcastream page. Live (served by a worker at /ui/) it polls
// the worker's JSON API (../api/v1/…); as a replay report the data is
// embedded in the page (window.KPCA_REPORT) and nothing is fetched.
"use strict";
(function () {
  var REPORT = window.KPCA_REPORT || null;
  var API = "../api/v1/";
  var st = { pipeline: "", key: "", cx: 0, cy: 1, q: "", last: null, prevPipes: null, labels: {} };
  var $ = function (id) { return document.getElementById(id); };

  function text(el, s) { el.textContent = s; }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); }

  function getJSON(path) {
    return fetch(API + path, { cache: "no-store" }).then(function (r) {
      if (!r.ok) return r.text().then(function (t) { throw new Error(r.status + " " + t.trim()); });
      return r.json();
    });
  }

  function setStatus(msg, bad) {
    var s = $("status");
    text(s, msg);
    s.className = bad ? "bad" : "";
  }

  // ---- live: pipelines and keys -------------------------------------------

  function readHash() {
    var h = decodeURIComponent(location.hash.replace(/^#/, ""));
    var i = h.indexOf("/");
    if (i > 0) { st.pipeline = h.slice(0, i); st.key = h.slice(i + 1); }
  }
  function writeHash() {
    if (st.pipeline && st.key) history.replaceState(null, "", "#" + encodeURIComponent(st.pipeline) + "/" + encodeURIComponent(st.key));
  }

  function refreshPipelines() {
    return getJSON("pipelines").then(function (r) {
      text($("subtitle"), "member " + r.member + (r.pipelines.length ? "" : " · no pipelines"));
      if (!st.pipeline && r.pipelines.length) st.pipeline = r.pipelines[0].name;
      var prev = st.prevPipes, html = "";
      r.pipelines.forEach(function (p) {
        var rate = "";
        var old = prev && prev.byName[p.name];
        if (old) {
          var dt = (r.time - prev.time) / 1000;
          if (dt > 0) rate = " · in " + KC.fmt((p.stats.in - old.in) / dt) + "/s · dlq " + KC.fmt((p.stats.dead_lettered - old.dead_lettered) / dt) + "/s" +
            " · evictions " + KC.fmt(((p.stats.evictions || 0) - (old.evictions || 0)) / dt) + "/s";
        }
        var most = p.live_max || p.max_keys;
        var fill = most ? Math.min(1, p.keys / most) : 0;
        var mib = function (b) { return ((b || 0) / 1048576).toFixed(1) + " MiB"; };
        html += '<div class="pipe' + (p.name === st.pipeline ? " sel" : "") + '" data-name="' + esc(p.name) + '"><b>' + esc(p.name) + "</b> " +
          '<span class="meta">' + esc(p.learner) + " d=" + p.dim + " k=" + p.components + " B=" + p.budget + "</span>" +
          '<div class="meta">' + p.keys + " of " + most + " keys loaded · memory " + mib(p.stats.memory_used) + " of " + mib(p.memory_budget) + rate + "</div>" +
          '<div class="fill" title="memory of the loaded keys / memory_budget"><div style="width:' + (fill * 100).toFixed(1) + '%"></div></div></div>';
      });
      $("pipelines").innerHTML = html;
      var byName = {};
      r.pipelines.forEach(function (p) { byName[p.name] = p.stats; });
      st.prevPipes = { time: r.time, byName: byName };
    });
  }

  function refreshKeys() {
    if (!st.pipeline) return Promise.resolve();
    return getJSON("keys?pipeline=" + encodeURIComponent(st.pipeline) + "&q=" + encodeURIComponent(st.q) + "&limit=200").then(function (r) {
      text($("keyinfo"), r.matched + " of " + r.total + " loaded keys" + (r.matched > r.keys.length ? " (first " + r.keys.length + ")" : "") + (r.max_keys ? " · max_keys " + r.max_keys : ""));
      if (!st.key && r.keys.length) { st.key = r.keys[0].key; writeHash(); }
      var html = "";
      r.keys.forEach(function (k) {
        html += '<li data-key="' + esc(k.key) + '"' + (k.key === st.key ? ' class="sel"' : "") + "><span>" + esc(k.key) + (k.watched ? " ●" : "") +
          '</span><span class="adv">' + k.stored + " pts" + (k.advice ? " · " + esc(k.advice) : "") + "</span></li>";
      });
      $("keys").innerHTML = html;
    });
  }

  function refreshSeries() {
    if (!st.pipeline || !st.key) return Promise.resolve();
    return getJSON("series?pipeline=" + encodeURIComponent(st.pipeline) + "&key=" + encodeURIComponent(st.key)).then(function (v) {
      st.last = v;
      draw(v);
    });
  }

  var busy = false;
  function tick() {
    if (busy) return;
    busy = true;
    Promise.all([refreshPipelines(), refreshKeys()]).then(refreshSeries).then(function () {
      setStatus("updated " + new Date().toLocaleTimeString(), false);
    }).catch(function (e) {
      setStatus(String(e.message || e), true);
    }).then(function () { busy = false; });
  }

  // ---- drawing -------------------------------------------------------------

  var XT = REPORT ? "row" : "seconds before now";
  function xsOf(v, xs) {
    if (REPORT) return xs;
    return xs.map(function (x) { return (x - v.time) / 1000; });
  }
  function xfmt(x, step) {
    if (REPORT) return KC.fmt(x);
    var d = step < 1 ? (step < 0.1 ? 2 : 1) : 0;
    return (Math.abs(x) < Math.pow(10, -d) / 2 ? "0" : x.toFixed(d)) + "s";
  }

  // marks are the drift markers (dashed red lines) and, with basis, the
  // basis changes (short grey ticks on the x axis).
  function marks(v, basis) {
    var out = [];
    v.events.forEach(function (e) {
      var x = REPORT ? e.x : (e.x - v.time) / 1000;
      if (e.kind === "drift") out.push({ x: x, color: "#d23f3f", dash: [4, 2] });
      else if (basis) out.push({ x: x, color: "#8a93a6", dash: [], tick: 8 });
    });
    return out;
  }

  function components(v) { return v.samples.z.length; }

  function fillSelects(v) {
    var k = components(v), cx = $("cx"), cy = $("cy");
    if (cx.options.length !== k) {
      [cx, cy].forEach(function (s, j) {
        s.innerHTML = "";
        for (var i = 0; i < k; i++) { var o = document.createElement("option"); o.value = i; o.textContent = "z" + (i + 1); s.appendChild(o); }
        s.value = Math.min(j, Math.max(0, k - 1));
      });
      st.cx = +cx.value; st.cy = +cy.value;
    }
  }

  function draw(v) {
    var b = v.buckets, s = v.samples, vm = marks(v);
    text($("keytitle"), (REPORT ? "replay of " + v.key : v.pipeline + " / " + v.key));
    var last = b.x.length - 1;
    var meta = v.learner + " d=" + v.dim + " k=" + v.components + " B=" + v.budget + " · ";
    if (REPORT) meta += (REPORT.rows || v.count).toLocaleString() + " rows" + (REPORT.rows && REPORT.rows !== v.count ? " (" + v.count.toLocaleString() + " scored: the learner scores once it is ready)" : "");
    else meta += v.count.toLocaleString() + " outputs recorded" + (s.x.length ? " since " + new Date(s.x[0] < (b.x[0] || Infinity) ? s.x[0] : b.x[0]).toLocaleTimeString() : "") +
      (v.since ? " (the ones before " + (v.since < 8e15 ? new Date(v.since).toLocaleTimeString() : "now") + " read back from the output stream, without the learner's state; a key's outputs are recorded while it is watched)" : " (a key's outputs are recorded while it is watched)");
    if (last >= 0) meta += " · basis v" + b.basis[last] + " · stored " + b.stored[last] + "/" + v.budget + " · explained " + b.explained[last].toFixed(3);
    if (!REPORT) meta += " · watched for " + Math.round(v.watch_ttl_ms / 1000) + "s after the last request";
    text($("keymeta"), meta);
    if (REPORT && REPORT.detection) { text($("detection"), REPORT.detection); $("detection").hidden = false; }
    if (REPORT && REPORT.monitor) { text($("monitor-line"), REPORT.monitor); $("monitor-line").hidden = false; }
    fillSelects(v);
    var counts = {};

    // A key's record read back from the output stream has the outputs'
    // statistics, not the learner's state (eigenvalues, dictionary,
    // timings): its charts say so until a live output brings it.
    var NOSTATE = "the learner's state (eigenvalues, dictionary, timings) is not in the outputs read back from the stream: it starts with the key's next output";
    var absent = function (ys) { return !REPORT && v.since && !KC.hasData(ys) ? NOSTATE : ""; };

    // spectrum: current eigenvalues and cumulative explained share
    var eig = b.eig.map(function (col) { return last >= 0 ? col[last] : 0; }).filter(function (x) { return isFinite(x); });
    var sum = eig.reduce(function (a, x) { return a + x; }, 0), ex = last >= 0 ? b.explained[last] : 0;
    var total = ex > 0 ? sum / ex : sum, acc = 0;
    var cum = eig.map(function (x) { acc += x; return total > 0 ? acc / total : 0; });
    var specAbsent = eig.length ? "" : absent([]);
    counts.spectrum = KC.bars($("c-spectrum"), {
      values: last >= 0 ? eig : [], labels: eig.map(function (_, i) { return "λ" + (i + 1); }), cum: cum, absent: specAbsent,
      xtitle: "component", ytitle: "eigenvalue", y2title: "cumulative share",
      legend: [{ label: "eigenvalue", color: "#2f6fdb" }, { label: "cumulative share of the variance (right)", color: "#e08a1e" }]
    });
    text($("spec-note"), last < 0 ? "" : eig.length ? "explained " + (ex * 100).toFixed(1) + "% by " + eig.length :
      "explained " + (ex * 100).toFixed(1) + "% (the outputs' share; eigenvalues from the next output)");

    var bx = xsOf(v, b.x.map(function (x, i) { return x + b.width[i] / 2; }));
    // Buckets before v.since were read back from the output stream: they
    // have statistics and projections but not the learner's state.
    var st8 = function (col) { return v.since ? col.map(function (y, i) { return b.x[i] + b.width[i] <= v.since ? NaN : y; }) : col; };
    var eseries = b.eig.map(function (col, i) { return { x: bx, y: st8(col), color: KC.color(i), label: "λ" + (i + 1) }; });
    eseries.push({ x: bx, y: b.explained, color: "#1d2330", label: "explained (right)", right: true, width: 1 });
    counts.eig = KC.line($("c-eig"), {
      series: eseries, vmarks: marks(v, true), xfmt: xfmt, ymin: 0, y2min: 0, y2max: 1,
      xtitle: XT, ytitle: "eigenvalue", y2title: "explained share", marklabel: "drift", ticklabel: "basis change"
    });

    // scatter of the kept samples on two components
    var cx = Math.min(st.cx, components(v) - 1), cy = Math.min(st.cy, components(v) - 1);
    var n = s.x.length, colors = new Array(n), legend;
    if (s.label) {
      var seen = {}, order = [];
      var lab = s.label.map(function (l, i) { return l || (s.pred ? s.pred[i] : ""); }); // own label, else the prediction
      lab.forEach(function (l) { if (!(l in seen)) { seen[l] = order.length; order.push(l); } });
      order.sort();
      order.forEach(function (l, i) { seen[l] = i; });
      for (var i = 0; i < n; i++) colors[i] = lab[i] === "" ? "#c5cad3" : KC.color(seen[lab[i]]);
      legend = order.slice(0, 8).map(function (l, i) { return { label: l === "" ? "(none)" : l, color: l === "" ? "#c5cad3" : KC.color(i) }; });
      if (order.length > 8) legend.push({ label: "+" + (order.length - 8) + " more", color: "#c5cad3" });
      text($("scatter-note"), "last " + n + ", coloured by label" + (s.pred ? " (else the prediction)" : ""));
    } else {
      for (var j = 0; j < n; j++) colors[j] = KC.ramp(n > 1 ? j / (n - 1) : 1);
      legend = [{ label: "older", color: KC.ramp(0) }, { label: "newer", color: KC.ramp(1) }];
      text($("scatter-note"), (REPORT ? n + " rows (every " + v.stride + ")" : "last " + n) + ", coloured by time");
    }
    var names = s.x.map(function (x, i) { return (REPORT ? "row " + x : "seq " + s.seq[i]) + (s.label && s.label[i] ? " · " + s.label[i] : "") + (s.pred && s.pred[i] ? " · predicted " + s.pred[i] : ""); });
    counts.scatter = KC.scatter($("c-scatter"), {
      x: cx >= 0 ? s.z[cx] : [], y: cy >= 0 ? s.z[cy] : [], colors: colors, legend: legend, names: names,
      xtitle: "z" + (cx + 1), ytitle: "z" + (cy + 1)
    });

    // novelty scores with their control limits
    var sx = xsOf(v, s.x);
    [["spe", "SPE", v.limits.spe, s.spe, b.spe], ["t2", "T²", v.limits.t2, s.t2, b.t2]].forEach(function (a) {
      var vals = a[3], lim = a[2], ox = [], oy = [];
      // With a monitor (outputs carry limits and alarms) the marked points
      // are the outputs' own alarms; else the samples above the quantile.
      var al = s.alarm, mon = v.limits.source === "monitor" && al;
      for (var i = 0; i < vals.length; i++) {
        var hit = mon ? (al[i] === a[0] || al[i] === "both") : vals[i] > lim;
        if (hit) { ox.push(sx[i]); oy.push(vals[i]); }
      }
      var ser = [{ x: sx, y: vals, color: "#7d8dae", label: a[1] + (REPORT && v.stride > 1 ? " (every " + v.stride + "th row)" : " per output"), dots: true }];
      var inView = [], inY = [];
      for (var j = 0; j < bx.length; j++) if (!sx.length || bx[j] >= sx[0]) { inView.push(bx[j]); inY.push(a[4][j]); }
      ser.push({ x: inView, y: inY, color: "#1d2330", label: REPORT ? "mean per bucket" : "mean per second", width: 1.5 });
      counts[a[0]] = KC.line($("c-" + a[0]), {
        series: ser, vmarks: vm, xfmt: xfmt, ymin: 0, xtitle: XT, ytitle: a[1], marklabel: "drift",
        hlines: [{ y: lim, color: "#e08a1e", label: (v.limits.source === "monitor" ? "control limit " : Math.round(v.limits.q * 100) + "% limit ") + KC.fmt(lim) }],
        points: [{ x: ox, y: oy, color: "#d23f3f", r: 2.5, label: ox.length + (mon ? " alarms" : " above") }]
      });
      text($(a[0] + "-note"), vals.length ? (ox.length + " of " + vals.length + (mon ? " alarmed (the outputs' own limits)" : " above the limit")) : "");
    });

    // dictionary
    var dictAbsent = absent(st8(b.stored));
    counts.dict = KC.line($("c-dict"), {
      series: dictAbsent ? [] : [
        { x: bx, y: st8(b.stored), color: "#2f6fdb", label: "stored of B=" + v.budget },
        { x: bx, y: st8(b.swaps), color: "#d23f3f", label: "swaps/1000 (right)", right: true, width: 1 },
        { x: bx, y: st8(b.moves), color: "#2a9d6f", label: "moves/1000 (right)", right: true, width: 1 }
      ], absent: dictAbsent, vmarks: vm, xfmt: xfmt, ymin: 0, ymax: v.budget, y2min: 0,
      xtitle: XT, ytitle: "points stored", y2title: "per 1,000 " + (REPORT ? "rows" : "msgs"), marklabel: "drift"
    });

    // rates
    // (the last bucket, still filling, has none yet: KC.rates)
    var rr = REPORT ? { key: b.n } : KC.rates(b, v.time, v.since);
    var rx = bx, keyRate = rr.key, inRate = rr.in, dead = rr.dead;
    var rser = [{ x: rx, y: keyRate, color: "#2f6fdb", label: REPORT ? "rows per bucket" : "key msgs/s" }];
    if (!REPORT) {
      rser.push({ x: rx, y: inRate, color: "#7b5cc4", label: "pipeline in/s", width: 1 });
      rser.push({ x: rx, y: dead, color: "#d23f3f", label: "dead letters/s (right)", right: true, width: 1 });
    }
    if (REPORT) $("card-rate").hidden = true; // a replay has no message rate
    else counts.rate = KC.line($("c-rate"), { series: rser, vmarks: vm, xfmt: xfmt, ymin: 0, y2min: 0, xtitle: XT, ytitle: "messages/s", y2title: "dead letters/s", marklabel: "drift" });

    var lser = [{ x: bx, y: st8(b.learn.map(function (x) { return x * 1e3; })), color: "#2a9d6f", label: REPORT ? "learn + score per row (without the report's own work)" : "learn + score per message" }];
    var aged = b.age.some(function (a) { return a > 0; });
    if (aged) lser.push({ x: bx, y: st8(b.age.map(function (x) { return x > 0 ? x * 1e3 : NaN; })), color: "#e08a1e", label: "age at processing (right)", right: true });
    var latAbsent = absent(lser[0].y);
    counts.lat = KC.line($("c-lat"), { series: latAbsent ? [] : lser, absent: latAbsent, vmarks: vm, xfmt: xfmt, ymin: 0, y2min: 0, xtitle: XT, ytitle: "ms", y2title: aged ? "age, ms" : "", marklabel: "drift" });

    if (v.similarity && v.similarity.x.length) {
      $("card-sim").hidden = false;
      counts.sim = KC.line($("c-sim"), {
        series: [{ x: v.similarity.x, y: v.similarity.sim, color: "#2f6fdb", label: "similarity to batch KPCA of the last " + v.similarity.window + " rows" }],
        points: [{ x: v.similarity.x, y: v.similarity.sim, color: "#2f6fdb", r: 2.5 }], vmarks: vm, xfmt: xfmt, ymin: 0, ymax: 1,
        xtitle: XT, ytitle: "mean cos² of the angles", marklabel: "drift"
      });
    }

    // classifier: accuracy per bucket and the confusion of the kept samples
    var hasPred = !!(s.pred && b.classified);
    $("card-acc").hidden = !hasPred;
    $("card-conf").hidden = !hasPred;
    if (hasPred) {
      var ax = [], ay = [];
      for (var q = 0; q < b.x.length; q++) if (b.classified[q] > 0) { ax.push(bx[q]); ay.push(b.correct[q] / b.classified[q]); }
      counts.acc = KC.line($("c-acc"), {
        series: [{ x: ax, y: ay, color: "#2a9d6f", label: "accuracy (predicted before learning the label)" }],
        vmarks: vm, xfmt: xfmt, ymin: 0, ymax: 1, xtitle: XT, ytitle: "share right", marklabel: "drift",
        empty: "no labelled outputs yet"
      });
      counts.conf = confusion(s);
    }

    // contributions: which variables the alarms named
    $("card-contrib").hidden = !v.contrib;
    if (v.contrib) counts.contrib = contributions(v.contrib);

    // events: the drift markers, and the basis changes in short
    var at = function (x) { return REPORT ? "row " + x : new Date(x).toLocaleTimeString(); };
    var drift = v.events.filter(function (e) { return e.kind === "drift"; });
    var basis = v.events.filter(function (e) { return e.kind === "basis"; });
    var parts = drift.slice(-8).reverse().map(function (e) { return "<span>⚑ drift at " + esc(at(e.x)) + "</span>"; });
    if (basis.length) {
      var lb = basis[basis.length - 1];
      parts.push("<span>" + basis.length + " basis changes, the last v" + lb.from + "→v" + lb.to + " at " + esc(at(lb.x)) + "</span>");
    }
    $("events").innerHTML = parts.length ? "<b>Events</b> (dashed red lines: drift markers; grey ticks under the eigenvalues: basis changes): " + parts.join("") : "";

    var ok = n > 0, explained = { spectrum: specAbsent, dict: dictAbsent, lat: latAbsent };
    Object.keys(counts).forEach(function (c) { if (!(counts[c] > 0) && !explained[c]) ok = false; });
    document.documentElement.setAttribute("data-charts", JSON.stringify(counts));
    // The page's self-check (read by the tests in headless Chromium):
    // every visible chart has data, axis titles and its whole legend.
    var shown = Array.prototype.filter.call(document.querySelectorAll("canvas.chart"), function (cv) { return !cv.closest(".card").hidden; });
    var problems = KC.check(shown);
    if ($("c-conf") && !$("card-conf").hidden && !(counts.conf > 0)) problems.push("c-conf: empty confusion table");
    document.documentElement.setAttribute("data-selfcheck", JSON.stringify(problems));
    if (ok && !problems.length) document.documentElement.setAttribute("data-ready", "1");
  }

  // confusion fills the confusion table of the kept samples that have a
  // label and a prediction; returns their number.
  function confusion(s) {
    var classes = {}, m = {}, total = 0, right = 0;
    for (var i = 0; i < s.pred.length; i++) {
      var y = s.label[i], p = s.pred[i];
      if (!y || !p) continue;
      classes[y] = classes[p] = true;
      m[y + "\u0000" + p] = (m[y + "\u0000" + p] || 0) + 1;
      total++;
      if (y === p) right++;
    }
    var cl = Object.keys(classes).sort();
    var html = '<table class="conf"><tr><th>label \\ predicted</th>' + cl.map(function (c) { return "<th>" + esc(c) + "</th>"; }).join("") + "</tr>";
    cl.forEach(function (y) {
      html += "<tr><th>" + esc(y) + "</th>" + cl.map(function (p) {
        var k = m[y + "\u0000" + p] || 0;
        return '<td class="' + (y === p ? "diag" : k ? "off" : "") + '">' + k + "</td>";
      }).join("") + "</tr>";
    });
    $("conf").innerHTML = total ? html + "</table>" : "<p>no kept output has both a label and a prediction yet</p>";
    text($("conf-note"), total ? right + " of " + total + " right (" + (100 * right / total).toFixed(1) + "%)" : "");
    return total;
  }

  // contributions fills the contributions panel: the variables the alarms
  // ranked first most often (with their top-3 counts) and the newest
  // alarm's list; returns the number of variables listed.
  function contributions(c) {
    var vars = [];
    for (var j = 0; j < c.top3.length; j++) if (c.top3[j] > 0) vars.push(j);
    vars.sort(function (a, b) { return (c.first[b] - c.first[a]) || (c.top3[b] - c.top3[a]) || (a - b); });
    vars = vars.slice(0, 10);
    var pct = function (k) { return (100 * k / c.alarms).toFixed(1) + "%"; };
    var html = '<table class="conf"><tr><th>variable</th><th>ranked first</th><th>in the top 3</th></tr>' + vars.map(function (j) {
      return "<tr><th>x" + j + "</th><td>" + c.first[j] + " (" + pct(c.first[j]) + ")</td><td>" + c.top3[j] + " (" + pct(c.top3[j]) + ")</td></tr>";
    }).join("") + "</table>";
    var at = REPORT ? "row " + c.last_x : new Date(c.last_x).toLocaleTimeString() + " (seq " + c.last_seq + ")";
    html += "<p>newest alarm, at " + esc(at) + ": " + c.last.map(function (e) { return "x" + e.var + " " + KC.fmt(e.value); }).join(" · ") + "</p>";
    $("contrib").innerHTML = html;
    text($("contrib-note"), "over " + c.alarms + " alarms (x0 is the first variable; reconstruction-based, in units of the limits)");
    return vars.length;
  }

  // ---- wiring ----------------------------------------------------------------

  $("cx").addEventListener("change", function () { st.cx = +this.value; if (st.last) draw(st.last); });
  $("cy").addEventListener("change", function () { st.cy = +this.value; if (st.last) draw(st.last); });
  window.addEventListener("resize", function () { if (st.last) draw(st.last); });

  if (REPORT) {
    document.body.classList.add("report");
    text($("subtitle"), "replay report · " + REPORT.title);
    text($("status"), "generated " + REPORT.generated);
    st.last = REPORT.view;
    draw(REPORT.view);
    return;
  }
  readHash();
  $("search").addEventListener("input", function () { st.q = this.value; refreshKeys(); });
  $("pipelines").addEventListener("click", function (e) {
    var el = e.target.closest(".pipe");
    if (!el || el.dataset.name === st.pipeline) return;
    st.pipeline = el.dataset.name; st.key = ""; st.last = null; tick();
  });
  $("keys").addEventListener("click", function (e) {
    var el = e.target.closest("li");
    if (!el) return;
    st.key = el.dataset.key; writeHash(); refreshKeys(); refreshSeries();
  });
  tick();
  setInterval(tick, 1000);
})();
