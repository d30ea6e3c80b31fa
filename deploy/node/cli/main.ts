import { parseArgs } from 'node:util';
import { checkBindSafety } from '../../../src/config/bind.js';
import { LOG_LEVELS } from '../../../src/config/defaults.js';
import { formatIssues } from '../../../src/config/load.js';
import type { Config } from '../../../src/config/types.js';
import type { LogLevel } from '../../../src/lib/log.js';
import { startGateway } from '../http/serve.js';
import { LOG_FORMATS, type LogFormat, nodeLogger } from '../runtime/log.js';
import { tracingSettings } from '../runtime/tracing-env.js';
import { runCheck } from './check.js';
import { runKeys } from './keys.js';
import { packageVersion } from './load.js';
import { configReload } from './reload.js';
import { runDrift, runRetrust } from './retrust.js';
import { type CliIO, loadOrReport } from './run.js';
import { runToken } from './token.js';

const USAGE = `manifold: one MCP endpoint in front of many MCP servers

Usage:
  manifold serve [--config manifold.json] [--port 8787] [--host 127.0.0.1] [--log-level info]
                 [--log-format pretty|json]
  manifold check [--config manifold.json]
  manifold drift [SERVER ...] [--config manifold.json]
  manifold retrust SERVER [--tool NAME] [--yes] [--config manifold.json]
  manifold login SERVER [--config manifold.json] [--no-open] [--subject KEY]
  manifold logout SERVER [--config manifold.json] [--subject KEY | --all]
  manifold search-registry WORDS... [--registry URL] [--config manifold.json]
  manifold add NAME [--version V] [--env K=V]... [--as KEY] [--remote] [--registry URL]
               [--config manifold.json]
  manifold stdio [--config manifold.json] [--profile P] [--token-file F] [--log-file F]
  manifold keys --out DIR [--alg ES256] [--force]
  manifold token --key DIR/signing-key.json --iss ISSUER --aud AUDIENCE --sub TENANT
                 --grant PATTERN [--grant PATTERN ...] [--ttl 1h] [--tenant T] [--admin]
  manifold --version

See docs/configuration.md for the config file and docs/auth.md for keys, tokens and upstream sign-in.`;

/** How often a gateway run by npm checks that the shell npm started it in is still its parent. */
const PARENT_POLL_MS = 500;

const io: CliIO = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  // Only a person at a terminal is asked; a script passes --yes or is refused.
  ...(process.stdin.isTTY && process.stderr.isTTY ? { ask } : {}),
};

