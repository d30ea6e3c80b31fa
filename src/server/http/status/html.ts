/**
 * The status page's static parts (#16): an HTML shell that holds no data, its stylesheet and its
 * script, all served by the gateway itself (no CDN, so it works offline and on Workers, and a
 * strict CSP can allow 'self' only). The script fetches the JSON view every 2 s and builds the
 * page with textContent only: upstream text never reaches innerHTML or an attribute that runs.
 * Controls, bidi and invisible characters are shown as <U+XXXX> here too, not only by the server.
 */
import { CONSOLE_SECTIONS } from './console.js';
import { PAGE_TEXT_JS } from './page-text.js';

/** The page for a status path (its JSON and assets sit under `base`, which config validated). */
export function statusHtml(base: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Manifold status</title>
<link rel="stylesheet" href="${base}/status.css">
<script src="${base}/status.js" defer></script>
<script src="${base}/console.js" defer></script>
</head>
<body data-json="${base}/status.json">
<header>
  <h1>Manifold</h1>
  <span id="overall" class="badge">loading</span>
  <span id="meta" class="muted"></span>
</header>
<div id="problem" class="problem" hidden></div>
<form id="login" hidden>
  <label for="token">This gateway needs a bearer token to show its status.</label>
  <input id="token" type="password" autocomplete="off" placeholder="paste a token">
  <button type="submit">Show status</button>
  <p class="muted">Kept in this tab only (sessionStorage). A link may carry it as <code>#token=…</code>, never in the query string.</p>
</form>
<main id="content" hidden>
  <section>
    <h2>Upstreams</h2>
    <table id="upstreams">
      <thead><tr><th>Server</th><th>State</th><th>Transport</th><th>Era</th><th class="num">Tools</th><th class="num">Prompts</th><th class="num">Resources</th><th class="num">Templates</th><th>Last error</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <section id="drift-section">
    <h2>Held back by drift</h2>
    <p class="muted" id="drift-none">Nothing: every listed tool matches its baseline.</p>
    <div id="drift"></div>
  </section>
  <section>
    <h2>Recent calls</h2>
    <table id="calls">
      <thead><tr><th>Server</th><th class="num">Since start</th><th class="num">Window</th><th class="num">Errors</th><th class="num">p50 ms</th><th class="num">p99 ms</th></tr></thead>
      <tbody></tbody>
    </table>
    <p class="muted" id="calls-none">No calls yet.</p>
  </section>
  <section id="diagnostics-section" hidden>
    <h2>Diagnostics</h2>
    <ul id="diagnostics"></ul>
  </section>
${CONSOLE_SECTIONS}
  <section id="config-section" hidden>
    <h2>Config in force</h2>
    <details><summary>Show the config, secrets masked</summary><pre id="config"></pre></details>
  </section>
</main>
<footer class="muted">Updates every 2 seconds. <button id="forget" type="button" hidden>Forget token</button></footer>
</body>
</html>
`;
}

export const STATUS_CSS = `
[hidden] { display: none !important; }
:root { color-scheme: light dark; --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; --line: #8884; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1rem 1.5rem; }
header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
h1 { font-size: 1.4rem; margin: 0; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { opacity: .7; }
.badge { display: inline-block; padding: 0 .5rem; border-radius: .6rem; font-weight: 600; border: 1px solid currentColor; }
.ok, .ready, .idle { color: var(--ok); }
.degraded, .starting, .connecting, .backoff { color: var(--warn); }
.down, .failed, .unsupported, .stopping, .closed, .quarantined { color: var(--bad); }
.problem { border: 1px solid var(--bad); color: var(--bad); padding: .5rem .8rem; margin: .8rem 0; border-radius: .3rem; }
form { margin: 1rem 0; display: grid; gap: .4rem; max-width: 36rem; }
input { font: inherit; padding: .3rem; }
details { border: 1px solid var(--line); border-radius: .3rem; margin: .4rem 0; padding: .3rem .6rem; }
summary { cursor: pointer; }
pre { overflow-x: auto; margin: .4rem 0; font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; word-break: break-word; }
.del { color: var(--bad); }
.add { color: var(--ok); }
.hunk { opacity: .7; }
code { font-family: ui-monospace, monospace; }
ul.tools, #approvals, #servers, ul.drift-history { list-style: none; padding: 0; }
li.tool, li.approval, li.server { border-bottom: 1px solid var(--line); padding: .4rem 0; }
textarea { font: 12px/1.4 ui-monospace, monospace; width: 100%; }
.field-error { color: var(--bad); }
`;

// The script: no template literals or `${` inside (besides PAGE_TEXT_JS's place), so it can live
// in a TS template string.
export const STATUS_JS = String.raw`'use strict';
(function () {
  var jsonUrl = document.body.getAttribute('data-json');
${PAGE_TEXT_JS}
  // A token in the fragment never reaches the server; it is moved to this tab's storage and
  // taken out of the address bar and history.
  // A link opened in a tab that already shows the page changes only the fragment: read it then too.
  function fromFragment() {
    var m = /^#token=(.+)$/.exec(location.hash);
    if (!m) return false;
    try { sessionStorage.setItem(KEY, decodeURIComponent(m[1])); } catch (e) {}
    history.replaceState(null, '', location.pathname);
    return true;
  }
  fromFragment();
  window.addEventListener('hashchange', function () { if (fromFragment()) poll(); });
  function token() { try { return sessionStorage.getItem(KEY); } catch (e) { return null; } }
  $('login').addEventListener('submit', function (ev) {
    ev.preventDefault();
    var t = $('token').value.trim();
    if (t) { try { sessionStorage.setItem(KEY, t); } catch (e) {} }
    $('token').value = '';
    poll();
  });
  $('forget').addEventListener('click', function () {
    try { sessionStorage.removeItem(KEY); } catch (e) {}
    location.reload();
  });
  function problem(text) {
    var p = $('problem');
    if (text) { p.textContent = show(text); p.hidden = false; } else { p.hidden = true; }
  }
  function cell(row, text, cls) { row.appendChild(el('td', text, cls)); }
  function renderUpstreams(list) {
    var body = $('upstreams').tBodies[0];
    clear(body);
    list.forEach(function (u) {
      var tr = document.createElement('tr');
      tr.setAttribute('data-server', show(u.name));
      cell(tr, u.name);
      var state = el('td', u.state, 'state ' + String(u.state).replace(/[^a-z]/g, ''));
      tr.appendChild(state);
      cell(tr, u.transport);
      cell(tr, u.era ? u.era + (u.protocolVersion ? ' (' + u.protocolVersion + ')' : '') : '');
      ['tools', 'prompts', 'resources', 'templates'].forEach(function (k) { cell(tr, u.counts[k], 'num'); });
      cell(tr, u.lastError ? u.lastError + (u.rule ? ' [' + u.rule + ']' : '') : '', 'error');
      body.appendChild(tr);
    });
  }
  function diffBlock(text) {
    var pre = el('pre', undefined, 'diff');
    String(text).split('\n').forEach(function (line) {
      var c = line.charAt(0);
      var cls = c === '-' ? 'del' : c === '+' ? 'add' : c === '@' || c === '~' ? 'hunk' : '';
      pre.appendChild(el('span', line + '\n', cls));
    });
    return pre;
  }
  function renderDrift(list) {
    var root = $('drift');
    clear(root);
    var any = false;
    list.forEach(function (u) {
      if (!u.drift) return;
      any = true;
      var box = el('div');
      box.setAttribute('data-drift-server', show(u.name));
      box.appendChild(el('h3', u.name + (u.drift.identityChanged ? ': configured identity changed, every tool withheld' : '')));
      if (u.drift.retrust) {
        var how = el('p', '', 'muted how');
        how.appendChild(document.createTextNode('Review: '));
        how.appendChild(el('code', u.drift.review));
        how.appendChild(document.createTextNode(' · accept what it lists now: '));
        how.appendChild(el('code', u.drift.retrust));
        how.appendChild(document.createTextNode(' (one tool: --tool NAME)'));
        box.appendChild(how);
      }
      [['quarantined', 'quarantined (changed since trusted)'], ['withheld', 'withheld (new, never trusted)']].forEach(function (kind) {
        (u.drift[kind[0]] || []).forEach(function (t) {
          var d = el('details');
          d.open = true;
          d.setAttribute('data-tool', show(t.name));
          var s = el('summary');
          s.appendChild(el('strong', t.name));
          s.appendChild(el('span', ' ' + kind[1], kind[0] === 'quarantined' ? 'quarantined' : 'muted'));
          d.appendChild(s);
          if (t.diff) d.appendChild(diffBlock(t.diff));
          box.appendChild(d);
        });
      });
      root.appendChild(box);
    });
    $('drift-none').hidden = any;
  }
  function renderCalls(list) {
    var body = $('calls').tBodies[0];
    clear(body);
    list.forEach(function (c) {
      var tr = document.createElement('tr');
      tr.setAttribute('data-server', show(c.server));
      cell(tr, c.server);
      [c.total, c.window, c.errors, c.p50Ms, c.p99Ms].forEach(function (n) { cell(tr, n, 'num'); });
      body.appendChild(tr);
    });
    $('calls-none').hidden = list.length > 0;
  }
  function render(v) {
    var overall = $('overall');
    overall.textContent = show(v.status);
    overall.className = 'badge ' + String(v.status).replace(/[^a-z]/g, '');
    $('meta').textContent = show('v' + v.version + ' · ' + (v.view === 'admin' ? 'admin view' : 'tenant ' + v.tenant) + ' · ' + new Date(v.generatedAt).toLocaleTimeString());
    renderUpstreams(v.upstreams);
    renderDrift(v.upstreams);
    renderCalls(v.calls);
    var diags = $('diagnostics');
    clear(diags);
    (v.diagnostics || []).forEach(function (d) { diags.appendChild(el('li', d.server + ': ' + d.message + ' [' + d.rule + ']')); });
    $('diagnostics-section').hidden = !v.diagnostics || v.diagnostics.length === 0;
    $('config-section').hidden = !v.config;
    $('config').textContent = v.config ? show(JSON.stringify(v.config, null, 2)) : '';
    $('content').hidden = false;
    $('login').hidden = true;
  }
  var timer;
  function poll() {
    clearTimeout(timer);
    var headers = { accept: 'application/json' };
    var t = token();
    if (t) headers.authorization = 'Bearer ' + t;
    fetch(jsonUrl, { headers: headers, cache: 'no-store', credentials: 'omit' })
      .then(function (res) {
        if (res.status === 401) {
          $('login').hidden = false;
          $('content').hidden = true;
          $('forget').hidden = !t;
          problem(t ? 'The token was not accepted.' : '');
          return;
        }
        if (!res.ok) throw new Error('the gateway answered HTTP ' + res.status);
        return res.json().then(function (v) {
          problem('');
          $('forget').hidden = !t;
          render(v);
        });
      })
      .catch(function (e) { problem('Cannot reach the gateway: ' + e.message); })
      .finally(function () { timer = setTimeout(poll, 2000); });
  }
  poll();
})();
`;
