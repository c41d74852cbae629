/* hlo-opt HTML page: one HLO module, laid out in the browser by Graphviz (viz-global.js),
 * one view at a time, with no network access.
 *
 * The data element (#hlo-graph-data, JSON or gzip+base64) is written by
 * hlo_opt/dump/html.py graph_json(): the module's text and the drawing rules, from which
 * hlo_model.js (hloBuildModel) builds this model:
 *   comps[c]: n name, k kind (entry|fusion|called|trivial|unused), r root instruction,
 *             i instructions in post order, h header line, f fusion instruction calling it,
 *             ca non-fusion callers, tr trivial-computation name ("add", ...)
 *   insts[i]: n name, c computation, op opcode, l HTML-like label, s colour scheme,
 *             sh node shape (default rect), t tooltip, o operands, k control predecessors,
 *             m merged into its users, h hidden (inlined constant), ne no edge may start
 *             here, b big (filled arrowhead), f fused computation, cl cluster label,
 *             p parameter number, es shape text for out-edges, txt HLO text line,
 *             cs called (non-fusion, non-trivial) computations, d DOT node id when it
 *             is not the name (two computations using one name); l, t and cl are made
 *             on demand: read them through styled(i)
 * The DOT written here matches hlo_opt/dump/dot.py (node_attrs / edge_attrs); only
 * view selection (collapsed or expanded fusions, parameters cloned per use, the
 * neighbourhood cap) is decided here.
 *
 * Layout runs in a Web Worker (Graphviz built from the same script text) under a time
 * limit: a view still not laid out after FALLBACK_AFTER_MS is drawn at once by a simple
 * layered layout here (kept if Graphviz misses LAYOUT_LIMIT_MS, replaced if it finishes).
 * Views are budgeted: at most CAP nodes (a neighbourhood beyond), at most FANIN_CAP
 * operands per node (the rest collapse into one "more operands" node), edge labels only
 * up to EDGE_LABEL_BUDGET edges; what a view leaves out is said under the graph.
 *
 * After every layout <body> carries data-rendered-nodes (SVG nodes drawn),
 * data-render-ms (performance.now() when the first view was on screen),
 * data-layout-ms (the last layout), data-view, data-view-mode, data-layout
 * (graphviz|fallback) and data-left-out; on failure data-render-error.  Tests and
 * benchmarks/html_bench.py read these.
 */