async function ask(question: string): Promise<string | undefined> {
  const { createInterface } = await import('node:readline/promises');
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

async function main(argv: string[]): Promise<number> {
  // Commands with their own flags parse them themselves.
  if (argv[0] === 'keys') return runKeys(argv.slice(1), io);
  if (argv[0] === 'token') return runToken(argv.slice(1), io);
  if (argv[0] === 'retrust') {
    return runRetrust(argv.slice(1), io, nodeLogger('warn'), packageVersion());
  }
  // Loaded only for these commands: `serve` does not pay for the loopback listener's code.
  if (argv[0] === 'login')
    return (await import('./login.js')).runLogin(argv.slice(1), io, nodeLogger('warn'));
  if (argv[0] === 'logout')
    return (await import('./login.js')).runLogout(argv.slice(1), io, nodeLogger('warn'));
  if (argv[0] === 'drift') return runDrift(argv.slice(1), io, nodeLogger('warn'), packageVersion());
  // #54: the registry commands, and the stdio front door.
  if (argv[0] === 'search-registry')
    return (await import('./registry.js')).runSearchRegistry(argv.slice(1), io, nodeLogger('warn'));
  if (argv[0] === 'add') return (await import('./registry.js')).runAdd(argv.slice(1), io, nodeLogger('warn'));
  if (argv[0] === 'stdio') return (await import('./stdio.js')).runStdio(argv.slice(1), io);
  let parsed: ReturnType<typeof parseServeFlags>;
  try {
    parsed = parseServeFlags(argv);
  } catch (e) {
    // A flag `serve` does not know, or one without its value: a usage error, as for every command.
    process.stderr.write(`manifold: ${e instanceof Error ? e.message : String(e)}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  const command = positionals[0] ?? 'serve';
  if (values.help || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (command !== 'serve' && command !== 'check') {
    process.stderr.write(`unknown command: ${command}\n\n${USAGE}\n`);
    return 2;
  }
  // Every bad flag is named, and the config's problems beside them, before anything starts.
  const flagProblems: string[] = [];
  const level = values['log-level'];
  if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level)) {
    flagProblems.push(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const format = values['log-format'];
  if (format !== undefined && !LOG_FORMATS.includes(format as LogFormat)) {
    flagProblems.push(`--log-format must be one of ${LOG_FORMATS.join(', ')}`);
  }
  // An empty --port is not port 0 (Number('') is).
  const port =
    values.port === undefined ? undefined : values.port.trim() === '' ? Number.NaN : Number(values.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
    flagProblems.push('--port must be an integer from 0 to 65535');
  }
  for (const problem of flagProblems) process.stderr.write(`${problem}\n`);
  const loaded = loadOrReport(values.config, io);
  if (!loaded || flagProblems.length > 0) return 2;
  const { config, warnings, secrets } = loaded;
  // The command line wins over the file, at start and in every config a reload reads.
  const adjust = (c: Config) => {
    if (port !== undefined) c.gateway.port = port;
    if (values.host !== undefined) c.gateway.host = values.host;
  };
  adjust(config);
  // The loader checked the file's host; --host may have changed it.
  const unsafe = command === 'serve' ? checkBindSafety(config) : undefined;
  if (unsafe) {
    process.stderr.write(
      `${formatIssues([{ ...unsafe, path: `--host ${JSON.stringify(config.gateway.host)}` }])}\n`,
    );
    return 2;
  }
  const log = nodeLogger(
    (level as LogLevel | undefined) ?? config.gateway.logLevel,
    secrets,
    format as LogFormat | undefined,
  );
  // Each warning once: as readable text for `check`, as a log event for `serve`.
  if (warnings.length > 0) {
    if (command === 'check') process.stderr.write(`${formatIssues(warnings, loaded.path)}\n`);
    else for (const w of warnings) log.warn('config.warning', { path: w.path, message: w.message });
  }
  const version = packageVersion();

  if (command === 'check') {
    return runCheck(config, log, version, (s) => process.stdout.write(`${s}\n`), secrets);
  }

  // Off by default; the OTel SDK is loaded only when tracing is on (tracing-env.ts).
  const traceSettings = tracingSettings(config.gateway.tracing, process.env);
  const tracing = traceSettings
    ? (await import('../runtime/tracing.js')).startTracing(traceSettings, version)
    : undefined;
  if (traceSettings) {
    // Never the endpoint itself: a URL can carry a token.
    log.info('tracing.on', { exporters: traceSettings.exporters, serviceName: traceSettings.serviceName });
  }
  const running = await startGateway({
    config,
    log,
    version,
    secrets,
    ...(tracing ? { tracer: tracing.tracer } : {}),
  });
  const reloading = configReload({
    path: loaded.path,
    text: loaded.text,
    gateway: running.gateway,
    log,
    secrets,
    adjust,
  });
  await new Promise<void>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        log.warn('gateway.forced_exit', { signal });
        process.exit(130);
      }
      log.info('gateway.signal', { signal });
      reloading.close();
      // The spans of the drained calls are exported before the process ends.
      running
        .stop()
        .then(() => tracing?.shutdown())
        .then(resolve, resolve);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    // SIGHUP reloads the config (it used to stop the gateway, Node's default for it).
    process.on('SIGHUP', () => {
      log.info('gateway.signal', { signal: 'SIGHUP' });
      void reloading.reload('SIGHUP');
    });
    // Under `npm start` or `npx`, npm runs this through `sh -c`, which does not pass a SIGTERM
    // on: killing npm would leave the gateway and its children running, adopted by init. The
    // shell dying is the sign (a new parent), so stop as on SIGTERM. Only under npm: a gateway
    // started in the background of a shell on purpose keeps running when that shell exits.
    if (process.env.npm_lifecycle_event !== undefined || process.env.npm_command !== undefined) {
      const parent = process.ppid;
      const watch = setInterval(() => {
        if (process.ppid === parent) return;
        clearInterval(watch);
        // Already stopping on a signal (Ctrl-C reaches the shell and the gateway alike): that
        // stop goes on; this is not a second signal forcing an exit.
        if (signals > 0) return;
        log.info('gateway.parent_exited', { parent });
        onSignal('SIGTERM');
      }, PARENT_POLL_MS);
      watch.unref();
    }
  });
  return 0;
}

/** The flags of `serve` and `check` (and the bare `manifold`): throws on an unknown or incomplete one. */
function parseServeFlags(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c', default: 'manifold.json' },
      port: { type: 'string' },
      host: { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.stderr.write(`manifold: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
