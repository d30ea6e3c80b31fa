/**
 * Servers over HTTP (#52): list them with their state and era, read one, add, change and remove
 * the ones kept in the store (gateway/managed-servers.ts), and a dry run of any change
 * (`?dryRun=1`) that answers with the config errors (the same messages, paths and fixes as the
 * config file) and the diff of what would change, applying nothing. A server's config is shown
 * without its secrets: header and environment values are hidden, `${VAR}` references stay as
 * written.
 */
import type { Context, Hono } from 'hono';
import type { Principal } from '../../../auth/principal.js';
import type { ServerConfig } from '../../../config/types.js';
import type { Gateway } from '../../../gateway/gateway.js';
import { isObject } from '../../../lib/json.js';
import { type AdminContext, readJson } from './context.js';

const HIDDEN = '[hidden]';

/** A running server as the list shows it. */
export function serverView(gateway: Gateway, name: string): Record<string, unknown> | undefined {
  const upstream = gateway.pool.get(name);
  const source = gateway.managed.source(name);
  if (!upstream || !source) return undefined;
  const s = upstream.status();
  return {
    name,
    source,
    editable: source === 'api' || !gateway.managed.fileLocked,
    transport: s.transport,
    state: s.state,
    ...(s.era ? { era: s.era } : {}),
    ...(s.protocolVersion ? { protocolVersion: s.protocolVersion } : {}),
    tools: s.tools,
    disabled: upstream.config.disabled,
    ...(s.lastError ? { lastError: gateway.redact(s.lastError) } : {}),
  };
}

/** A server's config with its secrets hidden: header and env values, client secrets; URLs and args redacted. */
export function configView(gateway: Gateway, server: ServerConfig): Record<string, unknown> {
  const { headerTemplates: _templates, name: _name, auth, ...rest } = server;
  const hide = (o: Record<string, string>) => Object.fromEntries(Object.keys(o).map((k) => [k, HIDDEN]));
  const { clientSecret: _secret, ...shownAuth } = auth ?? ({} as NonNullable<ServerConfig['auth']>);
  return {
    ...rest,
    headers: hide(server.headers),
    env: hide(server.env),
    ...(server.url ? { url: gateway.redact(server.url) } : {}),
    args: server.args.map((a) => gateway.redact(a)),
    ...(auth ? { auth: shownAuth } : {}),
  };
}

/** A stored entry as written, with any header or env value that is not a `${VAR}` reference hidden. */
function entryView(entry: Record<string, unknown>): Record<string, unknown> {
  const reference = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/;
  const hide = (o: unknown) =>
    isObject(o)
      ? Object.fromEntries(
          Object.entries(o).map(([k, v]) => [k, typeof v === 'string' && reference.test(v) ? v : HIDDEN]),
        )
      : o;
  return {
    ...entry,
    ...(entry.headers !== undefined ? { headers: hide(entry.headers) } : {}),
    ...(entry.env !== undefined ? { env: hide(entry.env) } : {}),
  };
}

export function mountServers(app: Hono, ctx: AdminContext): void {
  const { gateway } = ctx;
  const managed = gateway.managed;
  const dryRun = (c: Context) => ['1', 'true'].includes(c.req.query('dryRun') ?? '');

  app.get('/admin/servers', async (c) => {
    await ctx.admin(c);
    const servers = gateway.config.servers
      .map((s) => serverView(gateway, s.name))
      .filter((v) => v !== undefined);
    return c.json({ servers });
  });

  app.get('/admin/servers/:name', async (c) => {
    await ctx.admin(c);
    const name = c.req.param('name');
    const view = serverView(gateway, name);
    const running = gateway.config.servers.find((s) => s.name === name);
    if (!view || !running) return c.json({ error: `no server named ${name}` }, 404);
    const stored = managed.source(name) === 'api' ? managed.storedEntry(name) : undefined;
    return c.json({
      ...view,
      // A server added through the API is shown as it was written, so an edit round-trips.
      config: stored ? entryView(stored.entry) : configView(gateway, running),
      ...(stored ? { updatedBy: stored.updatedBy, updatedAt: new Date(stored.updatedAt).toISOString() } : {}),
    });
  });

  /** Validates and (unless a dry run) stores `entry` under `name`; `adding` refuses an existing name. */
  const write = async (c: Context, principal: Principal, name: string, entry: unknown, adding: boolean) => {
    const source = managed.source(name) ?? (managed.storedEntry(name) ? 'api' : undefined);
    if (adding && source) {
      return c.json(
        { error: `a server named ${name} exists: change it with PUT /admin/servers/${name}` },
        409,
      );
    }
    if (!adding && !source) return c.json({ error: `no server named ${name}` }, 404);
    if (source === 'file' && managed.fileLocked) {
      return c.json(
        {
          error: `server ${name} comes from the config file, which gateway.admin.fileServers keeps locked: change it in the file`,
        },
        409,
      );
    }
    const parsed = managed.parse(name, entry);
    if (!parsed.ok) return c.json({ errors: parsed.errors, applied: false }, dryRun(c) ? 200 : 400);
    const diff = managed.diff(name, parsed.server);
    if (dryRun(c)) return c.json({ errors: [], diff, applied: false });
    await managed.put(name, entry as Record<string, unknown>, principal.subject);
    ctx.audit(principal, adding ? 'server.add' : 'server.change', {
      server: name,
      change: diff.change,
      fields: diff.fields,
    });
    return c.json(
      { errors: [], diff, applied: true, server: serverView(gateway, name) ?? { name } },
      adding ? 201 : 200,
    );
  };

  app.post('/admin/servers', async (c) => {
    const principal = await ctx.admin(c);
    const body = await readJson(c, '{"name": "github", "config": {"url": "https://..."}}');
    if (!body.ok) return body.reply;
    const { name, config } = body.value;
    if (typeof name !== 'string' || !isObject(config)) {
      return c.json(
        { error: 'write {"name": "<server name>", "config": {<the server, as in the config file>}}' },
        400,
      );
    }
    return write(c, principal, name, config, true);
  });

  app.put('/admin/servers/:name', async (c) => {
    const principal = await ctx.admin(c);
    const body = await readJson(c, '{"config": {"url": "https://..."}}');
    if (!body.ok) return body.reply;
    if (!isObject(body.value.config)) {
      return c.json({ error: 'write {"config": {<the server, as in the config file>}}' }, 400);
    }
    return write(c, principal, c.req.param('name'), body.value.config, false);
  });

  app.delete('/admin/servers/:name', async (c) => {
    const principal = await ctx.admin(c);
    const name = c.req.param('name');
    const source = managed.source(name) ?? (managed.storedEntry(name) ? 'api' : undefined);
    if (!source) return c.json({ error: `no server named ${name}` }, 404);
    if (source === 'file') {
      return c.json({ error: `server ${name} comes from the config file: remove it there` }, 409);
    }
    const diff = managed.diff(name, undefined);
    if (dryRun(c)) return c.json({ errors: [], diff, applied: false });
    await managed.remove(name);
    ctx.audit(principal, 'server.remove', { server: name });
    return c.json({ errors: [], diff, applied: true });
  });
}
