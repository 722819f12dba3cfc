// charts.js: the few canvas charts of the kpcastream page (line, scatter,
// bars), written for it: no dependencies, works offline. Each draw sets
// canvas.dataset.points to the number of data points drawn, which the
// tests read.
"use strict";
var KC = (function () {
  var PAD = { l: 46, r: 40, t: 8, b: 20 };
  var FONT = "10px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";

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
    return { g: g, w: w, h: h };
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

  // frame draws the axes and returns the coordinate mappers.
  function frame(c, xr, yr, opt, yr2) {
    var g = c.g, x0 = PAD.l, x1 = c.w - (yr2 ? PAD.r : 10), y0 = c.h - PAD.b, y1 = PAD.t;
    var sx = function (v) { return x0 + (v - xr[0]) / (xr[1] - xr[0]) * (x1 - x0); };
    var sy = function (v) { return y0 - (v - yr[0]) / (yr[1] - yr[0]) * (y0 - y1); };
    var sy2 = yr2 ? function (v) { return y0 - (v - yr2[0]) / (yr2[1] - yr2[0]) * (y0 - y1); } : null;
    g.strokeStyle = "#eceef2"; g.fillStyle = "#6b7385"; g.lineWidth = 1;
    g.textAlign = "right"; g.textBaseline = "middle";
    ticks(yr[0], yr[1], 4).forEach(function (v) {
      var y = Math.round(sy(v)) + 0.5;
      g.beginPath(); g.moveTo(x0, y); g.lineTo(x1, y); g.stroke();
      g.fillText((opt.yfmt || fmt)(v), x0 - 4, y);
    });
    if (yr2) {
      g.textAlign = "left";
      ticks(yr2[0], yr2[1], 4).forEach(function (v) { g.fillText((opt.y2fmt || fmt)(v), x1 + 4, sy2(v)); });
    }
    g.textAlign = "center"; g.textBaseline = "top";
    var xt = ticks(xr[0], xr[1], Math.max(2, Math.floor((x1 - x0) / 80)));
    var xstep = xt.length > 1 ? xt[1] - xt[0] : 1;
    xt.forEach(function (v) { g.fillText((opt.xfmt || fmt)(v, xstep), sx(v), y0 + 4); });
    g.strokeStyle = "#c9ced8";
    g.beginPath(); g.moveTo(x0, y1); g.lineTo(x0, y0 + 0.5); g.lineTo(x1, y0 + 0.5); g.stroke();
    return { sx: sx, sy: sy, sy2: sy2, x0: x0, x1: x1, y0: y0, y1: y1 };
  }

  function legend(c, items, f) {
    var g = c.g, x = f.x0 + 6, y = f.y1 + 2;
    g.textAlign = "left"; g.textBaseline = "top";
    items.forEach(function (it) {
      if (!it.label) return;
      g.fillStyle = it.color; g.fillRect(x, y + 3, 8, 3);
      g.fillStyle = "#3a4152"; g.fillText(it.label, x + 11, y);
      x += g.measureText(it.label).width + 22;
    });
  }

  function empty(canvas, c, msg) {
    c.g.fillStyle = "#9aa1b1"; c.g.textAlign = "center"; c.g.textBaseline = "middle";
    c.g.fillText(msg || "no data yet", c.w / 2, c.h / 2);
    canvas.dataset.points = "0";
    return 0;
  }

  // line draws series [{x, y, color, label, right, width, dots}] with
  // optional horizontal lines hlines [{y, color, label, right}], vertical
  // markers vmarks [{x, color, label}] and point overlays points
  // [{x, y, color, r}]. Options: xfmt, yfmt, y2fmt, ymin, ymax, y2min,
  // y2max, xmin, xmax, empty.
  function line(canvas, opt) {
    var c = setup(canvas);
    var left = opt.series.filter(function (s) { return !s.right; });
    var right = opt.series.filter(function (s) { return s.right; });
    var n = 0;
    opt.series.forEach(function (s) { n += s.x.length; });
    if (n === 0) return empty(canvas, c, opt.empty);
    var xs = opt.series.map(function (s) { return s.x; });
    var xr = extent(xs, opt.xmin, opt.xmax);
    var hl = (opt.hlines || []).filter(function (h) { return !h.right && finite(h.y); }).map(function (h) { return h.y; });
    var yr = extent(left.map(function (s) { return s.y; }).concat([hl]), opt.ymin, opt.ymax);
    yr[1] += (yr[1] - yr[0]) * 0.12; // room for the legend
    var yr2 = null;
    if (right.length) {
      yr2 = extent(right.map(function (s) { return s.y; }), opt.y2min, opt.y2max);
      yr2[1] += (yr2[1] - yr2[0]) * 0.12;
    }
    var f = frame(c, xr, yr, opt, yr2), g = c.g;
    (opt.vmarks || []).forEach(function (m) {
      var x = Math.round(f.sx(m.x)) + 0.5;
      if (x < f.x0 || x > f.x1) return;
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
    legend(c, opt.series.concat(opt.hlines || []).concat(opt.points || []), f);
    canvas.dataset.points = String(n);
    return n;
  }

  // scatter draws x against y with a colour per point (colors[i]) and an
  // optional legend [{label, color}].
  function scatter(canvas, opt) {
    var c = setup(canvas);
    var n = opt.x.length;
    if (n === 0) return empty(canvas, c, opt.empty);
    var xr = extent([opt.x]), yr = extent([opt.y]);
    var px = (xr[1] - xr[0]) * 0.04, py = (yr[1] - yr[0]) * 0.04;
    xr = [xr[0] - px, xr[1] + px];
    yr = [yr[0] - py, yr[1] + py + (yr[1] - yr[0]) * 0.1];
    var f = frame(c, xr, yr, opt), g = c.g;
    for (var i = 0; i < n; i++) {
      g.fillStyle = opt.colors[i];
      g.beginPath(); g.arc(f.sx(opt.x[i]), f.sy(opt.y[i]), 2, 0, 7); g.fill();
    }
    legend(c, opt.legend || [], f);
    canvas.dataset.points = String(n);
    return n;
  }

  // bars draws one bar per value, labelled below, with an optional line
  // (cumulative share, right axis 0..1).
  function bars(canvas, opt) {
    var c = setup(canvas);
    var n = opt.values.length;
    if (n === 0) return empty(canvas, c, opt.empty);
    var yr = extent([opt.values], 0);
    yr[1] *= 1.12;
    var g = c.g, x0 = PAD.l, x1 = c.w - (opt.cum ? PAD.r : 10);
    var f = frame(c, [0, n], yr, { yfmt: opt.yfmt, xfmt: function () { return ""; }, y2fmt: function (v) { return Math.round(v * 100) + "%"; } }, opt.cum ? [0, 1.12] : null);
    var bw = (x1 - x0) / n;
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
    legend(c, opt.legend || [], f);
    canvas.dataset.points = String(n);
    return n;
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

  return { line: line, scatter: scatter, bars: bars, color: color, ramp: ramp, fmt: fmt };
})();
