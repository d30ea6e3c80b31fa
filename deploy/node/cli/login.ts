/**
 * `manifold login <server>` and `manifold logout <server>` (#19): an operator signs
 * the deployment in to a protected upstream (mode `gateway`, or the catalog identity of mode
 * `user`) from a terminal, and signs it out. The token goes to the configured store, sealed, where
 * every running gateway uses it within seconds (token-slots.ts REREAD_MS). A login asks for every
 * scope asked before, a step-up's included, which the store keeps with the token. The browser
 * comes back to a loopback listener (RFC 8252 §7.3: `http://127.0.0.1:<port>/oauth/callback`), so
 * the CLI has its own client registration at the authorization server (`server#cli`), apart from
 * the gateway's callback.
 */
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OAUTH_DEFAULTS } from '../../../src/config/defaults.js';
import type { Config, ServerConfig } from '../../../src/config/types.js';
import type { Logger } from '../../../src/lib/log.js';
import type { UpstreamAuth } from '../../../src/upstream/oauth/auth-fetch.js';
import { completeLogin } from '../../../src/upstream/oauth/login.js';
import { createUpstreamAuths, defaultRedirectUri } from '../../../src/upstream/oauth/registry.js';
import { OAuthError, type SubjectKey } from '../../../src/upstream/oauth/types.js';
import { nodePlatform } from '../runtime/platform.js';
import { type OpenedStore, openConfiguredStore } from '../store/open.js';
import { type CliIO, CommandError, loadOrReport, parseFlags, runCommand, UsageError } from './run.js';

export const LOGIN_USAGE = `usage: manifold login SERVER [--config manifold.json] [--no-open] [--subject KEY]
       manifold logout SERVER [--config manifold.json] [--subject KEY | --all]`;

/** Where the loopback listener takes the browser back. */
export const CLI_CALLBACK_PATH = '/oauth/callback';

interface Prepared {
  config: Config;
  server: ServerConfig;
  store: OpenedStore;
}

/** The config, the server (which must sign in with OAuth) and the store the token goes to. */
async function prepare(name: string, path: string, io: CliIO, log: Logger): Promise<Prepared | undefined> {
  const loaded = loadOrReport(path, io);
  if (!loaded) return undefined;
  const { config } = loaded;
  const server = config.servers.find((s) => s.name === name);
  if (!server) {
    const names = config.servers.map((s) => s.name).join(', ');
    throw new UsageError(`no server named ${name} in ${loaded.path}; configured: ${names}`);
  }
  const mode = server.auth?.mode ?? 'static';
  if (mode === 'static') {
    throw new CommandError(
      `server ${name} sends its configured headers (auth mode static): there is nothing to sign in to; set "auth": "gateway" to sign the gateway in with OAuth`,
    );
  }
  if (!config.gateway.store) {
    throw new CommandError(
      'gateway.store is false: a token from manifold login would be lost when this command exits; configure a store (a SQLite path or Postgres) that the gateway uses too',
    );
  }
  const store = await openConfiguredStore(config.gateway.store, log);
  if (!store) throw new CommandError('the state store could not be opened');
  return { config, server, store };
}

/** The one server's UpstreamAuth, over the unwrapped egress-guarded fetch and the opened store. */
async function upstreamAuth(p: Prepared, log: Logger): Promise<Map<string, UpstreamAuth>> {
  const platform = nodePlatform(log, p.config.gateway);
  return createUpstreamAuths(
    { ...p.config, servers: [p.server] },
    {
      platform,
      credentials: p.store.credentials,
      claims: p.store,
      // The gateway's own callback, so that its registration (keyed by the server name) is told
      // apart from this command's loopback one (`server#cli`).
      redirectUri: () => defaultRedirectUri(p.config),
    },
  );
}

/** Opens `url` in the default browser, best effort: the URL is printed either way. */
function openBrowser(url: string): void {
  const [command, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/c', 'start', '""', url]]
        : ['xdg-open', [url]];
  try {
    const child = spawn(command, args, { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  } catch {
    // No opener on this machine: the person copies the printed URL.
  }
}

/** A listener on 127.0.0.1 at a free port, for the browser's return. */
async function listen(): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return server;
}

function answer(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, {
    'content-type': `${type}; charset=utf-8`,
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
  });
  res.end(body);
}

/**
 * Waits for the browser at the callback path and completes the login there. A request that does
 * not carry a state this command issued (another page, a stray or forged request) is answered 400
 * and the wait goes on; a sign-in the authorization server refused, or a code that cannot be
 * redeemed, ends it.
 */
function awaitCallback(
  server: Server,
  registry: Map<string, UpstreamAuth>,
  name: string,
  ttlMs: number,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(new CommandError(`no sign-in within ${Math.round(ttlMs / 1000)} s; run manifold login again`)),
      ttlMs,
    );
    timer.unref();
    const done = (e?: Error) => {
      clearTimeout(timer);
      if (e) reject(e);
      else resolve();
    };
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (req.method !== 'GET' || url.pathname !== CLI_CALLBACK_PATH) {
        answer(res, 404, 'text/plain', 'not found');
        return;
      }
      completeLogin(registry, url.searchParams).then(
        () => {
          answer(
            res,
            200,
            'text/html',
            `<!doctype html><meta charset="utf-8"><title>Signed in</title><p>Manifold is signed in to ${name}. You can close this page.</p>`,
          );
          done();
        },
        (e: unknown) => {
          const rule = e instanceof OAuthError ? e.rule : 'token-failed';
          answer(res, 400, 'text/plain', `sign-in failed: ${rule}`);
          if (rule === 'state-invalid') return;
          done(new CommandError(`sign-in to ${name} failed: ${describeRefusal(e)}`));
        },
      );
    });
  });
}

