/**
 * `manifold stdio` (#54): the gateway for one client that starts it as a stdio server (Claude
 * Desktop's config, IDE plugins), without a bridge. The same gateway as `serve`: the config's
 * catalog, policy, drift, approval (asked of this client) and audit; only the transport differs
 * (deploy/node/stdio/front.ts). stdout carries protocol messages only: logs go to stderr, or to
 * `--log-file`.
 *
 * Who the client is: a token (`--token-file`, or `MANIFOLD_TOKEN`) verified like any other when
 * the config has `gateway.auth`; without it, `gateway.localPrincipal` (default: the anonymous
 * principal, every tool the config exposes, as over HTTP without auth).
 */
import { createWriteStream, openSync, readFileSync } from 'node:fs';
import { type Authenticator, anonymousPrincipal, type Principal } from '../../../src/auth/principal.js';
import { LOG_LEVELS } from '../../../src/config/defaults.js';
import type { LocalPrincipalConfig } from '../../../src/config/types.js';
import { bodyTooLarge } from '../../../src/errors.js';
import { createJsonLogger, type Logger, type LogLevel } from '../../../src/lib/log.js';
import { createHttp } from '../../../src/server/http/app.js';
import { createNodeGateway } from '../http/serve.js';
import { BoundedLines, overLongId } from '../runtime/lines.js';
import { batchedLines, nodeLogger } from '../runtime/log.js';
import { StdioFront } from '../stdio/front.js';
import { packageVersion } from './load.js';
import { type CliIO, flagsOr, loadOrReport, writeUsageError } from './run.js';

const USAGE =
  'usage: manifold stdio [--config manifold.json] [--profile P] [--token-file F] [--log-file F] [--log-level info]';

/** The principal of a gateway without auth, from `gateway.localPrincipal`. */
export function localPrincipal(local: LocalPrincipalConfig | undefined): Principal {
  if (!local) return anonymousPrincipal;
  const { subject, tenant, admin } = local;
  const grants = local.grants.includes('*') ? '*' : [...new Set(local.grants)].sort();
  const key = JSON.stringify([tenant, subject]);
  return {
    subject,
    tenant,
    grants,
    admin,
    key,
    viewKey: JSON.stringify([tenant, subject, grants, null, admin]),
    shareKey: JSON.stringify([tenant, grants, null, admin]),
  };
}

