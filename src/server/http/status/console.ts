/**
 * The console (#52): the status page's working half, served beside it by the core (Node and
 * Workers alike) under the same CSP, as a second static script that holds no data. With the token
 * the status page keeps (this tab's sessionStorage), it shows:
 * - the catalog, searchable with the ranking of search mode (`catalog.json?q=`), each tool with its
 *   schema, risk class, approval rule, whether drift holds it back and (for an admin) its drift
 *   history (`/admin/servers/<name>/drift/history`), and "Try it": a form built
 *   from the tool's input schema that calls it over `/mcp` as the signed-in principal, through the
 *   normal path (grants, approval, audit);
 * - for an admin (the admin API, docs/admin.md): the approvals inbox (approve or decline), drift
 *   review (the diff, then Accept by the digest of what was shown, and the server's drift
 *   history), and servers (add and edit with
 *   each config error shown by its path, remove with a confirming second click).
 * Everything a server or upstream says is rendered with textContent, never as markup.
 */
import type { Hono, MiddlewareHandler } from 'hono';
import type { Authenticator } from '../../../auth/principal.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { PAGE_TEXT_JS } from './page-text.js';

/** The most tools one catalog answer holds. */
const MAX_LISTED = 200;

export interface ConsoleRoutes {
  authenticate: Authenticator;
  guard: MiddlewareHandler;
  headers: Record<string, string>;
}

/** `<base>/catalog.json[?q=]`: the principal's own catalog, or the best matches of a search. */
export function mountConsole(app: Hono, gateway: Gateway, base: string, routes: ConsoleRoutes): void {
  app.use(`${base}/console.js`, routes.guard);
  app.get(
    `${base}/console.js`,
    () =>
      new Response(CONSOLE_JS, {
        headers: {
          ...routes.headers,
          'content-type': 'text/javascript; charset=utf-8',
          'cache-control': 'no-cache',
        },
      }),
  );
  app.use(`${base}/catalog.json`, routes.guard);
  app.get(`${base}/catalog.json`, async (c) => {
    const principal = gateway.profilePrincipal(await routes.authenticate(c.req.raw), undefined);
    await gateway.ready;
    const q = (c.req.query('q') ?? '').trim().slice(0, 200);
    const entries = q
      ? gateway.searchTools(principal, q, 50)
      : gateway.visibleEntries(principal).slice(0, MAX_LISTED);
    const tools = entries.map((e) => ({
      name: e.name,
      server: e.server,
      ...(e.tool.title !== undefined ? { title: e.tool.title } : {}),
      description: e.tool.description ?? '',
      inputSchema: e.full.inputSchema,
      risk: e.risk,
      approval: e.approval,
      ...(e.quarantined ? { quarantined: true } : {}),
      // The upstream's own name, which drift history is kept under: for an admin's history view.
      ...(principal.admin === true ? { original: e.original } : {}),
    }));
    return new Response(JSON.stringify({ tools, admin: principal.admin === true }), {
      headers: {
        ...routes.headers,
        'content-type': 'application/json; charset=utf-8',
        'cache-control': 'no-store',
        vary: 'authorization',
      },
    });
  });
}

/** The console's sections of the shell (html.ts), hidden until the script fills them. */
export const CONSOLE_SECTIONS = `
  <section id="catalog-section">
    <h2>Catalog</h2>
    <form id="catalog-search"><input id="catalog-q" type="search" placeholder="search tools" aria-label="search tools"> <button type="submit">Search</button></form>
    <ul id="catalog" class="tools"></ul>
    <div id="try" hidden>
      <h3 id="try-title"></h3>
      <form id="try-form"><div id="try-fields"></div><button type="submit" id="try-run">Run</button></form>
      <pre id="try-result"></pre>
    </div>
  </section>
  <section id="approvals-section" hidden>
    <h2>Approvals waiting</h2>
    <p class="muted" id="approvals-none">Nothing waits for a decision.</p>
    <ul id="approvals"></ul>
  </section>
  <section id="review-section" hidden>
    <h2>Drift review</h2>
    <div id="review-servers"></div>
    <pre id="review-diff"></pre>
    <button id="review-accept" type="button" hidden>Accept</button>
    <p id="review-result"></p>
    <h3 id="review-history-title" hidden>Drift history</h3>
    <ul id="review-history" class="drift-history"></ul>
  </section>
  <section id="servers-section" hidden>
    <h2>Servers</h2>
    <ul id="servers"></ul>
    <form id="server-form">
      <label>Name <input id="server-name" autocomplete="off"></label>
      <label>Config (JSON, as in the config file) <textarea id="server-config" rows="5"></textarea></label>
      <div><button type="button" id="server-check">Check</button> <button type="submit" id="server-save">Save</button></div>
      <ul id="server-errors"></ul>
      <p id="server-result"></p>
    </form>
  </section>`;

