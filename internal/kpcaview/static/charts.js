// charts.js: the few canvas charts of the kpcastream page (line, scatter,
// bars), written for it: no dependencies, works offline. Every chart has
// axis titles and a legend above its plot area, measured and wrapped onto
// as many lines as it needs (never over the data, never cut), and shows the
// values under the pointer. Each draw sets canvas.dataset.points to the
// number of data points drawn and keeps its layout on the canvas, which
// KC.check reads: the page's self-check, evaluated by the tests in headless
// Chromium.
"use strict";
var KC = (function () {
  var FONT = "10px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
  var TITLE_FONT = "10px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
  var LH = 13; // legend line height

  function setup(canvas) {
    var dpr = window.devicePixelRatio || 1;
    var w = canvas.clientWidth || 380, h = canvas.clientHeight || 190;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    var g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = FONT;
    hookHover(canvas);
    return { g: g, w: w, h: h, canvas: canvas };
  }

  function finite(v) { return typeof v === "number" && isFinite(v); }

  function extent(arrs, lo, hi) {
    var mn = Infinity, mx = -Infinity;
    arrs.forEach(function (a) {
      if (!a) return;
      for (var i = 0; i < a.length; i++) { var v = a[i]; if (finite(v)) { if (v < mn) mn = v; if (v > mx) mx = v; } }
    });
    if (lo !== undefined && lo !== null) mn = Math.min(mn, lo);
    if (hi !== undefined && hi !== null) mx = Math.max(mx, hi);
    if (!isFinite(mn)) { mn = 0; mx = 1; }
    if (mn === mx) {
      if (mn === 0) mx = 1; // all zero: [0, 1], not [-1, 1]
      else { var d = Math.abs(mn) * 0.1; mn -= d; mx += d; }
    }
    return [mn, mx];
  }

  function ticks(mn, mx, n) {
    var span = mx - mn, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    var err = n / span * step;
    if (err <= 0.15) step *= 10; else if (err <= 0.35) step *= 5; else if (err <= 0.75) step *= 2;
    var out = [];
    for (var v = Math.ceil(mn / step) * step; v <= mx + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  function fmt(v) {
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 1e6 || a < 1e-3) return v.toExponential(1);
    if (a >= 1000) return (v / 1000).toFixed(a >= 1e4 ? 0 : 1) + "k";
    return String(+v.toPrecision(3));
  }

  // layoutLegend places the labelled items in lines from the left edge of
  // the plot area, wrapping before an item that would pass the canvas's
  // right edge; an item wider than a line gets a line of its own in a
  // smaller font. Returns the entries with their boxes.
  function layoutLegend(g, items, x0, right) {
    var out = [], x = x0, y = 2;
    items.forEach(function (it) {
      if (!it.label) return;
      g.font = FONT;
      var font = FONT, w = g.measureText(it.label).width + 12;
      if (w > right - x0) { font = "8px system-ui, sans-serif"; g.font = font; w = g.measureText(it.label).width + 12; }
      if (x > x0 && x + w > right) { x = x0; y += LH; }
      out.push({ label: it.label, color: it.color, dash: it.dash, font: font, x: x, y: y, w: w, h: LH - 1 });
      x += w + 10;
    });
    g.font = FONT;
    return out;
  }

  function drawLegend(g, entries) {
    g.textAlign = "left"; g.textBaseline = "top";
    entries.forEach(function (e) {
      g.fillStyle = e.color;
      if (e.dash) { for (var k = 0; k < 8; k += 3) g.fillRect(e.x + k, e.y + 5, 2, 2); }
      else g.fillRect(e.x, e.y + 4, 8, 3);
      g.font = e.font; g.fillStyle = "#3a4152"; g.fillText(e.label, e.x + 11, e.y);
    });
    g.font = FONT;
  }

  // frame lays out the chart (legend on top, axis titles, ticks), draws
  // the axes and returns the coordinate mappers.
  function frame(c, xr, yr, opt, yr2, legendItems) {
    var g = c.g;
    var left = 44 + (opt.ytitle ? 14 : 0), right = c.w - (yr2 ? 40 + (opt.y2title ? 14 : 0) : 10);
    var legend = layoutLegend(g, legendItems || [], left, c.w - 4);
    var lh = legend.length ? legend[legend.length - 1].y + LH : 0;
    var x0 = left, x1 = right, y1 = lh + 8, y0 = c.h - (opt.xtitle ? 30 : 18);
    var sx = function (v) { return x0 + (v - xr[0]) / (xr[1] - xr[0]) * (x1 - x0); };
    var sy = function (v) { return y0 - (v - yr[0]) / (yr[1] - yr[0]) * (y0 - y1); };
    var sy2 = yr2 ? function (v) { return y0 - (v - yr2[0]) / (yr2[1] - yr2[0]) * (y0 - y1); } : null;
    g.strokeStyle = "#eceef2"; g.fillStyle = "#6b7385"; g.lineWidth = 1;
    g.textAlign = "right"; g.textBaseline = "middle";
    ticks(yr[0], yr[1], Math.max(2, Math.floor((y0 - y1) / 30))).forEach(function (v) {
      var y = Math.round(sy(v)) + 0.5;
      g.beginPath(); g.moveTo(x0, y); g.lineTo(x1, y); g.stroke();
      g.fillText((opt.yfmt || fmt)(v), x0 - 4, y);
    });
    if (yr2) {
      g.textAlign = "left";
      ticks(yr2[0], yr2[1], Math.max(2, Math.floor((y0 - y1) / 30))).forEach(function (v) { g.fillText((opt.y2fmt || fmt)(v), x1 + 4, sy2(v)); });
    }
    g.textAlign = "center"; g.textBaseline = "top";
    if (!opt.noxticks) {
      var xt = ticks(xr[0], xr[1], Math.max(2, Math.floor((x1 - x0) / 80)));
      var xstep = xt.length > 1 ? xt[1] - xt[0] : 1;
      xt.forEach(function (v) { g.fillText((opt.xfmt || fmt)(v, xstep), sx(v), y0 + 4); });
    }
    g.strokeStyle = "#c9ced8";
    g.beginPath(); g.moveTo(x0, y1); g.lineTo(x0, y0 + 0.5); g.lineTo(x1, y0 + 0.5); g.stroke();
    // axis titles
    g.font = TITLE_FONT; g.fillStyle = "#3a4152";
    var titles = { x: opt.xtitle || "", y: opt.ytitle || "", y2: yr2 ? (opt.y2title || "") : null };
    if (opt.xtitle) { g.textAlign = "center"; g.textBaseline = "bottom"; g.fillText(opt.xtitle, (x0 + x1) / 2, c.h - 1); }
    if (opt.ytitle) {
      g.save(); g.translate(9, (y0 + y1) / 2); g.rotate(-Math.PI / 2);
      g.textAlign = "center"; g.textBaseline = "middle"; g.fillText(opt.ytitle, 0, 0); g.restore();
    }
    if (yr2 && opt.y2title) {
      g.save(); g.translate(c.w - 7, (y0 + y1) / 2); g.rotate(Math.PI / 2);
      g.textAlign = "center"; g.textBaseline = "middle"; g.fillText(opt.y2title, 0, 0); g.restore();
    }
    g.font = FONT;
    drawLegend(g, legend);
    var f = { sx: sx, sy: sy, sy2: sy2, x0: x0, x1: x1, y0: y0, y1: y1, xr: xr, yr: yr, yr2: yr2 };
    c.canvas._kc = { titles: titles, legend: legend, w: c.w, h: c.h, plotTop: y1, f: f, labels: [], hover: null };
    return f;
  }

  // empty draws a chart without data: its message, else opt.absent (a
  // chart that has no data for a reason the page knows and says, which the
  // self-check accepts; also in the canvas's data-absent), else "no data
  // yet".
  function empty(canvas, c, msg, opt) {
    var absent = opt && opt.absent;
    c.g.fillStyle = "#9aa1b1"; c.g.textAlign = "center"; c.g.textBaseline = "middle";
    var lines = wrapText(c.g, msg || absent || "no data yet", c.w - 24);
    lines.forEach(function (l, i) { c.g.fillText(l, c.w / 2, c.h / 2 + (i - (lines.length - 1) / 2) * 15); });
    canvas.dataset.points = "0";
    if (absent) canvas.dataset.absent = absent; else delete canvas.dataset.absent;
    canvas._kc = { titles: { x: (opt && opt.xtitle) || "", y: (opt && opt.ytitle) || "", y2: null }, legend: [], w: c.w, h: c.h, plotTop: 0, labels: [], empty: !absent, absent: !!absent };
    return 0;
  }

  // wrapText splits s into lines at most width wide in g's font.
  function wrapText(g, s, width) {
    var out = [], cur = "";
    s.split(" ").forEach(function (w) {
      var t = cur ? cur + " " + w : w;
      if (cur && g.measureText(t).width > width) { out.push(cur); cur = w; } else cur = t;
    });
    if (cur) out.push(cur);
    return out;
  }

  // hasData reports whether a series has a finite value.
  function hasData(ys) {
    for (var i = 0; i < ys.length; i++) if (finite(ys[i])) return true;
    return false;
  }

  // rates returns the live page's message rates per bucket of b (a
  // View's bucket columns): the key's messages per second and, from the
  // pipeline's counters, its inputs and dead letters per second. A bucket
  // still filling at now (ms) has no rate (its count so far over the whole
  // width would dip every line), nor has a bucket, or the step into one,
  // before since (read back from the output stream: no counters).
  function rates(b, now, since) {
    var r = { key: [], in: [], dead: [] }, last = b.x.length - 1;
    for (var k = 0; k <= last; k++) {
      var filling = k === last && now < b.x[k] + b.width[k];
      r.key.push(filling ? NaN : b.n[k] / (b.width[k] / 1000));
      if (k > 0 && !filling && !(since && b.x[k - 1] + b.width[k - 1] <= since)) {
        var dt = (b.x[k] - b.x[k - 1]) / 1000;
        r.in.push((b.in[k] - b.in[k - 1]) / dt);
        r.dead.push((b.dead[k] - b.dead[k - 1]) / dt);
      } else { r.in.push(NaN); r.dead.push(NaN); }
    }
    return r;
  }

  // nearest returns the index of the x closest to v in xs (sorted), or -1.
  function nearest(xs, v) {
    if (!xs.length) return -1;
    var lo = 0, hi = xs.length - 1;
    while (hi - lo > 1) { var m = (lo + hi) >> 1; if (xs[m] < v) lo = m; else hi = m; }
    return Math.abs(xs[lo] - v) <= Math.abs(xs[hi] - v) ? lo : hi;
  }

  // line draws series [{x, y, color, label, right, width, dots}] with
  // optional horizontal lines hlines [{y, color, label, right}], vertical
  // markers vmarks [{x, color, label}] and point overlays points
  // [{x, y, color, r, label}]. Options: xtitle, ytitle, y2title, xfmt, yfmt,
  // y2fmt, ymin, ymax, y2min, y2max, xmin, xmax, empty, marklabel (legend
  // entry of the vertical markers).
  function line(canvas, opt) {
    var c = setup(canvas);
    var left = opt.series.filter(function (s) { return !s.right; });
    var right = opt.series.filter(function (s) { return s.right; });
    var n = 0;
    opt.series.forEach(function (s) { n += s.x.length; });
    if (n === 0) return empty(canvas, c, opt.empty, opt);
    var xs = opt.series.map(function (s) { return s.x; });
    var xr = extent(xs, opt.xmin, opt.xmax);
    var hl = (opt.hlines || []).filter(function (h) { return !h.right && finite(h.y); }).map(function (h) { return h.y; });
    var yr = extent(left.map(function (s) { return s.y; }).concat([hl]), opt.ymin, opt.ymax);
    var yr2 = null;
    if (right.length) yr2 = extent(right.map(function (s) { return s.y; }), opt.y2min, opt.y2max);
    var vm = (opt.vmarks || []).filter(function (m) { return m.x >= xr[0] && m.x <= xr[1]; });
    var items = opt.series.concat(opt.hlines || []).concat(opt.points || []);
    if (opt.marklabel && vm.some(function (m) { return !m.tick; })) items.push({ label: opt.marklabel, color: "#d23f3f", dash: true });
    if (opt.ticklabel && vm.some(function (m) { return m.tick; })) items.push({ label: opt.ticklabel, color: "#8a93a6" });
    var f = frame(c, xr, yr, opt, yr2, items), g = c.g;
    vm.forEach(function (m) {
      var x = Math.round(f.sx(m.x)) + 0.5;
      g.strokeStyle = m.color; g.setLineDash(m.dash || [3, 3]); g.lineWidth = 1;
      g.beginPath(); g.moveTo(x, m.tick ? f.y0 - m.tick : f.y1); g.lineTo(x, f.y0); g.stroke(); g.setLineDash([]);
    });
    g.save();
    g.beginPath(); g.rect(f.x0, f.y1 - 2, f.x1 - f.x0, f.y0 - f.y1 + 4); g.clip();
    opt.series.forEach(function (s) {
      var sy = s.right ? f.sy2 : f.sy;
      g.strokeStyle = s.color; g.fillStyle = s.color; g.lineWidth = s.width || 1.5;
      if (s.dots) {
        for (var i = 0; i < s.x.length; i++) if (finite(s.y[i])) { g.beginPath(); g.arc(f.sx(s.x[i]), sy(s.y[i]), 1.6, 0, 7); g.fill(); }
        return;
      }
      g.beginPath();
      var pen = false;
      for (var j = 0; j < s.x.length; j++) {
        if (!finite(s.y[j])) { pen = false; continue; }
        var px = f.sx(s.x[j]), py = sy(s.y[j]);
        if (pen) g.lineTo(px, py); else g.moveTo(px, py);
        pen = true;
      }
      g.stroke();
      if (s.x.length < 40) for (var k = 0; k < s.x.length; k++) if (finite(s.y[k])) { g.beginPath(); g.arc(f.sx(s.x[k]), sy(s.y[k]), 2, 0, 7); g.fill(); }
    });
    (opt.hlines || []).forEach(function (h) {
      if (!finite(h.y)) return;
      var y = Math.round((h.right ? f.sy2 : f.sy)(h.y)) + 0.5;
      g.strokeStyle = h.color; g.setLineDash([5, 3]); g.lineWidth = 1.2;
      g.beginPath(); g.moveTo(f.x0, y); g.lineTo(f.x1, y); g.stroke(); g.setLineDash([]);
    });
    (opt.points || []).forEach(function (p) {
      g.fillStyle = p.color;
      for (var i = 0; i < p.x.length; i++) { g.beginPath(); g.arc(f.sx(p.x[i]), f.sy(p.y[i]), p.r || 2.5, 0, 7); g.fill(); }
    });
    g.restore();
    var st = canvas._kc;
    st.labels = items.filter(function (it) { return it.label; }).map(function (it) { return it.label; });
    st.hover = function (px) {
      if (px < f.x0 || px > f.x1) return null;
      var v = xr[0] + (px - f.x0) / (f.x1 - f.x0) * (xr[1] - xr[0]), rows = [], at = null;
      opt.series.forEach(function (s) {
        var i = nearest(s.x, v);
        if (i < 0 || !finite(s.y[i])) return;
        if (at === null) at = s.x[i];
        rows.push([s.label || "", s.color, (opt.yfmt && !s.right ? opt.yfmt : fmt)(s.y[i])]);
      });
      (opt.hlines || []).forEach(function (h) { if (finite(h.y) && h.label) rows.push([h.label, h.color, ""]); });
      return { x: at === null ? v : at, head: (opt.xtitle || "x") + " " + (opt.xfmt || fmt)(at === null ? v : at, (xr[1] - xr[0]) / 100), rows: rows };
    };
    canvas.dataset.points = String(n);
    return n;
  }

  // scatter draws x against y with a colour per point (colors[i]) and an
  // optional legend [{label, color}]; names[i] is shown on hover.
  function scatter(canvas, opt) {
    var c = setup(canvas);
    var n = opt.x.length;
    if (n === 0) return empty(canvas, c, opt.empty, opt);
    var xr = extent([opt.x]), yr = extent([opt.y]);
    var px = (xr[1] - xr[0]) * 0.04, py = (yr[1] - yr[0]) * 0.04;
    xr = [xr[0] - px, xr[1] + px];
    yr = [yr[0] - py, yr[1] + py];
    var f = frame(c, xr, yr, opt, null, opt.legend || []), g = c.g;
    for (var i = 0; i < n; i++) {
      g.fillStyle = opt.colors[i];
      g.beginPath(); g.arc(f.sx(opt.x[i]), f.sy(opt.y[i]), 2, 0, 7); g.fill();
    }
    var st = canvas._kc;
    st.labels = (opt.legend || []).filter(function (it) { return it.label; }).map(function (it) { return it.label; });
    st.hover = function (mx, my) {
      var best = -1, bd = 64;
      for (var i = 0; i < n; i++) {
        var dx = f.sx(opt.x[i]) - mx, dy = f.sy(opt.y[i]) - my, d = dx * dx + dy * dy;
        if (d < bd) { bd = d; best = i; }
      }
      if (best < 0) return null;
      return { head: opt.names ? opt.names[best] : "point " + best, rows: [[opt.xtitle, opt.colors[best], fmt(opt.x[best])], [opt.ytitle, opt.colors[best], fmt(opt.y[best])]] };
    };
    canvas.dataset.points = String(n);
    return n;
  }

  // bars draws one bar per value, labelled below, with an optional line
  // (cumulative share, right axis 0..1).
  function bars(canvas, opt) {
    var c = setup(canvas);
    var n = opt.values.length;
    if (n === 0) return empty(canvas, c, opt.empty, opt);
    var yr = extent([opt.values], 0);
    yr[1] *= 1.05;
    var o = { yfmt: opt.yfmt, noxticks: true, y2fmt: function (v) { return Math.round(v * 100) + "%"; }, xtitle: opt.xtitle, ytitle: opt.ytitle, y2title: opt.y2title };
    var f = frame(c, [0, n], yr, o, opt.cum ? [0, 1.05] : null, opt.legend || []), g = c.g;
    var x0 = f.x0, bw = (f.x1 - f.x0) / n;
    g.textAlign = "center"; g.textBaseline = "top";
    for (var i = 0; i < n; i++) {
      var y = f.sy(opt.values[i]);
      g.fillStyle = opt.colors ? opt.colors[i] : "#2f6fdb";
      g.fillRect(x0 + i * bw + bw * 0.15, y, bw * 0.7, f.y0 - y);
      g.fillStyle = "#6b7385";
      g.fillText(opt.labels[i], x0 + (i + 0.5) * bw, f.y0 + 4);
    }
    if (opt.cum) {
      g.strokeStyle = "#e08a1e"; g.fillStyle = "#e08a1e"; g.lineWidth = 1.5;
      g.beginPath();
      for (var j = 0; j < n; j++) {
        var px = x0 + (j + 0.5) * bw, py = f.sy2(opt.cum[j]);
        if (j) g.lineTo(px, py); else g.moveTo(px, py);
      }
      g.stroke();
      for (var k = 0; k < n; k++) { g.beginPath(); g.arc(x0 + (k + 0.5) * bw, f.sy2(opt.cum[k]), 2.5, 0, 7); g.fill(); }
    }
    var st = canvas._kc;
    st.labels = (opt.legend || []).filter(function (it) { return it.label; }).map(function (it) { return it.label; });
    st.hover = function (mx) {
      var i = Math.floor((mx - x0) / bw);
      if (i < 0 || i >= n) return null;
      var rows = [[opt.ytitle, "#2f6fdb", fmt(opt.values[i])]];
      if (opt.cum) rows.push([opt.y2title, "#e08a1e", (opt.cum[i] * 100).toFixed(1) + "%"]);
      return { head: opt.labels[i], rows: rows };
    };
    canvas.dataset.points = String(n);
    return n;
  }

  // ---- hover -----------------------------------------------------------------

  var tip = null;
  function hookHover(canvas) {
    if (canvas._kcHooked) return;
    canvas._kcHooked = true;
    canvas.addEventListener("mousemove", function (e) {
      var st = canvas._kc, r = canvas.getBoundingClientRect();
      var h = st && st.hover ? st.hover(e.clientX - r.left, e.clientY - r.top) : null;
      if (!tip) { tip = document.createElement("div"); tip.className = "kc-tip"; document.body.appendChild(tip); }
      if (!h) { tip.hidden = true; return; }
      var esc = function (s) { return String(s).replace(/[&<>"]/g, function (ch) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[ch]; }); };
      tip.innerHTML = "<b>" + esc(h.head) + "</b>" + h.rows.map(function (rw) {
        return '<div><i style="background:' + esc(rw[1]) + '"></i>' + esc(rw[0]) + (rw[2] !== "" ? ": <b>" + esc(rw[2]) + "</b>" : "") + "</div>";
      }).join("");
      tip.hidden = false;
      var x = e.pageX + 14, y = e.pageY + 12;
      if (x + tip.offsetWidth > window.scrollX + document.documentElement.clientWidth) x = e.pageX - 14 - tip.offsetWidth;
      tip.style.left = x + "px"; tip.style.top = y + "px";
    });
    canvas.addEventListener("mouseleave", function () { if (tip) tip.hidden = true; });
  }

  // ---- self-check --------------------------------------------------------------

  // check returns the problems of the drawn charts: a chart without data,
  // a missing axis title, a labelled series missing from its legend, a
  // legend entry outside the canvas or over the plot area.
  function check(canvases) {
    var out = [];
    canvases.forEach(function (cv) {
      var id = cv.id, st = cv._kc;
      if (!st) { out.push(id + ": not drawn"); return; }
      if (st.absent) return; // no data, for the reason it says
      if (!(+cv.dataset.points > 0) || st.empty) out.push(id + ": empty chart");
      if (!st.titles.x) out.push(id + ": no x axis title");
      if (!st.titles.y) out.push(id + ": no y axis title");
      if (st.titles.y2 === "") out.push(id + ": no title on the right axis");
      var shown = {};
      st.legend.forEach(function (e) {
        shown[e.label] = true;
        if (e.x < 0 || e.y < 0 || e.x + e.w > st.w + 0.5 || e.y + e.h > st.h) out.push(id + ": legend entry \"" + e.label + "\" cut (" + Math.round(e.x) + "+" + Math.round(e.w) + " of " + st.w + " px)");
        if (e.y + e.h > st.plotTop) out.push(id + ": legend entry \"" + e.label + "\" over the data");
      });
      st.labels.forEach(function (l) { if (!shown[l]) out.push(id + ": series \"" + l + "\" not in the legend"); });
    });
    return out;
  }

  // palette returns n distinguishable colours.
  var BASE = ["#2f6fdb", "#e08a1e", "#2a9d6f", "#c2405b", "#7b5cc4", "#8c6d3f", "#d264b6", "#5f6b7a", "#b5b82e", "#1fa8c2"];
  function color(i) { return BASE[i % BASE.length]; }

  // ramp maps t in [0, 1] to a colour from light blue (old) to dark red (new).
  function ramp(t) {
    t = Math.max(0, Math.min(1, t));
    var a = [150, 190, 235], b = [40, 70, 170], d = [200, 40, 50];
    var p = t < 0.6 ? a.map(function (v, i) { return v + (b[i] - v) * t / 0.6; }) : b.map(function (v, i) { return v + (d[i] - v) * (t - 0.6) / 0.4; });
    return "rgb(" + p.map(Math.round).join(",") + ")";
  }

  return { line: line, scatter: scatter, bars: bars, color: color, ramp: ramp, fmt: fmt, check: check, rates: rates, hasData: hasData };
})();
