/* hlo-opt HTML page: the drawing model of one HLO module, built in the browser.
 *
 * hlo_opt/dump/html.py graph_json() ships the module as the printer writes it (one
 * string: the same work as a text dump), the drawing rules of
 * hlo_opt/dump/graph_model.py (colour per opcode, elementwise opcodes, limits) and the
 * literal text of small constants where it differs from their payload.  hloBuildModel
 * derives from them comps[] and insts[] (fields listed at the top of hlo_graph.js),
 * deciding labels, colours, tooltips, merging and clusters as GraphModel does;
 * tests/dump/test_html_model.py checks that both agree on every sample and corpus module.
 * Also a CommonJS module (node), for those tests.
 */
(function (root) {
'use strict';

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

var splitOpen = false;  // did the last splitTop end inside a bracket or a string?
function splitTop(s) {  // at commas outside brackets and strings; parts left-trimmed
  var out = [], depth = 0, start = 0, i = 0, n = s.length, inString = false;
  for (; i < n; i++) {
    var ch = s.charCodeAt(i);
    if (ch === 34) {  // "
      inString = true;
      for (i++; i < n; i++) {
        var c2 = s.charCodeAt(i);
        if (c2 === 92) i++;
        else if (c2 === 34) { inString = false; break; }
      }
    } else if (ch === 40 || ch === 91 || ch === 123) depth++;
    else if (ch === 41 || ch === 93 || ch === 125) depth--;
    else if (ch === 44 && depth === 0) { out.push(s.slice(start, i).replace(/^\s+/, '')); start = i + 1; }
  }
  var last = s.slice(start).replace(/^\s+/, '');
  if (last || out.length) out.push(last);
  splitOpen = inString || depth > 0;
  return out;
}

function closing(s, open) {  // index of the bracket closing the one at `open`
  var depth = 0, n = s.length;
  for (var i = open; i < n; i++) {
    var ch = s.charCodeAt(i);
    if (ch === 34) {
      for (i++; i < n && s.charCodeAt(i) !== 34; i++) if (s.charCodeAt(i) === 92) i++;
    } else if (ch === 40 || ch === 91 || ch === 123) depth++;
    else if ((ch === 41 || ch === 93 || ch === 125) && --depth === 0) return i;
  }
  return n;
}

// One instruction line of the printer: [ROOT ]%name = shape opcode(payload)[, attr=value]*
// null when it ends inside a bracket or a string (a value written over several lines),
// unless `force`.
function parseInstruction(line, force) {
  var p = 0, root = false;
  if (line.lastIndexOf('ROOT ', 0) === 0) { root = true; p = 5; }
  var eq = line.indexOf(' = ', p);
  p = eq + 3;
  var depth = 0, i = p, n = line.length;
  for (; i < n; i++) {
    var ch = line.charCodeAt(i);
    if (ch === 40 || ch === 91 || ch === 123) depth++;
    else if (ch === 41 || ch === 93 || ch === 125) depth--;
    else if (ch === 32 && depth === 0) break;
  }
  var open = line.indexOf('(', i + 1);
  var close = closing(line, open);
  if (close >= n && !force) return null;
  var attrs = [];
  if (close + 1 < n) {
    var parts = splitTop(line.slice(close + 2));
    if (splitOpen && !force) return null;
    for (var k = 0; k < parts.length; k++) {
      var e = parts[k].indexOf('=');
      if (e >= 0) attrs.push([parts[k].slice(0, e), parts[k].slice(e + 1)]);
    }
  }
  return { name: line.slice((root ? 5 : 0) + 1, eq), root: root, line: line,
           shape: line.slice(p, i), op: line.slice(i + 1, open),
           payload: line.slice(open + 1, close), attrs: attrs, operands: [], called: [],
           ctrl: [], users: [], idx: -1 };
}

var OPERAND_RE = /%([^,\s]+)/g;

function attrOf(x, name) {
  for (var k = 0; k < x.attrs.length; k++) if (x.attrs[k][0] === name) return x.attrs[k][1];
  return undefined;
}

function refNames(value) {  // %a | {%a, %b} -> ['a', 'b']
  var v = value.trim();
  if (v.charAt(0) === '{') v = v.slice(1, -1);
  return v.split(',').map(function (s) { return s.trim().replace(/^%/, ''); })
    .filter(function (s) { return s.length > 0; });
}

function parseModuleText(text) {
  var lines = text.split('\n'), out = [], cur = null;
  for (var k = 0; k < lines.length; k++) {
    var line = lines[k];
    if (cur && line.lastIndexOf('  ', 0) === 0) {
      // a value written over several lines (a string holding a newline, a backend_config
      // as written) goes on to the line that balances it
      var x = parseInstruction(line.slice(2), false);
      while (!x) {
        if (k + 1 < lines.length) line += '\n' + lines[++k];
        x = parseInstruction(line.slice(2), k + 1 >= lines.length);
      }
      x.comp = cur;
      cur.insts.push(x);
      if (x.root) cur.root = x;
    } else if (cur && line.charAt(0) === '}') {
      var m = /^\}, execution_thread=(".*")$/.exec(line);
      if (m) cur.head = cur.head.slice(0, -2) + ', execution_thread=' + m[1] + ' {';
      out.push(cur);
      cur = null;
    } else if (!cur && /\{$/.test(line)) {
      var entry = line.lastIndexOf('ENTRY ', 0) === 0;
      var start = line.indexOf('%') + 1;
      cur = { name: line.slice(start, line.indexOf(' (', start)), head: line, entry: entry,
              insts: [], root: null, gc: null };
    }
  }
  return out;
}

function buildModel(R, eager) {  // eager: style every instruction now
  var rules = R.rules, L = rules.limits;
  var opScheme = rules.opcodeScheme, elementwise = new Set(rules.elementwise);
  var skipAttrs = new Set(rules.calledAttrs.concat(['metadata', 'backend_config']));
  var calledAttrs = new Set(rules.calledAttrs);
  var lits = R.lits || {};
  var tcomps = parseModuleText(R.text);
  var compNamed = new Map(), entry = null;
  tcomps.forEach(function (c) { compNamed.set(c.name, c); if (c.entry) entry = c; });
  var callers = new Map(), fusionCallers = new Map();
  tcomps.forEach(function (c) { callers.set(c, []); });
  // resolve names: operands, control predecessors, called computations, users
  tcomps.forEach(function (c) {
    var named = new Map();
    c.insts.forEach(function (x) { if (!named.has(x.name)) named.set(x.name, x); });
    var litsHere = lits[c.name];
    c.insts.forEach(function (x) {
      if (x.op === 'parameter') x.pnum = parseInt(x.payload, 10);
      else if (x.op === 'constant') {
        x.lit = (litsHere && x.name in litsHere) ? litsHere[x.name] : x.payload;
      } else if (x.payload) {  // "shape %name, shape %name": shapes hold no '%'
        OPERAND_RE.lastIndex = 0;
        for (var m; (m = OPERAND_RE.exec(x.payload)) !== null;) {
          var y = named.get(m[1]);
          if (y) x.operands.push(y);
        }
      }
      x.attrs.forEach(function (a) {
        if (calledAttrs.has(a[0])) {
          refNames(a[1]).forEach(function (nm) {
            var callee = compNamed.get(nm);
            if (callee) x.called.push(callee);
          });
        } else if (a[0] === 'control-predecessors') {
          refNames(a[1]).forEach(function (nm) {
            var y = named.get(nm);
            if (y) x.ctrl.push(y);
          });
        }
      });
      x.operands.forEach(function (o) {
        if (o.users[o.users.length - 1] !== x) o.users.push(x);
      });
      x.called.forEach(function (callee) { callers.get(callee).push(x); });
      if (x.op === 'fusion' && x.called.length && !fusionCallers.has(x.called[0]))
        fusionCallers.set(x.called[0], x);
    });
  });

  // -- shapes (XLA's ShapeUtil spellings, as graph_model.py) --
  var factsOf = new Map();
  function facts(text) {
    var f = factsOf.get(text);
    if (f) return f;
    var re = /([A-Za-z0-9_]+)\[([^\]]*)\]/g, m, total = 0, opaque = false, multi = false;
    var first = null;
    while ((m = re.exec(text)) !== null) {
      var ty = m[1], dims = m[2] ? m[2].split(',').map(function (d) {
        return d === '?' ? -1 : parseInt(d.replace('<=', ''), 10);
      }) : [];
      var array = ty !== 'token' && ty !== 'opaque';
      if (!array) opaque = true;
      var count = 1;
      for (var k = 0; k < dims.length; k++) count *= dims[k];
      if (array) { total += count; if (dims.length > 1) multi = true; }
      if (!first) first = { array: array, dims: dims, count: count };
    }
    var tuple = text.charAt(0) === '(';
    var array = !tuple && first !== null && first.array;
    f = { small: opaque || total < L.smallElements, plain: text.replace(/\{[^}]*\}/g, ''),
          multi: multi, tuple: tuple, array: array, count: array ? first.count : 0,
          effScalar: array && first.dims.every(function (d) { return d === 1; }) };
    factsOf.set(text, f);
    return f;
  }
  function trunc(s, limit) { return s.length <= limit ? s : s.slice(0, limit - 3) + '...'; }

  function parseMetadata(text) {
    var out = {};
    if (!text) return out;
    var re = /(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)/g, m;
    while ((m = re.exec(text)) !== null) {
      var v = m[2];
      if (v.charAt(0) === '"') v = v.slice(1, -1).replace(/\\(.)/g, '$1');
      out[m[1]] = v;
    }
    return out;
  }

  function matchTrivial(c) {
    if (c.insts.length !== 3 || !c.root) return null;
    var root = c.root;
    if (root.operands.length !== 2 || !facts(root.shape).effScalar) return null;
    var a = root.operands[0], b = root.operands[1];
    var params = a === b ? [a] : [a, b];
    for (var k = 0; k < params.length; k++)
      if (params[k].op !== 'parameter' || !facts(params[k].shape).effScalar) return null;
    if (params.length !== 2 || !((a.pnum === 0 && b.pnum === 1) || (a.pnum === 1 && b.pnum === 0)))
      return null;
    var direction = attrOf(root, 'direction') || '';
    if (a.pnum === 1 && root.op === 'compare' && /^(LE|GE|GT|LT)$/.test(direction)) return null;
    if (root.op in rules.trivialBinary) return rules.trivialBinary[root.op];
    if (root.op === 'compare') return rules.compareNames[direction] || null;
    return null;
  }

  function inFusion(x) { return fusionCallers.has(x.comp); }
  function fusedBroadcastOfScalarConstant(x) {
    return x.op === 'broadcast' && inFusion(x) && x.operands.length === 1 &&
      x.operands[0].op === 'constant' && facts(x.operands[0].shape).effScalar;
  }
  function fusedParameterConstant(x) {
    if (x.op !== 'parameter') return null;
    var f = fusionCallers.get(x.comp);
    if (!f || x.pnum >= f.operands.length) return null;
    var o = f.operands[x.pnum];
    return o.op === 'constant' ? o : null;
  }
  function shouldMerge(x) {
    if (x.op === 'get-tuple-element' && !x.root) return true;
    if (fusedParameterConstant(x)) return true;
    if (x.op === 'parameter' && facts(x.shape).tuple && !inFusion(x)) {
      return x.users.length > 3 && x.users.every(function (u) {
        return u.op === 'get-tuple-element';
      });
    }
    return false;
  }
  function asyncWrapped(x) {
    var seen = 0;
    while ((x.op === 'async-update' || x.op === 'async-done') && x.operands.length && seen < 64) {
      if (x.called.length && x.called[0].root) return x.called[0].root;
      x = x.operands[0];
      seen++;
    }
    return (x.called.length && x.called[0].root) ? x.called[0].root : null;
  }
  function interestingProducer(x) {
    var tupleIndex = [];
    for (var k = 0; k < 10000; k++) {
      var op = x.op;
      if ((op === 'bitcast' || op === 'copy') && x.operands.length) x = x.operands[0];
      else if (op === 'get-tuple-element' && x.operands.length) {
        tupleIndex.push(gteIndex(x));
        x = x.operands[0];
      } else if (op === 'tuple' && tupleIndex.length) {
        var i = tupleIndex.pop();
        if (i >= x.operands.length) return x;
        x = x.operands[i];
      } else if (op === 'call' && x.called.length && x.called[0].root) x = x.called[0].root;
      else return x;
    }
    return x;
  }
  function gteIndex(x) { return attrOf(x, 'index') !== undefined ? parseInt(attrOf(x, 'index'), 10) : 0; }

  function color(x, depth) {
    var paramScheme = facts(x.shape).small ? 'orange' : 'dark_orange';
    for (var k = 0; k < x.operands.length; k++) {
      var o = x.operands[k];
      if (o.op === 'parameter' && shouldMerge(o) && !fusedParameterConstant(o)) return paramScheme;
    }
    if (x.op === 'parameter') return paramScheme;
    if (x.op === 'bitcast') return inFusion(x) ? 'green' : 'white';
    if ((x.op === 'async-start' || x.op === 'async-update' || x.op === 'async-done') && depth < 8) {
      var w = asyncWrapped(x);
      return w ? color(w, depth + 1) : 'white';
    }
    return opScheme[x.op] || 'white';
  }
  function nodeTitle(x) {
    if (x.op === 'parameter') return '<b>Parameter ' + x.pnum + '</b>';
    if (x.name.lastIndexOf(x.op, 0) === 0) return '<b>' + esc(x.name) + '</b>';
    var ext = x.op + (x.op === 'fusion' ? ':' + (attrOf(x, 'kind') || 'kLoop') : '');
    return '<b>' + esc(x.name) + '</b><br/>' + esc(ext);
  }
  function tooltip(x) {
    var md = parseMetadata(attrOf(x, 'metadata')), lines = [];
    if (md.op_name) lines.push(md.op_name);
    if (md.op_type) lines.push('op_type: ' + md.op_type);
    if (md.source_file && (md.source_line || '0') !== '0')
      lines.push('source: ' + md.source_file + ':' + md.source_line);
    return lines.join('\n');
  }
  function attributeLines(x) {
    var lines = [];
    x.attrs.forEach(function (a) {
      if (skipAttrs.has(a[0])) return;
      var line = a[0] + '=' + a[1];
      if (line.length > L.maxAttrChars || rules.truncatedAttrs.some(function (t) {
        return line.lastIndexOf(t, 0) === 0;
      })) line = trunc(line, L.maxAttrChars);
      lines.push(a[0] === 'feature_group_count' ? '<b>' + esc(line) + '</b>' : esc(line));
    });
    return lines;
  }
  function extraInfo(x, withShape) {
    var lines = [];
    if (x.op === 'parameter') {
      var cs = callers.get(x.comp);
      if (cs.length === 1 && cs[0].op === 'call' && x.pnum < cs[0].operands.length) {
        var p = interestingProducer(cs[0].operands[x.pnum]);
        var where = p.comp === entry ? 'the ENTRY computation' : esc(p.comp.name);
        lines.push('<i>from ' + esc(p.name) + ' in ' + where + '</i>');
      }
    }
    lines = lines.concat(attributeLines(x));
    if (withShape) {
      var f = facts(x.shape);
      lines.push(esc(trunc(x.op !== 'tuple' && f.multi ? x.shape : f.plain, L.maxShapeChars)));
    }
    return lines.join('<br/>');
  }
  function constantText(c, shape) {
    var sf = facts(shape), cf = facts(c.shape);
    if (sf.array && sf.count === 0) return '{} (' + cf.plain + ')';
    if (sf.array && cf.array && cf.count <= L.maxLiteralElements) {
      if (c.lit !== null && c.lit.length <= L.maxLiteralChars) return sf.plain + ' ' + c.lit;
    }
    return (c.name.lastIndexOf('constant', 0) === 0 ? c.name : 'constant ' + c.name) + ' ' + sf.plain;
  }
  function gteText(x) {
    return 'tuple-element ' + gteIndex(x) + ' of ' + x.operands[0].name + ' ' + x.shape;
  }
  function inlinedOperands(x) {
    var lines = [], count = x.operands.length;
    for (var i = 0; i < count; i++) {
      var o = x.operands[i], text = null;
      if (o.op === 'constant') text = constantText(o, o.shape);
      else if (fusedBroadcastOfScalarConstant(o)) text = constantText(o.operands[0], o.shape);
      else if (shouldMerge(o)) {
        if (o.op === 'parameter') {
          var c = fusedParameterConstant(o);
          text = c ? constantText(c, c.shape) : 'Parameter ' + o.pnum;
        } else if (o.op === 'get-tuple-element') text = gteText(o);
        else text = o.name;
      }
      if (text !== null)
        lines.push('<b>' + (count > 1 ? 'operand ' + i : 'operand') + '</b> = ' + esc(text));
      if (lines.length === L.maxOperandsShown && i < count - 1) { lines.push('...'); break; }
    }
    if (x.op === 'parameter' && inFusion(x)) {
      var f = fusionCallers.get(x.comp);
      if (x.pnum < f.operands.length && f.operands[x.pnum].op === 'get-tuple-element')
        lines.push(esc(gteText(f.operands[x.pnum])));
    }
    return lines.join('<br/>');
  }
  function trivialText(x) {
    if (x.op === 'fusion') return '';
    var lines = [];
    x.called.forEach(function (c, i) {
      var kind = c.gc ? c.gc.trivial : matchTrivial(c);
      if (!kind) return;
      lines.push((x.called.length === 1 ? 'Subcomputation' : 'Subcomputation ' + i) +
                 ': <b>' + esc(kind) + '</b>');
    });
    return lines.join('<br/>');
  }
  function fusionCategory(x) {
    var kind = attrOf(x, 'kind') || 'kLoop';
    if (kind in rules.fusionCategory) return rules.fusionCategory[kind];
    var body = x.called[0];
    var ew = !!body && body.insts.every(function (i) {
      return i.op === 'parameter' || i.op === 'constant' || elementwise.has(i.op) ||
        fusedBroadcastOfScalarConstant(i);
    });
    return ew ? 'elementwise fusion' : 'non-elementwise fusion';
  }

  // -- computations in GraphModel's order: entry first, then callers before callees --
  var order = tcomps.filter(function (c) { return c !== entry; });
  if (entry) order.push(entry);
  order.reverse();
  var outComps = [], nodes = [], ids = new Set();
  order.forEach(function (c) {
    if (R.topLevel && fusionCallers.has(c)) return;
    var gc = { c: c, idx: outComps.length, nodes: [], trivial: null,
               kind: c === entry ? 'entry' : fusionCallers.has(c) ? 'fusion'
                 : callers.get(c).length ? 'called' : 'unused' };
    if (gc.kind !== 'fusion') {
      gc.trivial = matchTrivial(c);
      if (gc.trivial && gc.kind === 'called') gc.kind = 'trivial';
    }
    c.gc = gc;
    outComps.push(gc);
    c.insts.forEach(function (x) {
      x.idx = nodes.length;
      var id = x.name;
      if (ids.has(id)) {
        id = c.name + '/' + x.name;
        for (var k = 1; ids.has(id);) { k++; id = c.name + '/' + x.name + '#' + k; }
      }
      ids.add(id);
      x.dotId = id;
      nodes.push(x);
      gc.nodes.push(x.idx);
    });
  });
  var compCallers = new Map();
  var insts = nodes.map(function (x) {
    var f = facts(x.shape);
    var rec = { n: x.name, op: x.op, s: color(x, 0), txt: x.line, c: x.comp.gc.idx };
    if (x.op === 'while') rec.sh = 'ellipse';
    var merged = shouldMerge(x), bc = fusedBroadcastOfScalarConstant(x);
    if (merged) rec.m = 1;
    if ((x.op === 'constant' || bc) && !x.root) rec.h = 1;
    if (merged || x.op === 'constant' || bc) rec.ne = 1;
    if (!f.small) rec.b = 1;
    var fused = (x.op === 'fusion' && x.called.length && x.called[0].gc) ? x.called[0].gc.idx : -1;
    if (fused >= 0) rec.f = fused;
    if (x.op === 'parameter') rec.p = x.pnum;
    var es = trunc(f.plain, L.maxShapeChars);
    if (es) rec.es = es;
    rec.o = x.operands.map(function (o) { return o.idx; });
    if (x.dotId !== x.name) rec.d = x.dotId;
    if (x.ctrl.length) rec.k = x.ctrl.map(function (p) { return p.idx; });
    if (x.called.length && x.op !== 'fusion') {
      var cs = x.called.filter(function (c) { return c.gc && c.gc.kind !== 'trivial'; })
        .map(function (c) { return c.gc.idx; });
      if (x.op === 'while') cs.reverse();
      if (cs.length) {
        rec.cs = cs;
        cs.forEach(function (c) {
          if (!compCallers.has(c)) compCallers.set(c, []);
          compCallers.get(c).push(x.idx);
        });
      }
    }
    return rec;
  });
  var comps = outComps.map(function (gc) {
    var rec = { n: gc.c.name, k: gc.kind, r: gc.c.root ? gc.c.root.idx : -1, i: gc.nodes,
                h: gc.c.head };
    var fusion = fusionCallers.get(gc.c);
    if (fusion && fusion.idx >= 0) rec.f = fusion.idx;
    if (compCallers.has(gc.idx)) rec.ca = compCallers.get(gc.idx);
    if (gc.trivial) rec.tr = gc.trivial;
    return rec;
  });
  var out = {};
  Object.keys(R).forEach(function (k) {
    if (k !== 'text' && k !== 'lits' && k !== 'rules') out[k] = R[k];
  });
  out.comps = comps;
  out.insts = insts;
  // l (label), t (tooltip) and cl (cluster label) of instruction i, made when first drawn
  // or shown (a view draws at most a few hundred of the module's instructions)
  var styled = new Uint8Array(nodes.length);
  out.style = function (i) {
    if (styled[i]) return insts[i];
    styled[i] = 1;
    var x = nodes[i], rec = insts[i];
    var parts = [nodeTitle(x), trivialText(x), extraInfo(x, true), inlinedOperands(x)];
    rec.l = parts.filter(function (s) { return s; }).join('<br/>');
    var t = tooltip(x);
    if (t) rec.t = t;
    if (rec.f !== undefined) {
      var extra = extraInfo(x, false);
      rec.cl = 'Fused expression for <b>' + esc(x.name) + '</b><br/>' + esc(fusionCategory(x)) +
        (extra ? '<br/>' + extra : '');
    }
    return rec;
  };
  if (eager) for (var i = 0; i < insts.length; i++) out.style(i);
  return out;
}

root.hloBuildModel = buildModel;
if (typeof module !== 'undefined' && module.exports) module.exports = buildModel;
})(typeof window !== 'undefined' ? window : globalThis);