// No template literals or `${` inside (besides PAGE_TEXT_JS's place): it lives in a TS template string.
export const CONSOLE_JS = String.raw`'use strict';
(function () {
  var base = document.body.getAttribute('data-json').replace(/\/status\.json$/, '');
${PAGE_TEXT_JS}
  function headers(extra) {
    var h = extra || {};
    var t = null;
    try { t = sessionStorage.getItem(KEY); } catch (e) { t = null; }
    if (t) h.authorization = 'Bearer ' + t;
    return h;
  }
  function api(method, path, body) {
    var init = { method: method, headers: headers(body === undefined ? {} : { 'content-type': 'application/json' }), cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) init.body = JSON.stringify(body);
    return fetch(path, init).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (json) { return { status: res.status, body: json }; });
    });
  }
  function button(text, onClick) {
    var b = el('button', text);
    b.type = 'button';
    b.addEventListener('click', onClick);
    return b;
  }

  // The catalog, and Try it.
  var admin = false;
  var loaded = false;
  function loadCatalog(q) {
    api('GET', base + '/catalog.json' + (q ? '?q=' + encodeURIComponent(q) : '')).then(function (r) {
      if (r.status !== 200) return;
      loaded = true;
      admin = r.body.admin === true;
      var list = $('catalog');
      clear(list);
      (r.body.tools || []).forEach(function (t) {
        var li = el('li', undefined, 'tool');
        li.setAttribute('data-tool', t.name);
        li.appendChild(el('strong', t.name, 'tool-name'));
        li.appendChild(el('span', ' ' + t.server + ' · risk ' + t.risk + ' · approval ' + t.approval + (t.quarantined ? ' · held back by drift' : ''), 'muted'));
        li.appendChild(el('p', t.description, 'tool-description'));
        var d = el('details');
        d.appendChild(el('summary', 'Schema'));
        d.appendChild(el('pre', JSON.stringify(t.inputSchema, null, 1)));
        li.appendChild(d);
        if (admin && t.original !== undefined) li.appendChild(historyDetails(t));
        li.appendChild(button('Try it', function () { openTry(t); }));
        list.appendChild(li);
      });
      if (admin) loadAdmin();
    });
  }
  // Drift history: each time drift held a tool back, and each accepted change (admin API).
  var KINDS = { quarantined: 'held back: changed since trusted', withheld: 'held back: never trusted', accepted: 'accepted' };
  function historyItems(list, events, withTool) {
    clear(list);
    if (events.length === 0) { list.appendChild(el('li', 'No drift recorded.', 'muted')); return; }
    events.forEach(function (e) {
      var li = el('li', undefined, 'drift-event');
      li.setAttribute('data-kind', e.kind);
      if (withTool) li.appendChild(el('strong', e.tool + ' ', 'drift-tool'));
      li.appendChild(el('span', (KINDS[e.kind] || e.kind) + (e.by ? ' by ' + e.by : ''), 'drift-kind'));
      li.appendChild(el('span', ' · ' + e.at + (e.fingerprint ? ' · fingerprint ' + e.fingerprint.slice(0, 16) : ' · removed') + (e.digest ? ' · review ' + e.digest.slice(0, 16) : ''), 'muted'));
      list.appendChild(li);
    });
  }
  function loadHistory(server, tool, list, withTool) {
    var q = tool === undefined ? '' : '?tool=' + encodeURIComponent(tool);
    return api('GET', '/admin/servers/' + encodeURIComponent(server) + '/drift/history' + q).then(function (r) {
      if (r.status !== 200) { clear(list); list.appendChild(el('li', r.body.error || 'cannot read the history')); return; }
      historyItems(list, r.body.history || [], withTool);
    });
  }
  function historyDetails(t) {
    var d = el('details', undefined, 'tool-history');
    d.appendChild(el('summary', 'Drift history'));
    var list = el('ul', undefined, 'drift-history');
    d.appendChild(list);
    d.addEventListener('toggle', function () { if (d.open) loadHistory(t.server, t.original, list, false); });
    return d;
  }
  $('catalog-search').addEventListener('submit', function (ev) { ev.preventDefault(); loadCatalog($('catalog-q').value); });

  var trying = null;
  function openTry(t) {
    trying = t;
    $('try').hidden = false;
    $('try-title').textContent = show('Try ' + t.name);
    $('try-result').textContent = '';
    var fields = $('try-fields');
    clear(fields);
    var props = (t.inputSchema && t.inputSchema.properties) || {};
    Object.keys(props).forEach(function (name) {
      var p = props[name] || {};
      var label = el('label', name + ' ');
      var input;
      if (p.type === 'boolean') { input = document.createElement('input'); input.type = 'checkbox'; }
      else if (p.type === 'number' || p.type === 'integer') { input = document.createElement('input'); input.type = 'number'; input.step = 'any'; }
      else if (p.type === 'string') { input = document.createElement('input'); input.type = 'text'; }
      else { input = document.createElement('textarea'); input.placeholder = 'JSON'; }
      input.setAttribute('data-arg', name);
      input.setAttribute('data-type', String(p.type || 'json'));
      label.appendChild(input);
      fields.appendChild(label);
    });
  }
  $('try-form').addEventListener('submit', function (ev) {
    ev.preventDefault();
    if (!trying) return;
    var args = {};
    var bad = null;
    Array.prototype.forEach.call(document.querySelectorAll('[data-arg]'), function (input) {
      var name = input.getAttribute('data-arg');
      var type = input.getAttribute('data-type');
      if (type === 'boolean') { args[name] = input.checked; return; }
      if (input.value === '') return;
      if (type === 'number' || type === 'integer') { args[name] = Number(input.value); return; }
      if (type === 'string') { args[name] = input.value; return; }
      try { args[name] = JSON.parse(input.value); } catch (e) { bad = name + ' is not JSON'; }
    });
    if (bad) { $('try-result').textContent = show(bad); return; }
    var params = { name: trying.name, arguments: args, _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'manifold-console', version: '1' } } };
    $('try-result').textContent = 'running…';
    fetch('/mcp', { method: 'POST', credentials: 'omit', cache: 'no-store', headers: headers({
      'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': trying.name }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: params }) })
      .then(function (res) { return res.text(); })
      .then(function (text) {
        var last = text;
        if (text.indexOf('data:') >= 0) {
          text.split('\n').forEach(function (line) { if (line.indexOf('data:') === 0) last = line.slice(5); });
        }
        var msg = JSON.parse(last);
        if (msg.error) { $('try-result').textContent = show('Error: ' + msg.error.message); return; }
        var out = (msg.result.content || []).map(function (c) { return c.type === 'text' ? c.text : '[' + c.type + ']'; }).join('\n');
        $('try-result').textContent = show((msg.result.isError ? 'Tool error: ' : '') + out);
      })
      .catch(function (e) { $('try-result').textContent = show('Failed: ' + e.message); });
  });

  // The admin's sections, from the admin API.
  function loadAdmin() {
    $('approvals-section').hidden = false;
    $('review-section').hidden = false;
    $('servers-section').hidden = false;
    loadApprovals();
    loadServers();
  }
  function loadApprovals() {
    api('GET', '/admin/approvals?status=pending').then(function (r) {
      var list = $('approvals');
      clear(list);
      var items = (r.body && r.body.approvals) || [];
      $('approvals-none').hidden = items.length > 0;
      items.forEach(function (a) {
        var li = el('li', undefined, 'approval');
        li.setAttribute('data-approval', a.id);
        li.appendChild(el('strong', a.tool));
        li.appendChild(el('span', ' asked by ' + a.subject + ' (' + a.tenant + '), risk ' + a.risk + ', expires ' + a.expiresAt, 'muted'));
        li.appendChild(el('pre', a.arguments));
        li.appendChild(button('Approve', function () { decide(a.id, 'approve'); }));
        li.appendChild(button('Decline', function () { decide(a.id, 'decline'); }));
        list.appendChild(li);
      });
    });
  }
  function decide(id, decision) {
    api('POST', '/admin/approvals/' + encodeURIComponent(id), { decision: decision }).then(loadApprovals);
  }

  function loadServers() {
    api('GET', '/admin/servers').then(function (r) {
      var list = $('servers');
      clear(list);
      var review = $('review-servers');
      clear(review);
      ((r.body && r.body.servers) || []).forEach(function (s) {
        var li = el('li', undefined, 'server');
        li.setAttribute('data-server', s.name);
        li.appendChild(el('strong', s.name));
        li.appendChild(el('span', ' ' + s.source + ' · ' + s.state + (s.era ? ' · ' + s.era : '') + ' · ' + s.tools + ' tools', 'muted'));
        if (s.source === 'api') {
          li.appendChild(button('Edit', function () { editServer(s.name); }));
          var remove = button('Remove', function () {
            if (remove.getAttribute('data-confirm') !== 'yes') {
              remove.setAttribute('data-confirm', 'yes');
              remove.textContent = 'Confirm remove';
              return;
            }
            api('DELETE', '/admin/servers/' + encodeURIComponent(s.name)).then(function () { loadServers(); });
          });
          li.appendChild(remove);
        }
        list.appendChild(li);
        review.appendChild(button('Review ' + s.name, function () { reviewDrift(s.name); }));
      });
    });
  }
  function editServer(name) {
    api('GET', '/admin/servers/' + encodeURIComponent(name)).then(function (r) {
      $('server-name').value = name;
      $('server-config').value = JSON.stringify(r.body.config || {}, null, 1);
    });
  }
  function sendServer(dryRun) {
    var name = $('server-name').value;
    var config;
    var errors = $('server-errors');
    clear(errors);
    $('server-result').textContent = '';
    try { config = JSON.parse($('server-config').value || '{}'); } catch (e) { errors.appendChild(el('li', 'the config is not JSON: ' + e.message)); return; }
    var exists = Array.prototype.some.call(document.querySelectorAll('[data-server]'), function (li) { return li.getAttribute('data-server') === name; });
    var q = dryRun ? '?dryRun=1' : '';
    var call = exists ? api('PUT', '/admin/servers/' + encodeURIComponent(name) + q, { config: config })
      : api('POST', '/admin/servers' + q, { name: name, config: config });
    call.then(function (r) {
      (r.body.errors || []).forEach(function (e) {
        var li = el('li', undefined, 'field-error');
        li.setAttribute('data-path', e.path);
        li.appendChild(el('code', e.path));
        li.appendChild(document.createTextNode(' ' + show(e.message) + (e.fix ? ' — ' + show(e.fix) : '')));
        errors.appendChild(li);
      });
      if (r.body.error) errors.appendChild(el('li', r.body.error, 'field-error'));
      if (r.body.diff && (r.body.errors || []).length === 0) {
        $('server-result').textContent = show((r.body.applied ? 'Saved: ' : 'Would be ') + r.body.diff.change + (r.body.diff.fields.length ? ' (' + r.body.diff.fields.join(', ') + ')' : ''));
      }
      if (r.body.applied) loadServers();
    });
  }
  $('server-check').addEventListener('click', function () { sendServer(true); });
  $('server-form').addEventListener('submit', function (ev) { ev.preventDefault(); sendServer(false); });

  var reviewed = null;
  function reviewDrift(name) {
    $('review-result').textContent = '';
    api('GET', '/admin/servers/' + encodeURIComponent(name) + '/drift').then(function (r) {
      if (r.status !== 200) { $('review-diff').textContent = show(r.body.error || 'cannot review'); $('review-accept').hidden = true; return; }
      reviewed = { name: name, digest: r.body.digest };
      $('review-diff').textContent = show(r.body.changes + ' change(s)\n' + (r.body.lines || []).join('\n'));
      $('review-accept').hidden = r.body.changes === 0;
    });
    reviewHistory(name);
  }
  function reviewHistory(name) {
    $('review-history-title').hidden = false;
    $('review-history-title').textContent = show('Drift history of ' + name);
    loadHistory(name, undefined, $('review-history'), true);
  }
  $('review-accept').addEventListener('click', function () {
    if (!reviewed) return;
    api('POST', '/admin/servers/' + encodeURIComponent(reviewed.name) + '/retrust', { digest: reviewed.digest }).then(function (r) {
      $('review-result').textContent = show(r.status === 200 ? 'Accepted ' + r.body.changes + ' change(s)' : r.body.error);
      $('review-accept').hidden = true;
      reviewHistory(reviewed.name);
      loadCatalog($('catalog-q').value);
    });
  });

  loadCatalog('');
  // Until a token is given (the status page's form), and then the inbox, every 2 s.
  setInterval(function () { if (!loaded) loadCatalog(''); else if (admin) loadApprovals(); }, 2000);
})();
`;