export async function runStdio(argv: string[], io: CliIO): Promise<number> {
  const flags = flagsOr('stdio', USAGE, io, {
    args: argv,
    options: {
      config: { type: 'string', short: 'c', default: 'manifold.json' },
      profile: { type: 'string' },
      'token-file': { type: 'string' },
      'log-file': { type: 'string' },
      'log-level': { type: 'string' },
    },
  });
  if (!flags) return 2;
  const { values } = flags;
  const levelText = values['log-level'];
  if (levelText !== undefined && !(LOG_LEVELS as readonly string[]).includes(levelText)) {
    // Unchecked, a level the logger does not know let every line through, debug included.
    writeUsageError('stdio', USAGE, io, `--log-level must be one of ${LOG_LEVELS.join(', ')}`);
    return 2;
  }
  const loaded = loadOrReport(values.config, io);
  if (!loaded) return 2;
  const { config, secrets } = loaded;
  let token: string | undefined;
  if (values['token-file'] !== undefined) {
    try {
      token = readFileSync(values['token-file'], 'utf8').trim();
    } catch (e) {
      io.err(`manifold stdio: cannot read --token-file: ${(e as NodeJS.ErrnoException).code ?? 'error'}\n`);
      return 2;
    }
  } else if (process.env.MANIFOLD_TOKEN) token = process.env.MANIFOLD_TOKEN.trim();
  if (config.gateway.auth && !token) {
    io.err(
      `manifold stdio: the config has gateway.auth, so a token is needed: pass --token-file F or set MANIFOLD_TOKEN\n\n${USAGE}\n`,
    );
    return 2;
  }
  const profile = values.profile;
  if (profile !== undefined && !config.profiles.some((p) => p.name === profile)) {
    const names = config.profiles.map((p) => p.name);
    io.err(
      `manifold stdio: no profile named ${JSON.stringify(profile)} in ${loaded.path}; configured: ${names.length > 0 ? names.join(', ') : 'none'}\n`,
    );
    return 2;
  }
  // Opened before anything starts: a log file that cannot be written is the caller's mistake to
  // hear about now, not an unhandled error later.
  let logFile: number | undefined;
  if (values['log-file'] !== undefined) {
    try {
      logFile = openSync(values['log-file'], 'a');
    } catch (e) {
      io.err(`manifold stdio: cannot open --log-file: ${(e as NodeJS.ErrnoException).code ?? 'error'}\n`);
      return 2;
    }
  }
  if (token) secrets.push(token);
  const level = (values['log-level'] as LogLevel | undefined) ?? config.gateway.logLevel;
  const log =
    logFile !== undefined ? fileLogger(logFile, level, secrets) : nodeLogger(level, secrets, 'json');
  if (!config.gateway.auth && token) {
    log.warn('stdio.token_ignored', { message: 'the config has no gateway.auth: the token is not checked' });
  }
  const { gateway } = await createNodeGateway({ config, log, version: packageVersion(), secrets });
  const local = localPrincipal(config.gateway.localPrincipal);
  const authenticate: Authenticator | undefined = config.gateway.auth ? undefined : async () => local;
  // No socket, so no Host or Origin to check: the client is whoever started this process.
  const { app } = createHttp(gateway, { checkHost: false, ...(authenticate ? { authenticate } : {}) });
  const path = profile ? `/mcp/${encodeURIComponent(profile)}` : '/mcp';
  const front = new StdioFront({
    fetch: (request) => app.fetch(request),
    path,
    ...(token ? { token } : {}),
    write: (line) => process.stdout.write(`${line}\n`),
    log,
  });
  log.info('stdio.serving', {
    servers: config.servers.length,
    profile: profile ?? null,
    auth: Boolean(config.gateway.auth),
  });
  void gateway.start();
  // Each line is bounded like an HTTP body: one past maxBodyBytes is answered without being held.
  const max = config.gateway.maxBodyBytes;
  const lines = new BoundedLines(max, {
    line: (line) => front.receive(line),
    overLong: (head, tail) => front.refuse(bodyTooLarge(max), overLongId(head, tail, 'request')),
  });
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk: string) => lines.push(chunk));
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (why: string) => {
      if (stopping) {
        // A second signal while stopping: the client or its host wants this process gone now.
        if (why !== 'stdin closed') process.exit(130);
        return;
      }
      stopping = true;
      // Whatever is still draining past the grace period does not keep a client's child alive.
      setTimeout(() => process.exit(0), config.gateway.shutdownGraceMs + 2000).unref();
      log.info('stdio.closing', { why });
      process.stdin.pause();
      void front
        .close()
        .then(() => log.info('stdio.client_closed'))
        .then(() => gateway.close())
        .then(() => log.info('stdio.stopped'))
        .then(resolve, resolve);
    };
    process.stdin.once('end', () => {
      lines.end();
      stop('stdin closed');
    });
    process.stdin.once('close', () => stop('stdin closed'));
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

/**
 * Log lines appended to an opened file instead of stderr. A write that fails later (a full disk)
 * drops the lines from then on; the client is still served.
 */
function fileLogger(fd: number, level: LogLevel, redact: readonly string[]): Logger {
  const file = createWriteStream('', { fd });
  let failed = false;
  file.on('error', () => {
    failed = true;
  });
  const batched = batchedLines((chunk) => {
    if (!failed) file.write(chunk);
  });
  process.once('exit', batched.flush);
  return createJsonLogger({ level, redact, write: batched.write });
}