(function () {
  'use strict';

  var body = document.body;
  var D = null, insts = null, comps = null, users = null, byName = null, compByName = null;
  var viz = null;
  var CAP = 500;
  var MAX_USERS_TO_FOLLOW = 16;           // XLA's kMaxUsersToRender
  var MIN_READABLE_SCALE = 0.6;           // initial zoom never smaller than this
  var FANIN_CAP = 24;                     // operands drawn per node; the rest: one node
  var EDGE_LABEL_BUDGET = 250;            // edges beyond this: no shape labels (dot slows)
  var FALLBACK_AFTER_MS = 2500;           // then draw the simple layout meanwhile
  var LAYOUT_LIMIT_MS = 20000;            // then stop Graphviz (the worker is terminated)
  (function () {  // ?fallback_ms=N&layout_limit_ms=N (tests and slow machines)
    var m = /[?&]fallback_ms=(\d+)/.exec(location.search);
    if (m) FALLBACK_AFTER_MS = Number(m[1]);
    m = /[?&]layout_limit_ms=(\d+)/.exec(location.search);
    if (m) LAYOUT_LIMIT_MS = Number(m[1]);
  })();
  var state = {
    comp: -1, expanded: new Set(), centre: null, selected: null,
    svg: null, vb: null, home: null, view: null, firstRenderDone: false,
    limit: 200
  };
  var svgCache = new Map();
  var marks = {};
  function markTime(name) {
    marks[name] = Math.round(performance.now());
    body.setAttribute('data-timings', Object.keys(marks).map(function (k) {
      return k + '=' + marks[k];
    }).join(' '));
  }

  function $(id) { return document.getElementById(id); }

  function esc(s) {
    return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  }

  function q(s) {  // a DOT double-quoted string
    return '"' + String(s).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
  }

  function fail(err) {
    var msg = (err && err.message) ? err.message : String(err);
    body.setAttribute('data-render-error', msg);
    showMessage('Could not draw this view: ' + msg + ' (the HLO text is still on the right).');
    if (window.console) console.error(err);
  }

  function showMessage(text) {
    var el = $('graph-message');
    el.textContent = text || '';
    el.style.display = text ? 'block' : 'none';
  }

  function setStatus(text) { $('status').textContent = text; }

  // ---- data ---------------------------------------------------------------------------
  function loadData() {
    var el = $('hlo-graph-data');
    var enc = el.getAttribute('data-encoding');
    var text = el.textContent;
    if (enc !== 'gzip+base64') return Promise.resolve(JSON.parse(text));
    var bin = atob(text.trim());
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text().then(JSON.parse);
  }

  function index() {
    insts = D.insts;
    comps = D.comps;
    CAP = D.cap || CAP;
    state.limit = Math.min(CAP, D.neighbourhood || state.limit);
    users = new Array(insts.length);
    byName = new Map();
    compByName = new Map();
    for (var i = 0; i < insts.length; i++) users[i] = [];
    for (i = 0; i < insts.length; i++) {
      var x = insts[i];
      for (var j = 0; j < x.o.length; j++) {
        var u = users[x.o[j]];
        if (u[u.length - 1] !== i) u.push(i);
      }
      var list = byName.get(x.n);
      if (list) list.push(i); else byName.set(x.n, [i]);
    }
    for (var c = 0; c < comps.length; c++) compByName.set(comps[c].n, c);
  }

  function nid(i) { return insts[i].d || insts[i].n; }

  // insts[i] with its label, tooltip and cluster label (hlo_model.js makes them on demand)
  function styled(i) { return D.style ? D.style(i) : insts[i]; }

  function isFusionWithBody(i) { return insts[i].f !== undefined; }

  // The non-fusion computation whose view shows instruction i, and the fusions to open.
  function viewPath(i) {
    var c = insts[i].c, chain = [];
    while (comps[c].f !== undefined && c !== state.comp) {
      chain.push(comps[c].f);
      c = insts[comps[c].f].c;
    }
    return { comp: c, fusions: chain };
  }

  // ---- views --------------------------------------------------------------------------
  function countNodes(c, expanded) {
    var n = 0, list = comps[c].i;
    for (var k = 0; k < list.length; k++) n += weight(list[k], expanded);
    return n;
  }

  function weight(i, expanded) {
    var x = insts[i];
    if (x.h || x.m) return 0;
    if (x.f !== undefined && expanded.has(i)) return countNodes(x.f, expanded);
    return 1;
  }

  function allFusions(c, into) {
    var list = comps[c].i;
    for (var k = 0; k < list.length; k++) {
      var i = list[k];
      if (isFusionWithBody(i)) { into.add(i); allFusions(insts[i].f, into); }
    }
    return into;
  }

  function defaultExpansion(c) {
    if (D.topLevel) return new Set();
    var all = allFusions(c, new Set());
    return countNodes(c, all) <= CAP ? all : new Set();
  }

  // XLA's MakeNodeRadiusAroundFilter, grown one radius at a time while the view stays
  // within `limit` nodes (a first layer bigger than that is cut at CAP).
  function neighbourhood(c, centre, expanded, limit) {
    var seen = new Set([centre]), order = [centre];
    var count = weight(centre, expanded), radius = 0, frontier = [centre];
    var usersOmitted = new Set(), operandsOmitted = new Set(), truncated = false, more = false;
    while (frontier.length) {
      var next = [];
      for (var a = 0; a < frontier.length; a++) {
        var i = frontier[a], x = insts[i], nbrs = [];
        if (i === centre || x.op !== 'tuple') {
          var os = x.o;
          if (os.length > FANIN_CAP) { operandsOmitted.add(i); os = os.slice(0, FANIN_CAP); }
          nbrs = nbrs.concat(os, x.k || []);
        }
        if (x.op !== 'constant') {
          if (users[i].length > MAX_USERS_TO_FOLLOW) usersOmitted.add(i);
          else nbrs = nbrs.concat(users[i]);
        }
        for (var b = 0; b < nbrs.length; b++) {
          var j = nbrs[b];
          if (!seen.has(j) && insts[j].c === c) { seen.add(j); next.push(j); }
        }
      }
      if (!next.length) break;
      var layer = 0;
      for (a = 0; a < next.length; a++) layer += weight(next[a], expanded);
      if (count + layer > limit) {
        // the layer does not fit: take what does (in order), say the rest is left out
        more = true;
        var added = 0;
        for (a = 0; a < next.length; a++) {
          var w = weight(next[a], expanded);
          if (count + w > limit) { truncated = true; continue; }
          count += w;
          order.push(next[a]);
          added += w;
        }
        if (added) radius += 1;
        break;
      }
      count += layer;
      order = order.concat(next);
      radius += 1;
      frontier = next;
    }
    return { set: new Set(order), radius: radius, centre: centre, count: count,
             usersOmitted: usersOmitted, operandsOmitted: operandsOmitted,
             truncated: truncated, more: more };
  }

  // Builds the DOT text of a view; mirrors dot.py's DotWriter.
  function buildDot(c, expanded, nb) {
    var items = [], drawn = new Set(), edges = [], needsEdges = [], moreOperands = [];
    var plain = { nodes: [], edges: [] };  // the same view for the fallback layout
    var topSet = nb ? nb.set : null;

    function collect(cc, top, into) {
      var list = comps[cc].i;
      for (var k = 0; k < list.length; k++) {
        var i = list[k], x = insts[i];
        if (top && topSet && !topSet.has(i)) continue;
        if (x.h || x.m) continue;
        if (x.f !== undefined && expanded.has(i)) {
          var sub = [];
          into.push({ cluster: i, items: sub });
          collect(x.f, false, sub);
        } else {
          into.push({ node: i });
          drawn.add(i);
          needsEdges.push(i);
        }
      }
    }
    collect(c, true, items);

    function resolve(i) {
      var x = insts[i];
      if (x.op === 'get-tuple-element' && x.o.length) i = x.o[0];
      var guard = 0;
      while (insts[i].f !== undefined && expanded.has(i) && guard++ < 1000) i = comps[insts[i].f].r;
      return i;
    }

    function addEdge(from, to, index, control) {
      var src = resolve(from);
      if (!drawn.has(src) || insts[src].ne) return;
      edges.push({ src: src, dst: to, index: index, control: control,
                   shape: insts[from].es || '', big: !!insts[src].b });
    }

    for (var e = 0; e < needsEdges.length; e++) {
      var i = needsEdges[e], x = insts[i];
      var fusionOfParent = comps[x.c].f;
      if (x.op === 'parameter' && fusionOfParent !== undefined) {
        if (x.c !== c) {
          var operand = insts[fusionOfParent].o[x.p];
          if (operand !== undefined) addEdge(operand, i, null, false);
        }
        continue;
      }
      var many = x.o.length > 1, shown = Math.min(x.o.length, FANIN_CAP);
      for (var j = 0; j < shown; j++) addEdge(x.o[j], i, many ? j : null, false);
      if (x.o.length > shown) moreOperands.push({ node: i, n: x.o.length - shown });
      var ctrl = x.k || [];
      for (j = 0; j < ctrl.length; j++) addEdge(ctrl[j], i, null, true);
    }

    // Clone parameters of the viewed computation per use: long edges from them are what
    // makes layered layouts explode.
    var outCount = new Map();
    edges.forEach(function (ed) {
      if (!ed.control && insts[ed.src].op === 'parameter' && insts[ed.src].c === c)
        outCount.set(ed.src, (outCount.get(ed.src) || 0) + 1);
    });
    var cloned = new Set(), clones = [];
    outCount.forEach(function (n, src) { if (n > 1) cloned.add(src); });
    edges.forEach(function (ed, k) {
      if (!ed.control && cloned.has(ed.src)) {
        ed.srcId = nid(ed.src) + '#' + k;
        clones.push({ node: ed.src, id: ed.srcId, k: k });
      } else {
        ed.srcId = nid(ed.src);
      }
    });

    // Emphasis as XLA's radius filter draws it: the centre dark red, nodes with
    // operands or users left out dashed.
    var schemeOf = function (i) { return insts[i].s; };
    if (nb) {
      schemeOf = function (i) {
        if (i === nb.centre) return 'dark_red';
        if (insts[i].c !== c) return insts[i].s;
        if (nb.usersOmitted.has(i)) return 'dashed';
        var x = insts[i], k;
        for (k = 0; k < x.o.length; k++) {
          var o = x.o[k];
          if (!topSet.has(o) && !insts[o].h) return 'dashed';
        }
        var us = users[i];
        for (k = 0; k < us.length; k++) if (!topSet.has(us[k])) return 'dashed';
        return insts[i].s;
      };
    }

    var out = [];
    var comp = comps[c];
    var title = esc(D.title || D.module) + '<br/>Computation ' + esc(comp.n);
    if (comp.f !== undefined) title += ' (in fusion instruction ' + esc(insts[comp.f].n) + ')';
    else if (comp.k === 'entry') title += '<br/>ENTRY computation';
    if (nb) title += '<br/>neighbourhood of ' + esc(insts[nb.centre].n) + ', radius ' + nb.radius;
    out.push('digraph G {\nrankdir = TB;\ncompound = true;\nlabel = <<b>' + title +
             '</b>>;\nlabelloc = t;\ntooltip = " ";\n' + D.graphDefaults + '\n');

    function nodeStmt(i, id, extraClass, domId) {
      var x = styled(i);
      var st = D.schemes[schemeOf(i)];
      plain.nodes.push({ id: id, dom: domId, cls: 'i' + i + extraClass, name: x.n, op: x.op,
                         fill: st[1], stroke: st[2], color: st[3] });
      return q(id) + ' [label=<' + x.l + '>, shape=' + (x.sh || 'rect') +
        ', tooltip=' + q(x.t || ' ') + ', style="' + st[0] + '", fontcolor="' + st[3] +
        '", color="' + st[2] + '", fillcolor="' + st[1] + '", id="' + domId +
        '", class="i' + i + extraClass + '"];\n';
    }

    function emit(list) {
      for (var k = 0; k < list.length; k++) {
        var it = list[k];
        if (it.cluster !== undefined) {
          var f = it.cluster, fx = styled(f);
          out.push('subgraph ' + q('cluster_' + comps[fx.f].n) + ' {\n' + D.clusterStyle +
                   '; id="f' + f + '"; class="i' + f + ' fusion-cluster";\nlabel = <' +
                   fx.cl + '>;\nlabelloc = t;\ntooltip = " ";\n');
          emit(it.items);
          out.push('}\n');
        } else if (!cloned.has(it.node)) {
          out.push(nodeStmt(it.node, nid(it.node), '', 'n' + it.node));
        }
      }
    }
    emit(items);
    clones.forEach(function (cl) {
      out.push(nodeStmt(cl.node, cl.id, ' clone', 'n' + cl.node + 'c' + cl.k));
    });

    var root = resolve(comp.r);
    var rootTag = null;
    if (drawn.has(root) && insts[root].op !== 'constant' && !insts[root].ne) {
      rootTag = 'ROOT:' + comp.n;
      var bs = D.schemes.brown;
      out.push(q(rootTag) + ' [label=<ROOT>, shape=circle, tooltip=" ", style="' + bs[0] +
               '", fontcolor="' + bs[3] + '", color="' + bs[2] + '", fillcolor="' + bs[1] +
               '", id="root"];\n');
      plain.nodes.push({ id: rootTag, dom: 'root', cls: 'root', name: 'ROOT', op: '',
                         fill: bs[1], stroke: bs[2], color: bs[3] });
    }
    moreOperands.forEach(function (m) {
      var id = 'more:' + nid(m.node), label = '\u2026 ' + m.n + ' more operands';
      out.push(q(id) + ' [label=' + q(label) + ', shape=note, style="dashed", tooltip=' +
               q(label + ' of ' + insts[m.node].n + ' (see the text)') + ', id="m' + m.node +
               '", class="more"];\n' + q(id) + ' -> ' + q(nid(m.node)) +
               ' [style="dashed" arrowhead=empty class="t' + m.node + '"];\n');
      plain.nodes.push({ id: id, dom: 'm' + m.node, cls: 'more', name: label, op: '',
                         fill: 'white', stroke: '#9e9e9e', color: '#616161' });
      plain.edges.push({ src: id, dst: nid(m.node), id: 'me' + m.node, cls: 't' + m.node });
    });
    var labels = edges.length <= EDGE_LABEL_BUDGET;
    edges.forEach(function (ed, k) {
      var a = insts[ed.src].n, b = insts[ed.dst].n, head = ed.big ? 'normal' : 'empty';
      var attrs;
      if (ed.control) {
        attrs = 'arrowhead=' + head + ' tooltip=' + q(a + ' -> ' + b) +
          ' style="dotted" color="gray" label="ctrl"';
      } else {
        attrs = 'arrowhead=' + head + ' tooltip=' + q(a + ' -> ' + b + ': ' + ed.shape);
        if (ed.shape && labels) attrs += ' xlabel=' + q(ed.shape);
        if (ed.index !== null && labels) attrs += ' headlabel="' + ed.index + '" labeldistance=2';
      }
      out.push(q(ed.srcId) + ' -> ' + q(nid(ed.dst)) + ' [' + attrs + ' id="e' + k + '" class="s' +
               ed.src + ' t' + ed.dst + '"];\n');
      plain.edges.push({ src: ed.srcId, dst: nid(ed.dst), id: 'e' + k,
                         cls: 's' + ed.src + ' t' + ed.dst, control: ed.control });
    });
    if (rootTag) {
      out.push(q(nid(root)) + ' -> ' + q(rootTag) + ' [tooltip=" " class="s' + root + '"];\n');
      plain.edges.push({ src: nid(root), dst: rootTag, id: 'er', cls: 's' + root });
    }
    out.push('}\n');
    return { dot: out.join(''), nodes: drawn.size + clones.length - cloned.size, plain: plain,
             edges: edges.length, labels: labels, moreOperands: moreOperands.length };
  }

  // ---- layout and display ---------------------------------------------------------------
  function viewKey(c, expanded, nb) {
    return c + '|' + Array.from(expanded).sort(function (a, b) { return a - b; }).join(',') +
      '|' + (nb ? nb.centre + ':' + nb.radius + ':' + nb.set.size : '');
  }

  // ---- layout: Graphviz in a worker, a time limit, a layered fallback -------------------
  // The worker runs the page's own Graphviz script: viz-global.js is wrapped by html.py in
  // function hloVizSource() {...}, whose text (Function.prototype.toString) becomes the
  // worker's code, so file:// pages need no extra file or request.
  var WORKER_GLUE = '\nvar hloViz = Viz.instance();\n' +
    'onmessage = function (e) { hloViz.then(function (viz) { var r;\n' +
    '  try { r = { id: e.data.id, svg: viz.renderString(e.data.dot, { format: "svg" }) }; }\n' +
    '  catch (err) { r = { id: e.data.id, error: String(err && err.message || err) }; }\n' +
    '  postMessage(r); }, function (err) { postMessage({ id: e.data.id, error: String(err) }); }); };\n';
  var layouter = { worker: null, pending: new Map(), seq: 0, broken: false };

  function startWorker() {
    if (layouter.broken) return null;
    try {
      if (typeof hloVizSource !== 'function' || typeof Worker === 'undefined') throw new Error('no worker');
      var code = '(' + hloVizSource.toString() + ')();\n' + WORKER_GLUE;
      var url = URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
      var w = new Worker(url);
      w.onmessage = function (e) {
        var p = layouter.pending.get(e.data.id);
        if (!p) return;
        layouter.pending.delete(e.data.id);
        clearTimeout(p.timer);
        if (e.data.error) p.reject(new Error(e.data.error)); else p.resolve(e.data.svg);
      };
      w.onerror = function (e) {
        e.preventDefault();
        stopWorker(new Error('the layout worker failed: ' + (e.message || 'unknown error')));
      };
      layouter.worker = w;
      return w;
    } catch (err) {
      layouter.broken = true;  // lay out on the main thread instead
      return null;
    }
  }

  function stopWorker(err) {
    if (layouter.worker) layouter.worker.terminate();
    layouter.worker = null;
    layouter.pending.forEach(function (p) { clearTimeout(p.timer); p.reject(err); });
    layouter.pending.clear();
  }

  // Resolves with SVG text; rejects with err.timedOut after limitMs.
  function layoutDot(dot, limitMs) {
    var w = layouter.worker || startWorker();
    if (!w) {
      return (viz ? Promise.resolve(viz) : Viz.instance().then(function (v) { viz = v; return v; }))
        .then(function (v) { return v.renderString(dot, { format: 'svg' }); });
    }
    return new Promise(function (resolve, reject) {
      var id = ++layouter.seq;
      var timer = setTimeout(function () {
        var err = new Error('Graphviz did not finish within ' + (limitMs >= 1000 ?
          Math.round(limitMs / 1000) + ' s' : limitMs + ' ms'));
        err.timedOut = true;
        stopWorker(err);
      }, limitMs);
      layouter.pending.set(id, { resolve: resolve, reject: reject, timer: timer });
      w.postMessage({ id: id, dot: dot });
    });
  }

  // A layered drawing computed here in linear time: rank = longest path from the view's
  // sources, order in a rank by the mean position of operands.  Same ids and classes as
  // Graphviz's output, so selection and highlighting work on it.
  function fallbackSvg(plain, title) {
    var W = 150, H = 30, GX = 24, GY = 46, pos = new Map(), k;
    var nodes = plain.nodes, rank = new Map(), preds = new Map();
    nodes.forEach(function (n) { rank.set(n.id, 0); preds.set(n.id, []); });
    plain.edges.forEach(function (e) {
      if (preds.has(e.dst) && rank.has(e.src) && e.src !== e.dst) preds.get(e.dst).push(e.src);
    });
    for (var pass = 0; pass < 2; pass++) {  // nodes come operands-first: two sweeps suffice mostly
      nodes.forEach(function (n) {
        var r = 0;
        preds.get(n.id).forEach(function (p) { r = Math.max(r, rank.get(p) + 1); });
        rank.set(n.id, Math.min(r, nodes.length));
      });
    }
    // sources (parameters, constants) sit just above their first user, not all on top
    var succ = new Map();
    plain.edges.forEach(function (e) {
      if (rank.has(e.src) && rank.has(e.dst) && e.src !== e.dst) {
        var r = rank.get(e.dst);
        succ.set(e.src, Math.min(succ.has(e.src) ? succ.get(e.src) : r, r));
      }
    });
    nodes.forEach(function (n) {
      if (!preds.get(n.id).length && succ.has(n.id)) rank.set(n.id, Math.max(succ.get(n.id) - 1, 0));
    });
    var layers = [];
    nodes.forEach(function (n) { var r = rank.get(n.id); (layers[r] = layers[r] || []).push(n); });
    var widest = 0;
    layers.forEach(function (layer, r) {
      if (!layer) return;
      layer.forEach(function (n) {
        var ps = preds.get(n.id), sum = 0, cnt = 0;
        ps.forEach(function (p) { if (pos.has(p)) { sum += pos.get(p).x; cnt++; } });
        n.key = cnt ? sum / cnt : 1e9;
      });
      layer.sort(function (a, b) { return a.key - b.key; });
      layer.forEach(function (n, i) { pos.set(n.id, { x: i * (W + GX), y: 40 + r * (H + GY) }); });
      widest = Math.max(widest, layer.length);
    });
    var width = Math.max(widest * (W + GX), 300), height = 40 + layers.length * (H + GY);
    var out = ['<svg xmlns="http://www.w3.org/2000/svg" viewBox="-10 0 ' + (width + 20) + ' ' + height +
               '"><defs><marker id="fa" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" ' +
               'markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#616161"/></marker></defs>' +
               '<g class="graph"><text x="0" y="16" font-size="13" font-weight="bold">' + esc(title) +
               '</text>'];
    plain.edges.forEach(function (e) {
      var a = pos.get(e.src), b = pos.get(e.dst);
      if (!a || !b) return;
      out.push('<g class="edge ' + e.cls + '" id="' + e.id + '"><path d="M' + (a.x + W / 2) + ',' +
               (a.y + H) + 'L' + (b.x + W / 2) + ',' + b.y + '" fill="none" stroke="#757575"' +
               (e.control ? ' stroke-dasharray="3,3"' : '') + ' marker-end="url(#fa)"/></g>');
    });
    for (k = 0; k < nodes.length; k++) {
      var n = nodes[k], p = pos.get(n.id), label = n.name.length > 22 ? n.name.slice(0, 21) + '\u2026' : n.name;
      out.push('<g class="node ' + n.cls + '" id="' + esc(n.dom) + '"><title>' + esc(n.name) +
               '</title><path d="M' + p.x + ',' + p.y + 'h' + W + 'v' + H + 'h-' + W + 'z" fill="' +
               n.fill + '" stroke="' + n.stroke + '"/><text x="' + (p.x + W / 2) + '" y="' +
               (p.y + H / 2 + 4) + '" text-anchor="middle" font-size="11" fill="' + n.color + '">' +
               esc(label) + '</text></g>');
    }
    out.push('</g></svg>');
    return out.join('');
  }

  function parseSvg(text) {
    var svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    svg = document.importNode(svg, true);
    svg.removeAttribute('width');
    svg.removeAttribute('height');
    return svg;
  }

  var renderToken = 0, renderPending = false, idleWaiters = [];

  // Resolves once the view asked for last is on screen (tests wait on it after a click).
  function idle() {
    return renderPending ? new Promise(function (res) { idleWaiters.push(res); }) : Promise.resolve();
  }

  function settle() {
    renderPending = false;
    var waiters = idleWaiters;
    idleWaiters = [];
    waiters.forEach(function (res) { res(); });
  }

  function renderView() {
    var c = state.comp;
    var nb = null;
    var total = countNodes(c, state.expanded);
    if (state.centre !== null || total > CAP) {
      var centre = state.centre !== null ? state.centre : comps[c].r;
      nb = neighbourhood(c, centre, state.expanded, state.limit);
      state.centre = centre;
    }
    var key = viewKey(c, state.expanded, nb);
    var cached = svgCache.get(key);
    var token = ++renderToken;
    var t0 = performance.now();
    if (cached) { showView(cached.svg, cached.built, c, nb, total, t0, cached.how); return; }
    renderPending = true;
    var built = buildDot(c, state.expanded, nb);
    state.lastDot = built.dot;
    if (!state.firstRenderDone) markTime('dot');
    setStatus('laying out ' + comps[c].n + ' (' + built.nodes + ' nodes)\u2026');
    var fallbackShown = false;
    var early = setTimeout(function () {
      if (token !== renderToken) return;
      fallbackShown = true;
      showView(parseSvg(fallbackSvg(built.plain, comps[c].n)), built, c, nb, total, t0, 'fallback');
    }, FALLBACK_AFTER_MS);
    layoutDot(built.dot, LAYOUT_LIMIT_MS).then(function (text) {
      clearTimeout(early);
      var svg = parseSvg(text);
      svgCache.set(key, { svg: svg, built: built, how: 'graphviz' });
      if (token !== renderToken) return;
      var keep = fallbackShown ? { x: state.vb.x, y: state.vb.y } : null;
      showView(svg, built, c, nb, total, t0, 'graphviz', keep);
    }, function (err) {
      clearTimeout(early);
      if (token !== renderToken) return;
      if (!err || !err.timedOut) { fail(err); settle(); return; }
      var svg = fallbackShown ? state.svg : parseSvg(fallbackSvg(built.plain, comps[c].n));
      svgCache.set(key, { svg: svg, built: built, how: 'fallback' });
      showView(svg, built, c, nb, total, t0, 'fallback');
      setNote(leftOut(built, nb, total, 'fallback', err.message));
    });
  }

  function leftOut(built, nb, total, how, why) {
    var notes = [];
    if (nb) {
      notes.push('showing ' + nb.count + ' of ' + total + ' nodes: the neighbourhood of ' +
                 insts[nb.centre].n + ' (radius ' + nb.radius + (nb.truncated ? ', cut at the view budget' : '') +
                 '); select an instruction to recentre');
      if (nb.usersOmitted.size) notes.push('users of ' + nb.usersOmitted.size + ' instruction(s) with more than ' +
                                           MAX_USERS_TO_FOLLOW + ' users not followed');
    }
    if (built.moreOperands) notes.push(built.moreOperands + ' operand list(s) longer than ' + FANIN_CAP +
                                       ' collapsed into "\u2026 more operands" nodes');
    if (!built.labels) notes.push('edge shape labels left out (' + built.edges + ' edges)');
    if (how === 'fallback') notes.push(why ? why + ': a simple layered drawing is shown'
                                       : 'Graphviz is still laying out: a simple layered ' +
                                         'drawing is shown meanwhile');
    return notes;
  }

  function setNote(notes) {
    var el = $('graph-note');
    if (el) { el.textContent = notes.length ? 'Left out: ' + notes.join('; ') + '.' : ''; }
    body.setAttribute('data-left-out', notes.join('; '));
  }

  function showView(svg, built, c, nb, total, t0, how, keepOrigin) {
    var layoutMs = performance.now() - t0;
    install(svg, nb ? nb.centre : null, keepOrigin);
    var drawnNodes = svg.querySelectorAll('g.node').length;
    state.view = { comp: c, nb: nb, total: total };
    var mode = nb ? 'neighbourhood' : state.expanded.size ? 'expanded' :
      comps[c].i.some(function (i) { return insts[i].op === 'fusion'; }) ? 'collapsed' : 'full';
    var status = comps[c].n + ': ' + drawnNodes + ' nodes';
    if (nb) status += ' (neighbourhood of ' + insts[nb.centre].n + ', ' + total + ' in all)';
    status += ' \u00b7 ' + (how === 'fallback' ? 'simple layout' : 'layout') + ' ' + Math.round(layoutMs) + ' ms';
    setStatus(status);
    setNote(leftOut(built, nb, total, how));
    showMessage(drawnNodes ? '' : 'Nothing to draw in this view (see the text).');
    $('btn-wider').disabled = !(nb && nb.more && state.limit < CAP);
    $('btn-narrower').disabled = !(nb && nb.radius > 1);
    body.setAttribute('data-view', comps[c].n);
    body.setAttribute('data-view-mode', mode);
    body.setAttribute('data-layout', how);
    body.setAttribute('data-layout-ms', String(Math.round(layoutMs)));
    body.setAttribute('data-rendered-nodes', String(drawnNodes));
    if (!state.firstRenderDone) {
      state.firstRenderDone = true;
      body.setAttribute('data-render-ms', String(Math.round(performance.now())));
      markTime('shown');
    }
    applyHighlight();
    settle();
  }

  function install(svg, centre) {  // (a third argument is accepted and unused)
    var host = $('graph');
    host.textContent = '';
    host.appendChild(svg);
    state.svg = svg;
    if (!svg.hloHome) {  // the laid-out extent; the viewBox attribute changes with zoom
      var vb = svg.viewBox.baseVal;
      svg.hloHome = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
    }
    state.home = svg.hloHome;
    setViewBox(state.home);
    // A big graph fitted into the pane is unreadable: start at a readable scale, on the
    // neighbourhood's centre or at the top, and let "fit" show the whole.
    var box = host.getBoundingClientRect();
    if (!box.width || !box.height) return;
    var fitScale = Math.min(box.width / state.home.w, box.height / state.home.h);
    if (fitScale >= MIN_READABLE_SCALE) return;
    var s = Math.max(Math.min(box.width / state.home.w, 1), MIN_READABLE_SCALE);
    var w = box.width / s, h = box.height / s;
    // without a centre: the top-left corner (never a view that cuts the graph's left side)
    var cx = state.home.x + w / 2, cy = state.home.y + h / 2;
    var el = centre !== null && centre !== undefined ? svg.querySelector('.node.i' + centre) : null;
    if (el) {
      var r = el.getBoundingClientRect();
      var p = toSvgPoint(r.left + r.width / 2, r.top + r.height / 2);
      cx = p.x;
      cy = p.y;
    }
    // keep the first view inside the drawing: never a blank margin where graph could be
    var home = state.home;
    var x = w >= home.w ? home.x + (home.w - w) / 2 : Math.min(Math.max(cx - w / 2, home.x), home.x + home.w - w);
    var y = h >= home.h ? home.y : Math.min(Math.max(cy - h / 2, home.y), home.y + home.h - h);
    setViewBox({ x: x, y: y, w: w, h: h });
  }

  // ---- pan and zoom ---------------------------------------------------------------------
  function setViewBox(v) {
    state.vb = { x: v.x, y: v.y, w: v.w, h: v.h };
    if (state.svg) state.svg.setAttribute('viewBox', v.x + ' ' + v.y + ' ' + v.w + ' ' + v.h);
  }

  function toSvgPoint(clientX, clientY) {
    var m = state.svg.getScreenCTM();
    if (!m) return { x: state.vb.x + state.vb.w / 2, y: state.vb.y + state.vb.h / 2 };
    var p = state.svg.createSVGPoint();
    p.x = clientX;
    p.y = clientY;
    var r = p.matrixTransform(m.inverse());
    return { x: r.x, y: r.y };
  }

  function zoomAt(factor, clientX, clientY) {
    if (!state.svg) return;
    var rect = state.svg.getBoundingClientRect();
    if (clientX === undefined) { clientX = rect.left + rect.width / 2; clientY = rect.top + rect.height / 2; }
    var p = toSvgPoint(clientX, clientY), v = state.vb;
    var w = v.w / factor, h = v.h / factor;
    var maxW = state.home.w * 4, minW = 20;
    if (w > maxW || w < minW) return;
    setViewBox({ x: p.x - (p.x - v.x) / factor, y: p.y - (p.y - v.y) / factor, w: w, h: h });
  }

  function fit() { if (state.home) setViewBox(state.home); }

  function bindPanZoom() {
    var host = $('graph');
    var drag = null;
    host.addEventListener('wheel', function (e) {
      if (!state.svg) return;
      e.preventDefault();
      var delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
      zoomAt(Math.pow(1.0015, -delta), e.clientX, e.clientY);
    }, { passive: false });
    host.addEventListener('mousedown', function (e) {
      if (e.button !== 0 || !state.svg) return;
      var m = state.svg.getScreenCTM();
      drag = { x: e.clientX, y: e.clientY, vb: state.vb, scale: m ? m.a : 1, moved: false };
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (!drag.moved) return;
      host.classList.add('panning');
      setViewBox({ x: drag.vb.x - dx / drag.scale, y: drag.vb.y - dy / drag.scale,
                   w: drag.vb.w, h: drag.vb.h });
    });
    window.addEventListener('mouseup', function () {
      if (drag && drag.moved) {
        host.classList.add('just-panned');
        setTimeout(function () { host.classList.remove('just-panned'); }, 0);
      }
      host.classList.remove('panning');
      drag = null;
    });
  }

  function panTo(el) {
    if (!el || !state.svg) return;
    var r = el.getBoundingClientRect(), host = state.svg.getBoundingClientRect();
    var inside = r.left >= host.left && r.right <= host.right && r.top >= host.top &&
      r.bottom <= host.bottom;
    if (inside) return;
    var p = toSvgPoint(r.left + r.width / 2, r.top + r.height / 2), v = state.vb;
    setViewBox({ x: p.x - v.w / 2, y: p.y - v.h / 2, w: v.w, h: v.h });
  }

  // ---- selection and highlighting ---------------------------------------------------------
  function resolveForHighlight(i) {
    var x = insts[i];
    if (x.op === 'get-tuple-element' && x.o.length) return x.o[0];
    return i;
  }

  function clearHighlight(root) {
    ['sel', 'opnd', 'user', 'in', 'out'].forEach(function (cls) {
      var els = root.querySelectorAll('.' + cls);
      for (var k = 0; k < els.length; k++) els[k].classList.remove(cls);
    });
  }

  function mark(root, selector, cls) {
    var els = root.querySelectorAll(selector);
    for (var k = 0; k < els.length; k++) els[k].classList.add(cls);
    return els;
  }

  function applyHighlight() {
    var text = $('hlo-text');
    clearHighlight(text);
    if (state.svg) {
      clearHighlight(state.svg);
      state.svg.classList.toggle('has-sel', state.selected !== null);
    }
    var i = state.selected;
    if (i === null) { $('details').innerHTML = ''; return; }
    var x = insts[i];
    var ops = x.o.concat(x.k || []), us = users[i];
    var first = null;
    if (state.svg) {
      var self = mark(state.svg, '.node.i' + i + ', .cluster.i' + i, 'sel');
      first = self[0] || null;
      ops.forEach(function (o) { mark(state.svg, '.node.i' + resolveForHighlight(o), 'opnd'); });
      us.forEach(function (u) { mark(state.svg, '.node.i' + u + ', .cluster.i' + u, 'user'); });
      mark(state.svg, '.edge.t' + i, 'in');
      mark(state.svg, '.edge.s' + resolveForHighlight(i), 'out');
      if (!first && x.m) {  // merged into users (GTE, constant-bound parameter): show users
        var u0 = us.length ? state.svg.querySelector('.node.i' + us[0]) : null;
        first = u0;
      }
    }
    var line = text.querySelector('.ln[data-i="' + i + '"]');
    if (line) line.classList.add('sel');
    ops.forEach(function (o) { mark(text, '.ln[data-i="' + o + '"]', 'opnd'); });
    us.forEach(function (u) { mark(text, '.ln[data-i="' + u + '"]', 'user'); });
    if (line) scrollIntoViewIfNeeded(line, text);
    renderDetails(i);
    if (first) panTo(first);
  }

  function scrollIntoViewIfNeeded(line, container) {
    var r = line.getBoundingClientRect(), c = container.getBoundingClientRect();
    if (r.top < c.top || r.bottom > c.bottom) {
      container.scrollTop += r.top - c.top - c.height / 3;
    }
  }

  function refList(list) {
    return list.map(function (j) {
      return '<span class="ref" data-x="' + j + '">' + esc(insts[j].n) + '</span>';
    }).join(', ');
  }

  function renderDetails(i) {
    var x = styled(i);
    var parts = ['<div class="d-name">' + esc(x.n) + ' <span class="d-op">' + esc(x.op) +
                 '</span> <span class="d-comp">in ' + esc(comps[x.c].n) + '</span></div>'];
    if (x.t) parts.push('<div class="d-meta">' + esc(x.t).replace(/\n/g, '<br>') + '</div>');
    if (x.o.length) parts.push('<div>operands: ' + refList(x.o) + '</div>');
    if (users[i].length) parts.push('<div>users: ' + refList(users[i]) + '</div>');
    if (x.k && x.k.length) parts.push('<div>control predecessors: ' + refList(x.k) + '</div>');
    var calls = (x.cs || []).slice();
    if (x.f !== undefined) calls.unshift(x.f);
    if (calls.length) {
      parts.push('<div>calls: ' + calls.map(function (c) {
        return '<span class="cref" data-c="' + c + '">' + esc(comps[c].n) + '</span>';
      }).join(', ') + '</div>');
    }
    $('details').innerHTML = parts.join('');
  }

  // Select instruction i: switch computation, open fusions or recentre as needed.
  function select(i) {
    var path = viewPath(i);
    var changed = false;
    if (path.comp !== state.comp && insts[i].c !== state.comp) {
      openComputation(path.comp, false);
      changed = true;
    }
    path.fusions.forEach(function (f) {
      if (!state.expanded.has(f)) { state.expanded.add(f); changed = true; }
    });
    var top = path.fusions.length ? path.fusions[path.fusions.length - 1] : i;
    if (state.view && state.view.nb && !state.view.nb.set.has(top) && insts[top].c === state.comp) {
      state.centre = top;
      changed = true;
    } else if (state.view && !state.view.nb && changed &&
               countNodes(state.comp, state.expanded) > CAP) {
      state.centre = top;
    }
    state.selected = i;
    if (changed) renderView(); else applyHighlight();
  }

  function clearSelection() {
    state.selected = null;
    applyHighlight();
  }

  function toggleFusion(i) {
    if (!isFusionWithBody(i)) return;
    if (state.expanded.has(i)) state.expanded.delete(i); else state.expanded.add(i);
    if (state.view && state.view.nb) state.centre = state.view.nb.centre;
    renderView();
  }

  // ---- text pane ---------------------------------------------------------------------------
  function linkify(escaped) {
    return escaped.replace(/%([A-Za-z0-9_.\-]+)/g, '<span class="ref" data-r="$1">%$1</span>');
  }

  // The text pane is filled in chunks, after the graph, so neither waits for the other.
  var textJob = 0;
  var TEXT_CHUNK = 2000;

  function renderText(c) {
    var blocks = [c], seen = new Set([c]);
    for (var b = 0; b < blocks.length; b++) {  // fused computations reachable from c
      var list = comps[blocks[b]].i;
      for (var k = 0; k < list.length; k++) {
        var f = insts[list[k]].f;
        if (f !== undefined && !seen.has(f)) { seen.add(f); blocks.push(f); }
      }
    }
    var lines = [];
    blocks.forEach(function (cc) {
      lines.push(-1 - cc);           // header of computation cc
      comps[cc].i.forEach(function (i) { lines.push(i); });
      lines.push(null);              // closing brace
    });
    var el = $('hlo-text');
    el.innerHTML = '';
    el.scrollTop = 0;
    var job = ++textJob, pos = 0;
    function chunk() {
      if (job !== textJob) return;   // another computation was opened meanwhile
      var parts = [], end = Math.min(lines.length, pos + TEXT_CHUNK);
      for (; pos < end; pos++) {
        var i = lines[pos];
        if (i === null) parts.push('<div class="ln">}</div><div class="ln">&nbsp;</div>');
        else if (i < 0) {
          var cc = -1 - i;
          parts.push('<div class="ln hdr" data-c="' + cc + '">' + linkify(esc(comps[cc].h)) + '</div>');
        } else {
          parts.push('<div class="ln" data-i="' + i + '">  ' + linkify(esc(insts[i].txt)) + '</div>');
        }
      }
      el.insertAdjacentHTML('beforeend', parts.join(''));
      if (pos < lines.length) setTimeout(chunk, 0);
      else {
        body.setAttribute('data-text-lines', String(el.children.length));
        if (state.selected !== null) applyHighlight();
      }
    }
    setTimeout(chunk, 0);
  }

  function lookupName(name) {
    var list = byName.get(name);
    if (!list) return null;
    for (var k = 0; k < list.length; k++) {
      var c = viewPath(list[k]).comp;
      if (c === state.comp) return list[k];
    }
    return list[0];
  }

  // ---- computations ------------------------------------------------------------------------
  function openComputation(c, render) {
    state.comp = c;
    state.expanded = defaultExpansion(c);
    state.centre = null;
    state.selected = null;
    $('comp-select').value = String(c);
    renderText(c);
    if (render !== false) renderView();
  }

  function buildSelector() {
    var sel = $('comp-select');
    var main = document.createElement('optgroup');
    main.label = 'computations';
    var fused = document.createElement('optgroup');
    fused.label = 'fused computations';
    comps.forEach(function (comp, c) {
      var opt = document.createElement('option');
      opt.value = String(c);
      var suffix = comp.k === 'entry' ? ' (ENTRY)' : comp.tr ? ' (' + comp.tr + ')' : '';
      opt.textContent = comp.n + suffix + ' \u2014 ' + comp.i.length;
      (comp.k === 'fusion' ? fused : main).appendChild(opt);
    });
    sel.appendChild(main);
    if (fused.children.length) sel.appendChild(fused);
    sel.addEventListener('change', function () { openComputation(Number(sel.value)); });
  }

  // ---- events --------------------------------------------------------------------------------
  function instFromSvgTarget(target) {
    var g = target.closest ? target.closest('g.node, g.cluster') : null;
    if (!g) return null;
    var m = /^(?:n|f)(\d+)/.exec(g.id || '');
    return m ? Number(m[1]) : null;
  }

  function bindEvents() {
    var graph = $('graph');
    graph.addEventListener('click', function (e) {
      if (graph.classList.contains('just-panned')) return;
      var i = instFromSvgTarget(e.target);
      if (i === null) { clearSelection(); return; }
      e.preventDefault();
      select(i);
    });
    graph.addEventListener('dblclick', function (e) {
      var i = instFromSvgTarget(e.target);
      if (i === null) { fit(); return; }
      e.preventDefault();
      var x = insts[i];
      if (isFusionWithBody(i)) toggleFusion(i);
      else if (x.cs && x.cs.length) openComputation(x.cs[0]);
    });
    var side = $('side-pane');
    side.addEventListener('click', function (e) {
      var t = e.target;
      if (t.classList.contains('cref')) { openComputation(Number(t.getAttribute('data-c'))); return; }
      if (t.classList.contains('ref')) {
        var name = t.getAttribute('data-r');
        if (t.hasAttribute('data-x')) { select(Number(t.getAttribute('data-x'))); return; }
        var i = lookupName(name);
        if (i !== null) { select(i); return; }
        if (compByName.has(name)) {
          var c = compByName.get(name);
          if (comps[c].f !== undefined) select(comps[c].f); else openComputation(c);
        }
        return;
      }
      var line = t.closest ? t.closest('.ln[data-i]') : null;
      if (line) select(Number(line.getAttribute('data-i')));
    });
    $('btn-fit').addEventListener('click', fit);
    $('btn-zoom-in').addEventListener('click', function () { zoomAt(1.25); });
    $('btn-zoom-out').addEventListener('click', function () { zoomAt(0.8); });
    $('btn-expand').addEventListener('click', function () {
      state.expanded = allFusions(state.comp, new Set());
      if (countNodes(state.comp, state.expanded) > CAP && state.centre === null)
        state.centre = state.selected !== null ? viewPath(state.selected).fusions.slice(-1)[0] || state.selected : null;
      renderView();
    });
    $('btn-wider').addEventListener('click', function () {
      state.limit = Math.min(CAP, state.limit * 2);
      renderView();
    });
    $('btn-narrower').addEventListener('click', function () {
      var nb = state.view && state.view.nb;
      state.limit = Math.max(10, nb ? Math.floor(nb.count / 2) : state.limit / 2);
      renderView();
    });
    $('btn-collapse').addEventListener('click', function () {
      state.expanded = new Set();
      renderView();
    });
    var search = $('search');
    search.addEventListener('keydown', function (e) {
      if (e.key !== 'Enter') return;
      var name = search.value.trim().replace(/^%/, '');
      if (!name) return;
      var i = lookupName(name);
      if (i === null) {
        var lower = name.toLowerCase();
        for (var k = 0; k < insts.length && i === null; k++) {
          if (insts[k].n.toLowerCase().indexOf(lower) >= 0) i = k;
        }
      }
      if (i === null) {
        if (compByName.has(name)) { openComputation(compByName.get(name)); return; }
        setStatus('no instruction matches "' + name + '"');
        return;
      }
      select(i);
    });
    document.addEventListener('keydown', function (e) {
      if (e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT')) return;
      if (e.key === '/') { e.preventDefault(); search.focus(); }
      else if (e.key === 'f') fit();
      else if (e.key === '+' || e.key === '=') zoomAt(1.25);
      else if (e.key === '-') zoomAt(0.8);
      else if (e.key === 'Escape') clearSelection();
    });
    bindSplitter();
  }

  function bindSplitter() {
    var splitter = $('splitter'), side = $('side-pane'), drag = null;
    splitter.addEventListener('mousedown', function (e) {
      drag = { x: e.clientX, w: side.getBoundingClientRect().width };
      e.preventDefault();
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      var w = Math.max(160, Math.min(window.innerWidth - 200, drag.w - (e.clientX - drag.x)));
      side.style.flexBasis = w + 'px';
    });
    window.addEventListener('mouseup', function () { drag = null; });
  }

  // ---- start -------------------------------------------------------------------------------
  function start() {
    if (typeof Viz === 'undefined') {
      fail(new Error('the Graphviz script (viz-global.js) did not load'));
      return;
    }
    markTime('start');
    // Graphviz starts in the worker at once, while the data is decoded here
    startWorker();
    loadData().then(function (data) {
      markTime('data');
      // the page ships the module's text; hlo_model.js builds the drawing model from it
      D = data.text !== undefined ? window.hloBuildModel(data) : data;
      markTime('model');
      index();
      $('title').textContent = D.title || D.module;
      buildSelector();
      bindPanZoom();
      bindEvents();
      var entry = -1;
      for (var c = 0; c < comps.length; c++) if (comps[c].k === 'entry') { entry = c; break; }
      if (entry < 0) entry = 0;
      if (!comps.length) throw new Error('the module has no computations');
      openComputation(entry, false);
      markTime('text');
      setStatus('laying out ' + comps[entry].n + '\u2026');
      renderView();
      var hash = decodeURIComponent((location.hash || '').replace(/^#/, ''));
      if (hash && byName.has(hash)) select(byName.get(hash)[0]);
    }).catch(fail);
  }

  // For tests and debugging from the console.
  window.hloPage = {
    state: state, select: select, openComputation: openComputation, toggleFusion: toggleFusion,
    idle: idle,
    lookupName: lookupName, data: function () { return D; }
  };

  start();
})();
