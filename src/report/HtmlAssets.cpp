// The --html page's inline style sheet and script. No fonts, images or
// scripts are fetched: the page must open from a CI artifact offline.
#include "HtmlModel.h"

namespace shardproof::report::html {

const char *const kStyle = R"css(
:root{--matched:#2e7d32;--view:#1565c0;--input:#6e7781;--unmatched:#c62828;--unsupported:#e65100}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1240px;margin:0 auto;padding:12px 16px 40px}
code,pre{font:12px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f8fa;padding:6px;margin:4px 0;max-height:260px;overflow:auto}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:12px 0 4px}
header#summary,section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;margin:0 0 12px}
header#summary{border-left:8px solid var(--input)}
header#summary.v-verified{border-left-color:var(--matched)}
header#summary.v-refuted{border-left-color:var(--unmatched)}
header#summary.v-unknown{border-left-color:#b26a00}
.verdict{display:inline-block;padding:1px 10px;border-radius:4px;color:#fff;font-weight:700;letter-spacing:.04em;background:var(--input)}
.verdict.v-verified{background:var(--matched)}.verdict.v-refuted{background:var(--unmatched)}.verdict.v-unknown{background:#b26a00}
#reason{margin:4px 0 8px}
nav{margin:0 0 12px;font-size:13px}nav a{margin-right:14px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:8px 0}
dt{color:#57606a}dd{margin:0;min-width:0}
ul.counts,ul.legend{list-style:none;padding:0;margin:8px 0;display:flex;flex-wrap:wrap;gap:6px 18px}
ul.near{margin:0;padding-left:18px}
.s-input{--c:var(--input)}.s-matched{--c:var(--matched)}.s-view{--c:var(--view)}
.s-unmatched{--c:var(--unmatched)}.s-unsupported{--c:var(--unsupported)}
.chip{border:1px solid #d0d7de;background:#fff;border-radius:12px;padding:1px 10px;cursor:pointer;font:inherit}
.chip.off{opacity:.45;text-decoration:line-through}
.chip::before,.st::before{content:"";display:inline-block;width:9px;height:9px;border-radius:50%;background:var(--c);margin-right:5px}
.st{color:var(--c);white-space:nowrap}
.strip{display:inline-flex;width:140px;height:10px;border-radius:2px;overflow:hidden;background:#eaeef2;vertical-align:middle;margin:0 8px}
.strip i{display:block;height:100%;background:var(--c)}
details>summary{cursor:pointer}
details.mod{margin:1px 0 1px 16px;border-left:2px solid #eaeef2;padding-left:6px}
#tree>details.mod{margin-left:0;border-left:0;padding-left:0}
details.mod>summary{padding:1px 4px;border-radius:4px}
details.mod.failing>summary{background:#ffebe9;outline:2px solid var(--unmatched)}
details.mod.has-failing>summary>.name{color:var(--unmatched)}
details.mod.identical>summary{color:#57606a}
details.layer>summary>.name{display:inline-block;min-width:7em}
.name{font-weight:600}
.n{font-size:12px;color:#57606a}
.c{font-size:12px;color:var(--c);margin-left:6px}
.badge{font-size:11px;border-radius:10px;padding:0 7px;margin-left:6px;background:#eaeef2;white-space:nowrap}
.badge.fail{background:var(--unmatched);color:#fff}
.badge.coll{background:#f3e5f5;color:#6a1b9a}
.same{font-size:12px;color:#57606a;font-style:italic;margin-left:6px}
details.rows{margin:2px 0 4px 16px}
details.rows>summary{font-size:12px;color:#57606a}
.lazy{margin-left:16px}
table{border-collapse:collapse;width:100%;margin:4px 0}
th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #eaeef2;vertical-align:top}
th{font-size:12px;color:#57606a;font-weight:600}
td code{white-space:pre-wrap;word-break:break-all}
tr.failing-row{background:#ffebe9}
body.hide-input tr.s-input,body.hide-matched tr.s-matched,body.hide-view tr.s-view,
body.hide-unmatched tr.s-unmatched,body.hide-unsupported tr.s-unsupported{display:none}
.failure .message{font-weight:600;margin:4px 0}
details.failure{border-top:1px solid #eaeef2;padding:4px 0}
.num{font-size:15px;font-weight:700}
.confirmed{color:var(--matched)}
.coll-group{margin:6px 0}
.coll-group>summary .name{font-weight:600}
.coll-nodes td:nth-child(2) code{white-space:nowrap;word-break:normal}
svg.colls{display:block;margin:6px 0;max-width:100%;height:auto}
svg text{font:11px ui-monospace,"DejaVu Sans Mono",monospace;fill:#1f2328}
svg .lane{stroke:#d0d7de;stroke-dasharray:3 3}
g.collective{--op:#37474f}
g.collective.op-AllReduce{--op:#6a1b9a}g.collective.op-AllGather{--op:#00838f}
g.collective.op-ReduceScatter{--op:#8d6e63}g.collective.op-AllToAll{--op:#ad1457}
svg .bar{stroke:var(--op);stroke-width:4;stroke-linecap:round}
svg circle.site{fill:var(--op)}
svg circle.absent{fill:#fff;stroke:var(--unmatched);stroke-width:2}
footer{font-size:12px;color:#57606a;margin-top:16px}
)css";

// Reads the data block (which also proves it parses), draws the rows of a
// layer folded as identical when it is first opened, opens the module named
// by `#module=PATH`, and wires the buttons. Builds DOM with textContent only.
const char *const kScript = R"js(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('shardproof-data').textContent);
  var rows = data.report.relations;
  var labels = {input: 'input', matched: 'matched', view: 'view', unmatched: 'no relation',
                unsupported: 'unsupported'};
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function cell(tr, child) { var td = document.createElement('td'); td.appendChild(child); tr.appendChild(td); }
  function fill(div) {
    if (div.dataset.filled !== undefined) return;
    var m = div.dataset.module, table = el('table', 'rows'), head = table.createTHead().insertRow();
    ['module', 'tensor', 'op', 'status', 'relation'].forEach(function (h) { head.appendChild(el('th', null, h)); });
    var body = table.createTBody(), n = 0;
    rows.forEach(function (r) {
      if (r.module !== m && r.module.indexOf(m + '.') !== 0) return;
      var tr = body.insertRow();
      tr.className = 'row s-' + r.status;
      tr.dataset.status = r.status;
      tr.dataset.module = r.module;
      cell(tr, el('code', null, r.module));
      cell(tr, el('code', null, r.tensor));
      cell(tr, document.createTextNode(r.op || '\u2014'));
      cell(tr, el('span', 'st s-' + r.status, labels[r.status] || r.status));
      cell(tr, el('code', 'rel', r.relation));
      n++;
    });
    div.appendChild(table);
    div.dataset.filled = String(n);
  }
  function lazyOf(d) {
    for (var c = d.firstElementChild; c; c = c.nextElementSibling)
      if (c.classList.contains('lazy')) return c;
    return null;
  }
  document.addEventListener('toggle', function (e) {
    var d = e.target;
    if (d.open && d.classList && d.classList.contains('identical')) {
      var lazy = lazyOf(d);
      if (lazy) fill(lazy);
    }
  }, true);
  function openModule(m) {
    var nodes = document.querySelectorAll('details.mod');
    for (var i = 0; i < nodes.length; i++) {
      if (nodes[i].dataset.module !== m) continue;
      for (var p = nodes[i]; p; p = p.parentElement)
        if (p.tagName === 'DETAILS') p.open = true;
      var lazy = lazyOf(nodes[i]);
      if (lazy) fill(lazy);
      nodes[i].scrollIntoView();
      return;
    }
  }
  function fromHash() {
    var h = decodeURIComponent(location.hash.slice(1));
    if (h.indexOf('module=') === 0) openModule(h.slice(7));
  }
  window.addEventListener('hashchange', fromHash);
  function setAll(open) {
    document.querySelectorAll('#tree details').forEach(function (d) { d.open = open; });
  }
  document.getElementById('expand-all').addEventListener('click', function () { setAll(true); });
  document.getElementById('collapse-all').addEventListener('click', function () { setAll(false); });
  document.querySelectorAll('[data-filter]').forEach(function (b) {
    b.addEventListener('click', function () {
      document.body.classList.toggle('hide-' + b.dataset.filter);
      b.classList.toggle('off');
    });
  });
  fromHash();
  document.body.dataset.script = 'ok';
  document.body.dataset.rows = String(rows.length);
})();
)js";

} // namespace shardproof::report::html