/** A refusal by rule and message (OAuthError messages carry no secret and no URL query). */
function describeRefusal(e: unknown): string {
  if (e instanceof OAuthError) return `${e.rule}: ${e.message}`;
  return e instanceof Error ? e.message.slice(0, 300) : 'unknown error';
}

/** `manifold login SERVER [--config F] [--no-open] [--subject KEY]`. */
export function runLogin(argv: string[], io: CliIO, log: Logger): Promise<number> {
  return runCommand('login', LOGIN_USAGE, io, async () => {
    const { values, positionals } = parse(argv, 'no-open');
    const name = positionals[0]!;
    const subject: SubjectKey = values.subject ?? '';
    const p = await prepare(name, values.config, io, log);
    if (!p) return 2;
    if (p.server.auth?.grant === 'client_credentials') {
      await closeStore(p.store);
      throw new CommandError(
        `server ${name} uses client_credentials: the gateway obtains its token itself, with no sign-in`,
      );
    }
    let listener: Server | undefined;
    try {
      listener = await listen();
      const port = (listener.address() as AddressInfo).port;
      const redirectUri = `http://127.0.0.1:${port}${CLI_CALLBACK_PATH}`;
      const registry = await upstreamAuth(p, log);
      const auth = registry.get(name)!;
      const begun = await auth.beginLogin(subject, redirectUri).catch((e: unknown) => {
        throw new CommandError(`cannot sign in to ${name}: ${describeRefusal(e)}`);
      });
      io.out(`Open this URL in a browser to sign in to ${name}:\n\n  ${begun.url}\n\n`);
      if (!values['no-open']) openBrowser(begun.url);
      const ttl = (p.config.gateway.oauth?.flowTtlSeconds ?? OAUTH_DEFAULTS.flowTtlSeconds) * 1000;
      await awaitCallback(listener, registry, name, Math.max(0, Math.min(ttl, begun.expiresAt - Date.now())));
      io.out(
        `signed in to ${name}${subject ? ` for subject ${subject}` : ''}; running gateways use the token within seconds\n`,
      );
      return 0;
    } finally {
      listener?.closeAllConnections();
      listener?.close();
      await closeStore(p.store);
    }
  });
}

/** `manifold logout SERVER [--config F] [--subject KEY | --all]`: revokes where it can, then deletes. */
export function runLogout(argv: string[], io: CliIO, log: Logger): Promise<number> {
  return runCommand('logout', LOGIN_USAGE, io, async () => {
    const { values, positionals } = parse(argv, 'all');
    const name = positionals[0]!;
    if (values.all && values.subject !== undefined)
      throw new UsageError('--subject and --all exclude each other');
    const p = await prepare(name, values.config, io, log);
    if (!p) return 2;
    try {
      const before = await p.store.credentials.listTokens(name);
      const subject: SubjectKey | undefined = values.all ? undefined : (values.subject ?? '');
      const auth = (await upstreamAuth(p, log)).get(name)!;
      await auth.logout(subject);
      const gone = subject === undefined ? before.length : before.filter((t) => t.subject === subject).length;
      const whom =
        subject === undefined ? 'every subject' : subject === '' ? 'the gateway' : `subject ${subject}`;
      io.out(`signed ${whom} out of ${name} (${gone} token${gone === 1 ? '' : 's'} removed)\n`);
      return 0;
    } finally {
      await closeStore(p.store);
    }
  });
}

interface Parsed {
  values: { config: string; subject?: string; all?: boolean; 'no-open'?: boolean };
  positionals: string[];
}

/** The flags both commands take, plus `extra` (a boolean each); exactly one server name. */
function parse(argv: string[], extra: 'no-open' | 'all'): Parsed {
  const parsed = parseFlags({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c', default: 'manifold.json' },
      subject: { type: 'string' },
      [extra]: { type: 'boolean' },
    },
  }) as Parsed;
  if (parsed.positionals.length !== 1) throw new UsageError('name exactly one server');
  return parsed;
}

async function closeStore(store: OpenedStore): Promise<void> {
  await Promise.resolve(store.close()).catch(() => {});
}
