import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigLoadError, loadConfigFile, resolveJwksFile } from '../../deploy/node/cli/load.js';
import { checkBindSafety, isLoopbackHost } from '../../src/config/bind.js';
import { AUTH_DEFAULTS, GATEWAY_DEFAULTS, JWS_ALGORITHMS } from '../../src/config/defaults.js';
import { interpolateString } from '../../src/config/interpolate.js';
import { formatIssues, parseConfig, parseConfigObject } from '../../src/config/load.js';
import { formatPath } from '../../src/config/paths.js';
import type { AuthConfig, ConfigIssue, ConfigResult } from '../../src/config/types.js';
import { redactor } from '../../src/lib/redact.js';
import { maskedConfig } from '../../src/server/http/status/config.js';

type Ok = Extract<ConfigResult, { ok: true }>;
type Failed = Extract<ConfigResult, { ok: false }>;

function ok(result: ConfigResult): Ok {
  if (!result.ok) throw new Error(`expected ok, got errors:\n${formatIssues(result.errors)}`);
  return result;
}

function failed(result: ConfigResult): Failed {
  if (result.ok) throw new Error('expected errors, got ok');
  return result;
}

/** Errors of a failing result, as `path: message`. */
function errorsOf(result: ConfigResult): string[] {
  return failed(result).errors.map((e) => `${e.path}: ${e.message}`);
}

function at(issues: ConfigIssue[], path: string): ConfigIssue[] {
  return issues.filter((i) => i.path === path);
}

function one(issues: ConfigIssue[], path: string): ConfigIssue {
  const found = at(issues, path);
  if (found.length !== 1) {
    throw new Error(`expected one issue at ${path}, got ${found.length}:\n${formatIssues(issues)}`);
  }
  return found[0]!;
}

const stdio = { command: 'npx', args: ['-y', '@modelcontextprotocol/server-everything'] };
const cfg = (servers: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  mcpServers: servers,
  ...extra,
});

/** Everything a user could read: messages, fixes and paths, errors and warnings. */
function allText(result: ConfigResult): string {
  const issues = result.ok ? result.warnings : [...result.errors, ...result.warnings];
  return `${formatIssues(issues)}\n${JSON.stringify(issues)}`;
}

describe('pasted client configs', () => {
  it('accepts a Claude Desktop paste, warning about autoApprove and keeping file order', () => {
    const text = JSON.stringify(
      {
        mcpServers: {
          filesystem: {
            command: 'npx',
            args: ['-y', '@modelcontextprotocol/server-filesystem', '/Users/me/Desktop'],
            autoApprove: ['read_file'],
          },
          memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'], disabled: false },
          remote: { url: 'https://mcp.example.com/mcp', alwaysAllow: [] },
        },
      },
      null,
      2,
    );
    const result = ok(parseConfig(text, {}));
    expect(result.config.servers.map((s) => s.name)).toEqual(['filesystem', 'memory', 'remote']);
    const warning = one(result.warnings, 'mcpServers.filesystem.autoApprove');
    expect(warning.message).toBe('unknown key "autoApprove" is ignored');
    expect(warning.fix).toBeTruthy();
    expect(one(result.warnings, 'mcpServers.remote.alwaysAllow').message).toContain('ignored');
    expect(result.warnings).toHaveLength(2);
    const fs = result.config.servers[0]!;
    expect(fs).toEqual({
      name: 'filesystem',
      type: 'stdio',
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-filesystem', '/Users/me/Desktop'],
      env: {},
      headers: {},
      prefix: 'filesystem',
      tools: { deny: [] },
      prompts: { deny: [] },
      resources: { deny: [] },
      timeoutMs: 60000,
      disabled: false,
      maxResultBytes: 65536,
      budgetTokens: 20000,
      protocol: 'auto',
      isolation: 'shared',
      maxInstances: 16,
      instanceIdleSeconds: 300,
      clientFeatures: { elicitation: true, sampling: false, roots: false },
      risk: [],
      trustAnnotations: false,
      approval: {
        preset: 'off',
        ask: [],
        deny: [],
        allow: [],
        timeoutSeconds: 120,
        via: 'client',
        queueTtlSeconds: 86_400,
      },
      retry: 1,
      sandbox: false,
      start: 'eager',
      idleStopSeconds: 0,
    });
  });

  it('accepts VS Code "servers" as an alias for mcpServers', () => {
    const result = ok(parseConfigObject({ servers: { everything: { type: 'stdio', ...stdio } } }, {}));
    expect(result.config.servers.map((s) => s.name)).toEqual(['everything']);
  });

  it('rejects a file with both mcpServers and servers', () => {
    const result = failed(parseConfigObject({ mcpServers: { a: stdio }, servers: { b: stdio } }, {}));
    expect(one(result.errors, 'servers').message).toContain('both "mcpServers" and "servers"');
  });

  it('rejects a missing or empty server map', () => {
    for (const raw of [{}, { mcpServers: {} }, { servers: {} }]) {
      const result = failed(parseConfigObject(raw, {}));
      expect(result.errors).toHaveLength(1);
      expect(result.errors[0]!.message).toBe('no servers configured');
      expect(result.errors[0]!.fix).toContain('mcpServers');
    }
  });

  it('keeps file order even for integer-like names, which JSON.parse would reorder', () => {
    const text = '{"mcpServers": {"zeta": {"command": "a"}, "2": {"command": "b"}, "1": {"command": "c"}}}';
    expect(ok(parseConfig(text, {})).config.servers.map((s) => s.name)).toEqual(['zeta', '2', '1']);
  });
});

describe('transport', () => {
  it('infers stdio from command and streamable-http from url', () => {
    const result = ok(
      parseConfigObject(cfg({ local: { command: 'node' }, remote: { url: 'https://x.dev/mcp' } }), {}),
    );
    const [local, remote] = result.config.servers;
    expect(local!.type).toBe('stdio');
    expect(local!.command).toBe('node');
    expect(local!.url).toBeUndefined();
    expect(remote!.type).toBe('streamable-http');
    expect(remote!.url).toBe('https://x.dev/mcp');
    expect(remote!.command).toBeUndefined();
  });

  it('pasted configs of other clients: Windsurf serverUrl, Cline streamableHttp, Cursor url without type', () => {
    const result = ok(
      parseConfigObject(
        cfg({
          windsurf: { serverUrl: 'https://w.dev/mcp' },
          cline: { type: 'streamableHttp', url: 'https://c.dev/mcp' },
          cursor: { url: 'https://cursor.dev/sse' },
          typed: { type: 'streamable-http', url: 'https://t.dev/mcp' },
          sse: { type: 'sse', url: 'https://s.dev/sse' },
        }),
        {},
      ),
    );
    expect(result.warnings).toEqual([]);
    const by = Object.fromEntries(result.config.servers.map((s) => [s.name, s]));
    expect(by.windsurf).toMatchObject({
      type: 'streamable-http',
      url: 'https://w.dev/mcp',
      sseFallback: true,
    });
    expect(by.cline).toMatchObject({ type: 'streamable-http', url: 'https://c.dev/mcp' });
    // Only a url without a type may fall back to HTTP+SSE; a named transport is kept as named.
    expect(by.cursor).toMatchObject({ type: 'streamable-http', sseFallback: true });
    expect(by.cline!.sseFallback).toBeUndefined();
    expect(by.typed!.sseFallback).toBeUndefined();
    expect(by.sse).toMatchObject({ type: 'sse' });
    expect(by.sse!.sseFallback).toBeUndefined();
  });

  it('url and its other spelling serverUrl together are an error naming both', () => {
    const issue = one(
      failed(parseConfigObject(cfg({ w: { url: 'https://a.dev/mcp', serverUrl: 'https://b.dev/mcp' } }), {}))
        .errors,
      'mcpServers.w.serverUrl',
    );
    expect(issue.message).toBe('is another spelling of "url", and both are set');
    expect(issue.fix).toContain('keep one of them');
  });

  it('normalises the http alias and keeps sse', () => {
    const result = ok(
      parseConfigObject(
        cfg({
          a: { type: 'http', url: 'http://localhost:3000/mcp' },
          b: { type: 'sse', url: 'https://x/sse' },
        }),
        {},
      ),
    );
    expect(result.config.servers.map((s) => s.type)).toEqual(['streamable-http', 'sse']);
  });

  it('rejects an entry with both command and url, or neither', () => {
    const result = failed(
      parseConfigObject(cfg({ both: { command: 'a', url: 'https://x' }, none: { args: [] } }), {}),
    );
    expect(one(result.errors, 'mcpServers.both').message).toContain('both "command" and "url"');
    expect(one(result.errors, 'mcpServers.none').message).toContain('neither "command" nor "url"');
  });

  it('rejects an unknown type, echoing a literal value', () => {
    const result = failed(parseConfigObject(cfg({ a: { type: 'websocket', url: 'https://x' } }), {}));
    expect(one(result.errors, 'mcpServers.a.type').message).toBe(
      'expected "stdio", "streamable-http" (or "http") or "sse", got "websocket"',
    );
  });

  it('requires command for stdio and url for http', () => {
    const result = failed(parseConfigObject(cfg({ a: { type: 'stdio' }, b: { type: 'sse' } }), {}));
    expect(one(result.errors, 'mcpServers.a.command').message).toContain('stdio server needs a command');
    expect(one(result.errors, 'mcpServers.b.url').message).toContain('sse server needs a url');
  });

  it('names each field of the wrong transport', () => {
    const result = failed(
      parseConfigObject(
        cfg({
          local: { command: 'node', url: 'https://x', type: 'stdio', headers: { A: 'b' } },
          remote: { url: 'https://x', args: ['a'], env: { A: 'b' }, cwd: '/tmp' },
        }),
        {},
      ),
    );
    expect(one(result.errors, 'mcpServers.local.url').message).toBe(
      '"url" applies only to streamable-http and sse servers, but this server uses stdio',
    );
    expect(one(result.errors, 'mcpServers.local.headers').message).toContain('"headers" applies only to');
    for (const key of ['args', 'env', 'cwd']) {
      expect(one(result.errors, `mcpServers.remote.${key}`).message).toBe(
        `"${key}" applies only to stdio servers, but this server uses streamable-http (inferred from "url")`,
      );
    }
    expect(result.errors).toHaveLength(5);
  });
});

describe('urls and headers', () => {
  it('requires an absolute http(s) URL', () => {
    const result = failed(
      parseConfigObject(
        cfg({ a: { url: '/mcp' }, b: { url: 'ftp://x.dev/mcp' }, c: { url: 'file:///etc/passwd' } }),
        {},
      ),
    );
    expect(one(result.errors, 'mcpServers.a.url').message).toBe('is not a valid absolute URL');
    expect(one(result.errors, 'mcpServers.b.url').message).toBe(
      'must use the http: or https: scheme, got ftp:',
    );
    expect(one(result.errors, 'mcpServers.c.url').message).toContain('http: or https:');
  });

  it('rejects credentials in the URL without echoing them, suggesting headers', () => {
    const result = failed(parseConfigObject(cfg({ a: { url: 'https://alice:hunter22@x.dev/mcp' } }), {}));
    const issue = one(result.errors, 'mcpServers.a.url');
    expect(issue.message).toBe('must not contain a username or password');
    expect(issue.fix).toContain('headers');
    expect(allText(result)).not.toContain('hunter22');
    expect(allText(result)).not.toContain('alice');
  });

  it('rejects CR, LF and NUL in header values and bad header names', () => {
    const result = failed(
      parseConfigObject(
        cfg({
          a: {
            url: 'https://x.dev',
            headers: {
              'X-One': 'ok\r\nInjected: yes',
              'X-Two': 'a\nb',
              'X-Three': 'a\u0000b',
              'Bad Name': 'v',
              'X\r\nY': 'v',
            },
          },
        }),
        {},
      ),
    );
    for (const name of ['X-One', 'X-Two', 'X-Three']) {
      expect(one(result.errors, `mcpServers.a.headers.${name}`).message).toContain('line break or NUL');
    }
    expect(one(result.errors, 'mcpServers.a.headers["Bad Name"]').message).toContain(
      'not a valid HTTP token',
    );
    expect(one(result.errors, 'mcpServers.a.headers["X\\r\\nY"]').message).toContain(
      'not a valid HTTP token',
    );
    expect(allText(result)).not.toContain('Injected');
    expect(formatIssues(result.errors).split('\n')).toHaveLength(result.errors.length);
  });

  it('reports a line break that came from an environment variable without showing the value', () => {
    const env = { TOKEN: 'tok-very-secret-1234\n' };
    const result = failed(
      parseConfigObject(cfg({ a: { url: 'https://x', headers: { Authorization: 'Bearer ${TOKEN}' } } }), env),
    );
    const issue = one(result.errors, 'mcpServers.a.headers.Authorization');
    expect(issue.message).toContain('after substituting environment variables');
    expect(issue.fix).toContain('trailing newline');
    expect(allText(result)).not.toContain('tok-very-secret');
  });

  it('rejects header names that differ only in case', () => {
    const result = failed(
      parseConfigObject(cfg({ a: { url: 'https://x', headers: { 'X-Key': 'a', 'x-key': 'b' } } }), {}),
    );
    expect(one(result.errors, 'mcpServers.a.headers.x-key').message).toContain('case-insensitive');
  });
});

describe('names and prefixes', () => {
  const nameError = (name: string) => {
    const result = failed(parseConfigObject(cfg({ [name]: stdio }), {}));
    return one(result.errors, formatPath(['mcpServers', name]));
  };
  const validName = (name: string) => parseConfigObject(cfg({ [name]: stdio }), {}).ok;

  it('reserves manifold in any case, suggesting a valid name', () => {
    for (const name of ['manifold', 'Manifold', 'MANIFOLD']) {
      const issue = nameError(name);
      expect(issue.message).toContain('reserved');
      const suggested = /"([^"]+)"/.exec(issue.fix!)![1]!;
      expect(validName(suggested)).toBe(true);
    }
    expect(validName('manifold-tools')).toBe(true);
  });

  it('rejects "__" and suggests a name without it', () => {
    const issue = nameError('my__server');
    expect(issue.message).toContain('"__"');
    expect(issue.fix).toBe('rename the server, e.g. to "my_server"');
    expect(validName('my_server')).toBe(true);
  });

  it('allows 32 characters and rejects 33', () => {
    expect(validName('a'.repeat(32))).toBe(true);
    const issue = nameError('a'.repeat(33));
    expect(issue.message).toBe('server name is 33 characters long; the limit is 32');
    expect(issue.fix).toBe(`rename the server, e.g. to "${'a'.repeat(32)}"`);
  });

  it('rejects odd characters, writing the path with brackets', () => {
    const issue = nameError('my.server');
    expect(issue.path).toBe('mcpServers["my.server"]');
    expect(issue.message).toContain('letters, digits');
    expect(issue.fix).toBe('rename the server, e.g. to "my-server"');
    expect(nameError('').message).toContain('must not be empty');
  });

  it('suggests a valid name for any invalid name', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 50 }), (name) => {
        const result = parseConfigObject(cfg({ [name]: stdio }), {});
        if (result.ok) return;
        const issue = at(result.errors, formatPath(['mcpServers', name]))[0];
        if (!issue) return;
        const suggested = JSON.parse(issue.fix!.slice(issue.fix!.indexOf('"'))) as string;
        expect(validName(suggested)).toBe(true);
      }),
    );
  });

  it('reports a prefix collision naming both servers', () => {
    const result = failed(
      parseConfigObject(cfg({ github: stdio, gh2: { ...stdio, prefix: 'github' }, other: stdio }), {}),
    );
    expect(result.errors).toHaveLength(1);
    const issue = one(result.errors, 'mcpServers.gh2.prefix');
    expect(issue.message).toBe('servers "github" and "gh2" both use the prefix "github"');
  });

  it('treats prefixes that differ only in case as a collision', () => {
    const result = failed(parseConfigObject(cfg({ GitHub: stdio, github: stdio }), {}));
    expect(one(result.errors, 'mcpServers.github').message).toContain('"GitHub" and "github"');
  });

  it('allows several prefix:false servers and ignores disabled servers for collisions', () => {
    const result = ok(
      parseConfigObject(
        cfg({
          a: { ...stdio, prefix: false },
          b: { ...stdio, prefix: false },
          c: { ...stdio, prefix: 'x' },
          d: { ...stdio, prefix: 'x', disabled: true },
        }),
        {},
      ),
    );
    expect(result.config.servers.map((s) => s.prefix)).toEqual([false, false, 'x', 'x']);
    expect(result.config.servers[3]!.disabled).toBe(true);
  });

  it('applies the name rules to string prefixes, including the reserved name', () => {
    const result = failed(
      parseConfigObject(
        cfg({
          a: { ...stdio, prefix: 'Manifold' },
          b: { ...stdio, prefix: 'x__y' },
          c: { ...stdio, prefix: true },
        }),
        {},
      ),
    );
    expect(one(result.errors, 'mcpServers.a.prefix').message).toContain('reserved');
    expect(one(result.errors, 'mcpServers.b.prefix').message).toContain('"__"');
    expect(one(result.errors, 'mcpServers.c.prefix').message).toBe(
      'expected a name string or false, got true',
    );
  });
});

describe('defaults and limits', () => {
  it('fills every gateway default', () => {
    const result = ok(parseConfigObject(cfg({ a: stdio }), {}));
    expect(result.config.gateway).toEqual({
      registry: { url: 'https://registry.modelcontextprotocol.io' },
      host: '127.0.0.1',
      port: 8787,
      logLevel: 'info',
      allowedOrigins: [],
      hostnames: [],
      maxBodyBytes: 1048576,
      maxSessions: 10000,
      maxSessionsPerPrincipal: 100,
      maxSessionsPerTenant: 1000,
      sessionIdleSeconds: 3600,
      maxBatchMessages: 100,
      maxBatchAnswerBytes: 4194304,
      maxHeldCalls: 10000,
      maxHeldCallsPerPrincipal: 100,
      maxHeldCallsPerTenant: 1000,
      maxTasksAwaitingInput: 1000,
      maxTasksAwaitingInputPerPrincipal: 20,
      maxTasksAwaitingInputPerTenant: 100,
      maxListenStreams: 10000,
      maxListenStreamsPerPrincipal: 16,
      maxListenStreamsPerTenant: 1000,
      callTimeoutMs: 60000,
      maxCallTimeoutMs: 600000,
      connectTimeoutMs: 15000,
      coldStartMs: 5000,
      listTimeoutMs: 15000,
      maxListPages: 100,
      pageSize: 500,
      shutdownGraceMs: 10000,
      streamPollMs: 0,
      metricsPath: '/metrics',
      statusPath: '/',
      watchConfig: true,
      allowedHosts: [],
      maxResultBytes: 65536,
      maxUpstreamBodyBytes: 8388608,
      maxSchemaBytes: 20480,
      maxDescriptionBytes: 4096,
      maxToolsPerServer: 1000,
      disclosure: { budgetTokens: 20000, alwaysLoad: [] },
      store: { path: './.manifold/state.db' },
      tracing: false,
      drift: { recheckSeconds: 300 },
      catalog: { mode: 'full', maxTools: 128, pin: [], searchLimit: 10 },
      sandbox: false,
      serverDataDir: './.manifold/servers',
      maxRunningServers: 0,
      code: {
        timeoutMs: 30000,
        cpuMs: 5000,
        memoryBytes: 67108864,
        maxCalls: 50,
        maxLogBytes: 16384,
        approval: 'allow',
        approvalTimeoutSeconds: 120,
      },
    });
    expect(result.config.gateway).toEqual(GATEWAY_DEFAULTS);
    expect(result.warnings).toEqual([]);
  });

  it('fills server defaults, taking timeoutMs from gateway.callTimeoutMs', () => {
    const result = ok(
      parseConfigObject(cfg({ a: { url: 'https://x' } }, { gateway: { callTimeoutMs: 5000 } }), {}),
    );
    expect(result.config.servers[0]).toEqual({
      name: 'a',
      type: 'streamable-http',
      sseFallback: true,
      url: 'https://x',
      args: [],
      env: {},
      headers: {},
      prefix: 'a',
      tools: { deny: [] },
      prompts: { deny: [] },
      resources: { deny: [] },
      timeoutMs: 5000,
      disabled: false,
      maxResultBytes: 65536,
      budgetTokens: 20000,
      protocol: 'auto',
      isolation: 'shared',
      maxInstances: 16,
      instanceIdleSeconds: 300,
      clientFeatures: { elicitation: true, sampling: false, roots: false },
      risk: [],
      trustAnnotations: false,
      approval: {
        preset: 'off',
        ask: [],
        deny: [],
        allow: [],
        timeoutSeconds: 120,
        via: 'client',
        queueTtlSeconds: 86_400,
      },
      retry: 1,
      sandbox: false,
      start: 'eager',
      idleStopSeconds: 0,
    });
  });

  it('keeps given gateway values and server fields', () => {
    const gateway = {
      host: '0.0.0.0',
      auth: false,
      port: 9000,
      logLevel: 'debug',
      allowedOrigins: ['https://App.Example.com:443', 'http://localhost:5173/'],
      hostnames: ['MCP.example.com', 'gw:8787'],
      pageSize: 10000,
    };
    const server = {
      command: 'node',
      args: ['server.js'],
      env: { A: '1' },
      cwd: '/srv',
      prefix: 'srv',
      tools: { allow: ['search_*'], deny: ['delete_*'] },
      prompts: { allow: ['review'], deny: [] },
      resources: { deny: ['file:///secret*'] },
      timeoutMs: 120000,
      disabled: true,
      maxResultBytes: 1000,
      budgetTokens: 'off',
      protocol: 'auto',
      isolation: 'shared',
      maxInstances: 16,
      instanceIdleSeconds: 300,
      clientFeatures: { elicitation: true, sampling: false, roots: false },
      risk: { 'get_*': 'read', '*': 'write' },
      trustAnnotations: true,
      approval: 'strict',
      retry: 2,
      sandbox: false,
      start: 'lazy',
      idleStopSeconds: 30,
    };
    const result = ok(parseConfigObject(cfg({ s: server }, { gateway }), {}));
    expect(result.config.gateway).toMatchObject({
      host: '0.0.0.0',
      port: 9000,
      logLevel: 'debug',
      allowedOrigins: ['https://app.example.com', 'http://localhost:5173'],
      hostnames: ['mcp.example.com', 'gw:8787'],
      pageSize: 10000,
    });
    expect(result.config.servers[0]).toEqual({
      name: 's',
      type: 'stdio',
      headers: {},
      ...server,
      risk: [
        { pattern: 'get_*', class: 'read' },
        { pattern: '*', class: 'write' },
      ],
      approval: {
        preset: 'strict',
        ask: [],
        deny: [],
        allow: [],
        timeoutSeconds: 120,
        via: 'client',
        queueTtlSeconds: 86_400,
      },
    });
  });

  it('rejects timeoutMs above gateway.maxCallTimeoutMs', () => {
    const result = failed(parseConfigObject(cfg({ a: { ...stdio, timeoutMs: 600001 } }), {}));
    const issue = one(result.errors, 'mcpServers.a.timeoutMs');
    expect(issue.message).toBe('must be at most gateway.maxCallTimeoutMs (600000), got 600001');
    expect(
      ok(parseConfigObject(cfg({ a: { ...stdio, timeoutMs: 600000 } }), {})).config.servers[0]!.timeoutMs,
    ).toBe(600000);
    const raised = parseConfigObject(
      cfg({ a: { ...stdio, timeoutMs: 900000 } }, { gateway: { maxCallTimeoutMs: 900000 } }),
      {},
    );
    expect(ok(raised).config.servers[0]!.timeoutMs).toBe(900000);
  });

  it('rejects callTimeoutMs above maxCallTimeoutMs', () => {
    expect(
      errorsOf(parseConfigObject(cfg({ a: stdio }, { gateway: { callTimeoutMs: 700000 } }), {})),
    ).toEqual(['gateway.callTimeoutMs: must be at most gateway.maxCallTimeoutMs (600000), got 700000']);
    expect(
      errorsOf(
        parseConfigObject(
          cfg({ a: stdio }, { gateway: { callTimeoutMs: 5000, maxCallTimeoutMs: 1000 } }),
          {},
        ),
      ),
    ).toEqual(['gateway.maxCallTimeoutMs: must be at least gateway.callTimeoutMs (5000), got 1000']);
  });

  it('checks gateway numbers, enums and lists', () => {
    const gateway = {
      port: 70000,
      logLevel: 'verbose',
      maxBodyBytes: 0,
      maxSessions: -1,
      sessionIdleSeconds: 1.5,
      pageSize: 10001,
      connectTimeoutMs: '15000',
      shutdownGraceMs: 3_000_000_000,
      host: '',
      allowedOrigins: ['https://ok.example.com', 'https://a.example.com/path', '*', 'not a url', 'ftp://x'],
      hostnames: ['https://mcp.example.com/', 'good.example.com'],
    };
    expect(errorsOf(parseConfigObject(cfg({ a: stdio }, { gateway }), {})).sort()).toEqual(
      [
        'gateway.port: must be at most 65535, got 70000',
        'gateway.logLevel: expected "debug", "info", "warn" or "error", got "verbose"',
        'gateway.maxBodyBytes: must be at least 1, got 0',
        'gateway.maxSessions: must be at least 1, got -1',
        'gateway.sessionIdleSeconds: expected an integer, got 1.5',
        'gateway.pageSize: must be at most 10000, got 10001',
        'gateway.connectTimeoutMs: expected a positive integer (milliseconds), got string',
        'gateway.shutdownGraceMs: must be at most 2147483647, got 3000000000',
        'gateway.host: must not be empty',
        'gateway.allowedOrigins[1]: must be an origin only, without a path, query or fragment',
        'gateway.allowedOrigins[2]: "*" is not supported as an allowed origin',
        'gateway.allowedOrigins[3]: is not a valid origin',
        'gateway.allowedOrigins[4]: must be an http: or https: origin',
        'gateway.hostnames[0]: must be a host name (as sent in the Host header), not a URL or pattern',
      ].sort(),
    );
  });

  it('reads gateway.watchConfig, and refuses a value that is not a boolean with its path and fix', () => {
    expect(
      ok(parseConfigObject(cfg({ a: stdio }, { gateway: { watchConfig: false } }), {})).config.gateway
        .watchConfig,
    ).toBe(false);
    const issue = one(
      failed(parseConfigObject(cfg({ a: stdio }, { gateway: { watchConfig: 'no' } }), {})).errors,
      'gateway.watchConfig',
    );
    expect(issue.message).toBe('expected true or false, got string');
    expect(issue.fix).toMatch(/reload on SIGHUP only/);
  });

  it('gives every error a fix', () => {
    const result = failed(
      parseConfigObject(
        cfg(
          { 'a.b': { type: 1, args: 'x', env: [], tools: { allow: [''] } }, c: { url: 'https://u:p@x' } },
          { gateway: { port: 'x' } },
        ),
        {},
      ),
    );
    expect(result.errors.length).toBeGreaterThan(4);
    for (const issue of result.errors) expect(issue.fix, issue.path).toMatch(/\w/);
  });
});

describe('egress allowlist (allowedHosts)', () => {
  const hosts = (allowedHosts: unknown, env: Record<string, string> = {}) =>
    parseConfigObject(cfg({ a: stdio }, { gateway: { allowedHosts } }), env);

  it('normalises case, IDN, IPv4 and keeps ports and IPv6 literals', () => {
    const result = ok(
      hosts([
        'EXAMPLE.com',
        'bücher.example',
        '127.0.0.1:3001',
        '[::1]:8080',
        '[::1]',
        'Api.Example.com:443',
        'example.com',
        'localhost:03001',
      ]),
    );
    expect(result.config.gateway.allowedHosts).toEqual([
      'example.com',
      'xn--bcher-kva.example',
      '127.0.0.1:3001',
      '[::1]:8080',
      '[::1]',
      'api.example.com:443',
      'localhost:3001',
    ]);
    expect(result.warnings).toEqual([]);
  });

  it('interpolates entries', () => {
    expect(
      ok(hosts(['${HOST}:${PORT}'], { HOST: 'MCP.Internal', PORT: '9000' })).config.gateway.allowedHosts,
    ).toEqual(['mcp.internal:9000']);
  });

  it('rejects schemes, paths, userinfo, wildcards, empty entries and bad ports, each with a fix', () => {
    const result = failed(
      hosts([
        'https://API.example.com/mcp',
        'api.example.com/mcp',
        'user@api.example.com',
        '*.example.com',
        '',
        '   ',
        'example.com:0',
        'example.com:70000',
        'a b.example',
        'ok.example.com',
        '[zz]:80',
        '::1',
      ]),
    );
    expect(errorsOf(result)).toEqual([
      'gateway.allowedHosts[0]: must be a bare host name, not a URL: remove the scheme',
      'gateway.allowedHosts[1]: must be a bare host name, without a path, query or fragment',
      'gateway.allowedHosts[2]: must not contain a username or "@"',
      'gateway.allowedHosts[3]: wildcards are not supported; each host is matched exactly',
      'gateway.allowedHosts[4]: must not be empty',
      'gateway.allowedHosts[5]: must not be empty',
      'gateway.allowedHosts[6]: port must be from 1 to 65535, got 0',
      'gateway.allowedHosts[7]: port must be from 1 to 65535, got 70000',
      'gateway.allowedHosts[8]: is not a valid host name, optionally followed by ":port"',
      'gateway.allowedHosts[10]: is not a valid host name, optionally followed by ":port"',
      'gateway.allowedHosts[11]: an IPv6 address must be written in brackets',
    ]);
    expect(one(result.errors, 'gateway.allowedHosts[0]').fix).toBe('write "api.example.com"');
    expect(one(result.errors, 'gateway.allowedHosts[1]').fix).toBe(
      'write the bare host name, e.g. "api.example.com" or "127.0.0.1:3001"',
    );
    expect(one(result.errors, 'gateway.allowedHosts[4]').fix).toBe(
      'write the bare host name, e.g. "api.example.com" or "127.0.0.1:3001"',
    );
    for (const issue of result.errors) expect(issue.fix, issue.path).toMatch(/\w/);
  });

  it('does not suggest a host taken from an environment variable', () => {
    const result = failed(hosts(['${H}'], { H: 'https://secret-host.example/x' }));
    expect(one(result.errors, 'gateway.allowedHosts[0]').fix).not.toContain('secret-host');
    expect(allText(result)).not.toContain('secret-host');
  });

  it('rejects a non-array and non-string entries', () => {
    expect(errorsOf(hosts('api.example.com'))).toEqual([
      'gateway.allowedHosts: expected an array of host names, got string',
    ]);
    expect(errorsOf(hosts([1]))).toEqual([
      'gateway.allowedHosts[0]: expected a host name string, got number',
    ]);
  });
});

describe('size limits', () => {
  it('keeps given gateway limits and per-server result caps, defaulting the cap to the gateway', () => {
    const result = ok(
      parseConfigObject(
        cfg(
          { small: { ...stdio, maxResultBytes: 100 }, plain: stdio },
          {
            gateway: {
              maxResultBytes: 1000,
              maxUpstreamBodyBytes: 5000,
              maxSchemaBytes: 10,
              maxDescriptionBytes: 20,
              maxToolsPerServer: 30,
            },
          },
        ),
        {},
      ),
    );
    expect(result.config.gateway).toMatchObject({
      maxResultBytes: 1000,
      maxUpstreamBodyBytes: 5000,
      maxSchemaBytes: 10,
      maxDescriptionBytes: 20,
      maxToolsPerServer: 30,
    });
    expect(result.config.servers.map((s) => s.maxResultBytes)).toEqual([100, 1000]);
  });

  it('allows a server cap above the gateway cap but not above maxUpstreamBodyBytes', () => {
    const result = ok(parseConfigObject(cfg({ a: { ...stdio, maxResultBytes: 8388608 } }), {}));
    expect(result.config.servers[0]!.maxResultBytes).toBe(8388608);
    const bad = failed(parseConfigObject(cfg({ a: { ...stdio, maxResultBytes: 8388609 } }), {}));
    const issue = one(bad.errors, 'mcpServers.a.maxResultBytes');
    expect(issue.message).toBe('must be at most gateway.maxUpstreamBodyBytes (8388608), got 8388609');
    expect(issue.fix).toBe('lower maxResultBytes to 8388608 or less, or raise gateway.maxUpstreamBodyBytes');
    expect(bad.errors).toHaveLength(1);
  });

  it('rejects gateway maxResultBytes above maxUpstreamBodyBytes, blaming the key that was set', () => {
    const tooBig = failed(
      parseConfigObject(cfg({ a: stdio }, { gateway: { maxResultBytes: 9_000_000 } }), {}),
    );
    expect(tooBig.errors).toEqual([
      {
        path: 'gateway.maxResultBytes',
        message: 'must be at most gateway.maxUpstreamBodyBytes (8388608), got 9000000',
        fix: 'lower maxResultBytes to 8388608 or less, or raise maxUpstreamBodyBytes',
      },
    ]);
    const tooSmall = failed(
      parseConfigObject(cfg({ a: stdio }, { gateway: { maxUpstreamBodyBytes: 1000 } }), {}),
    );
    expect(tooSmall.errors).toEqual([
      {
        path: 'gateway.maxUpstreamBodyBytes',
        message: 'must be at least gateway.maxResultBytes (65536), got 1000',
        fix: 'raise maxUpstreamBodyBytes to 65536 or more, or lower maxResultBytes',
      },
    ]);
    expect(
      ok(
        parseConfigObject(
          cfg({ a: stdio }, { gateway: { maxResultBytes: 10, maxUpstreamBodyBytes: 10 } }),
          {},
        ),
      ).config.gateway.maxResultBytes,
    ).toBe(10);
  });

  it('checks each limit is a positive integer', () => {
    const gateway = {
      maxResultBytes: 0,
      maxUpstreamBodyBytes: '8388608',
      maxSchemaBytes: 1.5,
      maxDescriptionBytes: -1,
      maxToolsPerServer: null,
    };
    const result = failed(
      parseConfigObject(cfg({ a: { ...stdio, maxResultBytes: 'big' } }, { gateway }), {}),
    );
    expect(errorsOf(result)).toEqual([
      'gateway.maxResultBytes: must be at least 1, got 0',
      'gateway.maxUpstreamBodyBytes: expected a positive integer (bytes), got string',
      'gateway.maxSchemaBytes: expected an integer, got 1.5',
      'gateway.maxDescriptionBytes: must be at least 1, got -1',
      'gateway.maxToolsPerServer: expected a positive integer (tools), got null',
      'mcpServers.a.maxResultBytes: expected a positive integer (bytes), got string',
    ]);
    for (const issue of result.errors) expect(issue.fix, issue.path).toMatch(/^write a whole number/);
  });

  it('49.2, 49.6: the batch bounds and the per-caller bounds are positive integers, taken as given', () => {
    const given = {
      maxBatchMessages: 10,
      maxBatchAnswerBytes: 65536,
      maxHeldCalls: 50,
      maxHeldCallsPerPrincipal: 5,
      maxHeldCallsPerTenant: 20,
      maxTasksAwaitingInput: 40,
      maxTasksAwaitingInputPerPrincipal: 4,
      maxTasksAwaitingInputPerTenant: 10,
      maxListenStreams: 30,
      maxListenStreamsPerPrincipal: 3,
      maxListenStreamsPerTenant: 9,
    };
    expect(ok(parseConfigObject(cfg({ a: stdio }, { gateway: given }), {})).config.gateway).toMatchObject(
      given,
    );
    const result = failed(
      parseConfigObject(
        cfg(
          { a: stdio },
          { gateway: { maxBatchMessages: 0, maxBatchAnswerBytes: '4 MiB', maxHeldCallsPerTenant: 2.5 } },
        ),
        {},
      ),
    );
    expect(errorsOf(result)).toEqual([
      'gateway.maxBatchMessages: must be at least 1, got 0',
      'gateway.maxBatchAnswerBytes: expected a positive integer (bytes), got string',
      'gateway.maxHeldCallsPerTenant: expected an integer, got 2.5',
    ]);
    for (const issue of result.errors) expect(issue.fix, issue.path).toMatch(/^write a whole number/);
  });
});

describe('disclosure', () => {
  it('accepts a numeric budget or "off", and servers inherit it unless they override it', () => {
    const servers = { a: stdio, b: { ...stdio, budgetTokens: 500 }, c: { ...stdio, budgetTokens: 'off' } };
    const numeric = ok(
      parseConfigObject(cfg(servers, { gateway: { disclosure: { budgetTokens: 1234 } } }), {}),
    );
    expect(numeric.config.gateway.disclosure).toEqual({ budgetTokens: 1234, alwaysLoad: [] });
    expect(numeric.config.servers.map((s) => s.budgetTokens)).toEqual([1234, 500, 'off']);
    const off = ok(parseConfigObject(cfg(servers, { gateway: { disclosure: { budgetTokens: 'off' } } }), {}));
    expect(off.config.gateway.disclosure.budgetTokens).toBe('off');
    expect(off.config.servers.map((s) => s.budgetTokens)).toEqual(['off', 500, 'off']);
    expect(off.warnings).toEqual([]);
  });

  it('resolves alwaysLoad servers to "off", warning when an explicit budget is overridden', () => {
    const result = ok(
      parseConfigObject(
        cfg(
          { a: stdio, b: { ...stdio, budgetTokens: 500 }, c: { ...stdio, budgetTokens: 'off' }, d: stdio },
          { gateway: { disclosure: { alwaysLoad: ['a', 'b', 'c', 'a'] } } },
        ),
        {},
      ),
    );
    expect(result.config.servers.map((s) => s.budgetTokens)).toEqual(['off', 'off', 'off', 20000]);
    expect(result.config.gateway.disclosure).toEqual({ budgetTokens: 20000, alwaysLoad: ['a', 'b', 'c'] });
    expect(result.warnings.map((w) => w.path)).toEqual(['mcpServers.b.budgetTokens']);
    expect(result.warnings[0]!.message).toContain('gateway.disclosure.alwaysLoad');
    expect(result.warnings[0]!.fix).toBeTruthy();
  });

  it('counts disabled servers and interpolated names as configured', () => {
    const result = ok(
      parseConfigObject(
        cfg(
          { off: { ...stdio, disabled: true }, gh: stdio },
          { gateway: { disclosure: { alwaysLoad: ['off', '${NAME}'] } } },
        ),
        { NAME: 'gh' },
      ),
    );
    expect(result.config.servers.map((s) => s.budgetTokens)).toEqual(['off', 'off']);
  });

  it('rejects an alwaysLoad entry that names no configured server, listing the known names', () => {
    const result = failed(
      parseConfigObject(
        cfg(
          { github: stdio, files: stdio },
          { gateway: { disclosure: { alwaysLoad: ['github', 'gihtub', 'nope'] } } },
        ),
        {},
      ),
    );
    expect(errorsOf(result)).toEqual([
      'gateway.disclosure.alwaysLoad[1]: names server "gihtub", which is not configured',
      'gateway.disclosure.alwaysLoad[2]: names server "nope", which is not configured',
    ]);
    expect(one(result.errors, 'gateway.disclosure.alwaysLoad[1]').fix).toBe(
      'did you mean "github"? The configured servers are "github", "files"',
    );
    expect(one(result.errors, 'gateway.disclosure.alwaysLoad[2]').fix).toBe(
      'use one of the configured server names: "github", "files"; or remove the entry',
    );
  });

  it('rejects bad budgets and alwaysLoad shapes with the path', () => {
    const result = failed(
      parseConfigObject(
        cfg(
          { a: { ...stdio, budgetTokens: 0 }, b: { ...stdio, budgetTokens: 'none' } },
          { gateway: { disclosure: { budgetTokens: 2.5, alwaysLoad: 'a' } } },
        ),
        {},
      ),
    );
    expect(errorsOf(result)).toEqual([
      'gateway.disclosure.budgetTokens: expected a positive integer (tokens) or "off", got 2.5',
      'gateway.disclosure.alwaysLoad: expected an array of server names, got string',
      'mcpServers.a.budgetTokens: must be at least 1, got 0',
      'mcpServers.b.budgetTokens: expected a positive integer (tokens) or "off", got "none"',
    ]);
    for (const issue of result.errors) expect(issue.fix, issue.path).toMatch(/\w/);
    expect(errorsOf(parseConfigObject(cfg({ a: stdio }, { gateway: { disclosure: ['a'] } }), {}))).toEqual([
      'gateway.disclosure: expected an object with "budgetTokens" and/or "alwaysLoad", got array',
    ]);
  });
});

describe('store and drift', () => {
  const STORE_FIX =
    'write "store": {"path": "./.manifold/state.db"}, "store": {"postgres": "postgres://manifold@db.internal/manifold"}, or "store": false';
  const withGateway = (gateway: Record<string, unknown>) => cfg({ a: stdio }, { gateway });

  it('defaults to the state file and a five-minute recheck', () => {
    const { gateway } = ok(parseConfigObject(cfg({ a: stdio }), {})).config;
    expect(gateway.store).toEqual({ path: './.manifold/state.db' });
    expect(gateway.drift).toEqual({ recheckSeconds: 300 });
    // Each result gets its own objects, never the frozen defaults.
    expect(gateway.store).not.toBe(GATEWAY_DEFAULTS.store);
    expect(gateway.drift).not.toBe(GATEWAY_DEFAULTS.drift);
    const empty = ok(parseConfigObject(withGateway({ store: {}, drift: {} }), {}));
    expect(empty.config.gateway.store).toEqual({ path: './.manifold/state.db' });
    expect(empty.config.gateway.drift).toEqual({ recheckSeconds: 300 });
    expect(empty.warnings).toEqual([]);
  });

  it('accepts "store": false for in-memory state', () => {
    const result = ok(parseConfigObject(withGateway({ store: false }), {}));
    expect(result.config.gateway.store).toBe(false);
    expect(result.warnings).toEqual([]);
  });

  it('accepts a store path, with ${VAR} interpolation', () => {
    const plain = ok(parseConfigObject(withGateway({ store: { path: '/var/lib/manifold/state.db' } }), {}));
    expect(plain.config.gateway.store).toEqual({ path: '/var/lib/manifold/state.db' });
    const fromEnv = ok(
      parseConfigObject(withGateway({ store: { path: '${STATE_DIR}/state.db' } }), {
        STATE_DIR: '/srv/m',
      }),
    );
    expect(fromEnv.config.gateway.store).toEqual({ path: '/srv/m/state.db' });
    const missing = failed(parseConfigObject(withGateway({ store: { path: '${STATE_DIR}/x.db' } }), {}));
    expect(missing.errors.map((e) => e.path)).toEqual(['gateway.store.path']);
  });

  it('accepts a Postgres URL from a ${VAR}, kept among the secrets', () => {
    const url = 'postgres://manifold:pw-123@db.internal:5432/manifold';
    const result = ok(
      parseConfigObject(withGateway({ store: { postgres: '${DATABASE_URL}' } }), { DATABASE_URL: url }),
    );
    expect(result.config.gateway.store).toEqual({ postgres: url });
    expect(result.secrets).toContain(url);
    const plain = ok(parseConfigObject(withGateway({ store: { postgres: 'postgresql://db/m' } }), {}));
    expect(plain.config.gateway.store).toEqual({ postgres: 'postgresql://db/m' });
  });

  it('rejects a bad Postgres store with the path and a fix, never echoing the URL', () => {
    const cases: [unknown, string, string][] = [
      [{ postgres: 'db.internal/pw-1' }, 'gateway.store.postgres: is not a URL', 'postgres:// URL'],
      [
        { postgres: 'mysql://u:pw-1@db/m' },
        'gateway.store.postgres: must be a postgres: or postgresql: URL, got mysql:',
        'postgres:// URL',
      ],
      [{ postgres: '' }, 'gateway.store.postgres: must not be empty', ''],
      [
        { path: 'state.db', postgres: 'postgres://u:pw-1@db/m' },
        'gateway.store: has both "path" and "postgres"',
        'keep one',
      ],
    ];
    for (const [store, expected, fix] of cases) {
      const result = failed(parseConfigObject(withGateway({ store }), {}));
      expect(errorsOf(result), JSON.stringify(store)).toEqual([expected]);
      expect(result.errors[0]!.fix).toContain(fix);
      expect(JSON.stringify(result.errors)).not.toContain('pw-1');
    }
  });

  it('rejects bad store values with the path and a fix', () => {
    const cases: [unknown, string][] = [
      [true, 'gateway.store: expected an object with "path" or "postgres", or false, got true'],
      ['x', 'gateway.store: expected an object with "path" or "postgres", or false, got string'],
      [null, 'gateway.store: expected an object with "path" or "postgres", or false, got null'],
      [['x'], 'gateway.store: expected an object with "path" or "postgres", or false, got array'],
      [{ path: '' }, 'gateway.store.path: must not be empty'],
      [{ path: 3 }, 'gateway.store.path: expected a non-empty file path string, got number'],
      [{ path: 'a\0b' }, 'gateway.store.path: contains a NUL character'],
    ];
    for (const [store, expected] of cases) {
      const result = failed(parseConfigObject(withGateway({ store }), {}));
      expect(errorsOf(result), JSON.stringify(store)).toEqual([expected]);
      if (expected.includes('NUL')) continue;
      expect(result.errors[0]!.fix, JSON.stringify(store)).toBe(STORE_FIX);
    }
  });

  it('accepts recheckSeconds 0 (no periodic recheck) and other whole numbers', () => {
    const off = ok(parseConfigObject(withGateway({ drift: { recheckSeconds: 0 } }), {}));
    expect(off.config.gateway.drift).toEqual({ recheckSeconds: 0 });
    const hourly = ok(parseConfigObject(withGateway({ drift: { recheckSeconds: 3600 } }), {}));
    expect(hourly.config.gateway.drift).toEqual({ recheckSeconds: 3600 });
  });

  it('rejects bad recheckSeconds and drift shapes with the path and a fix', () => {
    const cases: [unknown, string][] = [
      [-1, 'gateway.drift.recheckSeconds: must be at least 0, got -1'],
      [1.5, 'gateway.drift.recheckSeconds: expected an integer, got 1.5'],
      ['300', 'gateway.drift.recheckSeconds: expected an integer from 0 to 2147483 (seconds), got string'],
      [2147484, 'gateway.drift.recheckSeconds: must be at most 2147483, got 2147484'],
    ];
    for (const [recheckSeconds, expected] of cases) {
      const result = failed(parseConfigObject(withGateway({ drift: { recheckSeconds } }), {}));
      expect(errorsOf(result)).toEqual([expected]);
      expect(result.errors[0]!.fix).toBe(
        'write a whole number of seconds without quotes, e.g. 300, or 0 to turn the periodic recheck off',
      );
    }
    const shape = failed(parseConfigObject(withGateway({ drift: 300 }), {}));
    expect(errorsOf(shape)).toEqual(['gateway.drift: expected an object with "recheckSeconds", got number']);
    expect(shape.errors[0]!.fix).toBe('write drift as {"recheckSeconds": 300}');
  });

  it('warns about unknown keys inside store and drift, and keeps the rest', () => {
    const result = ok(
      parseConfigObject(
        withGateway({
          store: { path: 'state.db', pth: 'x', mode: 'wal' },
          drift: { recheckSecond: 5, recheckSeconds: 60 },
        }),
        {},
      ),
    );
    expect(result.warnings.map((w) => w.path)).toEqual([
      'gateway.drift.recheckSecond',
      'gateway.store.pth',
      'gateway.store.mode',
    ]);
    for (const w of result.warnings) expect(w.message).toMatch(/^unknown key ".+" is ignored$/);
    expect(one(result.warnings, 'gateway.store.pth').fix).toContain('did you mean "path"');
    expect(one(result.warnings, 'gateway.drift.recheckSecond').fix).toContain(
      'did you mean "recheckSeconds"',
    );
    expect(result.config.gateway.store).toEqual({ path: 'state.db' });
    expect(result.config.gateway.drift).toEqual({ recheckSeconds: 60 });
  });

  it('reports store and drift problems together with the rest', () => {
    const result = failed(
      parseConfigObject(withGateway({ port: 0, store: true, drift: { recheckSeconds: -1 } }), {}),
    );
    expect(result.errors.map((e) => e.path)).toEqual([
      'gateway.port',
      'gateway.drift.recheckSeconds',
      'gateway.store',
    ]);
  });
});

describe('gateway.metricsPath', () => {
  const withGateway = (gateway: Record<string, unknown>) => cfg({ a: stdio }, { gateway });
  const FIX = 'write "metricsPath": "/metrics", or false to serve no metrics';

  it('defaults to /metrics, takes another path or false', () => {
    expect(ok(parseConfigObject(cfg({ a: stdio }), {})).config.gateway.metricsPath).toBe('/metrics');
    const moved = ok(parseConfigObject(withGateway({ metricsPath: '/ops/prom-metrics' }), {}));
    expect(moved.config.gateway.metricsPath).toBe('/ops/prom-metrics');
    expect(moved.warnings).toEqual([]);
    expect(ok(parseConfigObject(withGateway({ metricsPath: false }), {})).config.gateway.metricsPath).toBe(
      false,
    );
  });

  it('rejects bad values and paths the gateway serves itself, naming the path and the fix', () => {
    const cases: [unknown, string][] = [
      [true, 'gateway.metricsPath: expected a path starting with "/", or false, got true'],
      [9090, 'gateway.metricsPath: expected a path starting with "/", or false, got 9090'],
      ['', 'gateway.metricsPath: must not be empty'],
      [
        'metrics',
        'gateway.metricsPath: must be an absolute path of letters, digits and ._~-/ (no query, no "//"), e.g. "/metrics"',
      ],
      [
        '/metrics?x=1',
        'gateway.metricsPath: must be an absolute path of letters, digits and ._~-/ (no query, no "//"), e.g. "/metrics"',
      ],
      [
        '//metrics',
        'gateway.metricsPath: must be an absolute path of letters, digits and ._~-/ (no query, no "//"), e.g. "/metrics"',
      ],
      ['/mcp', 'gateway.metricsPath: must not be /mcp or under it: the gateway serves that path itself'],
      [
        '/mcp/metrics',
        'gateway.metricsPath: must not be /mcp or under it: the gateway serves that path itself',
      ],
      [
        '/healthz',
        'gateway.metricsPath: must not be /healthz or under it: the gateway serves that path itself',
      ],
      [
        '/.well-known/metrics',
        'gateway.metricsPath: must not be /.well-known or under it: the gateway serves that path itself',
      ],
    ];
    for (const [metricsPath, expected] of cases) {
      const result = failed(parseConfigObject(withGateway({ metricsPath }), {}));
      expect(errorsOf(result), JSON.stringify(metricsPath)).toEqual([expected]);
      if (metricsPath !== '') expect(result.errors[0]!.fix, JSON.stringify(metricsPath)).toBe(FIX);
    }
    // A path that only starts like a served one is fine.
    expect(
      ok(parseConfigObject(withGateway({ metricsPath: '/mcpmetrics' }), {})).config.gateway.metricsPath,
    ).toBe('/mcpmetrics');
  });

  it('may not take the status page or a file beside it', () => {
    for (const [gateway, path] of [
      [{ metricsPath: '/' }, '/'],
      [{ metricsPath: '/status.json' }, '/'],
      [{ statusPath: '/ops', metricsPath: '/ops/status.js' }, '/ops'],
    ] as const) {
      const result = failed(parseConfigObject(withGateway(gateway), {}));
      expect(errorsOf(result)).toEqual([
        `gateway.metricsPath: is ${gateway.metricsPath}, which the status page (gateway.statusPath ${path}) serves`,
      ]);
      expect(result.errors[0]!.fix).toBe('write "metricsPath": "/metrics", or move gateway.statusPath');
    }
    const beside = ok(
      parseConfigObject(withGateway({ statusPath: '/ops', metricsPath: '/ops/metrics' }), {}),
    );
    expect(beside.config.gateway.metricsPath).toBe('/ops/metrics');
  });
});

describe('reporting every problem at once', () => {
  it('collects errors from gateway and several servers with exact paths', () => {
    const raw = {
      gateway: { port: '8787' },
      mcpServers: {
        everything: { command: 'npx', args: ['-y', 'pkg', 3], env: { DEBUG: 1 }, disabled: 'no' },
        remote: { url: 'https://x', headers: { Authorization: 42 }, tools: { allow: ['ok', ''], deny: 'x' } },
        bad__name: { command: 'x', timeoutMs: 0 },
      },
    };
    expect(errorsOf(parseConfigObject(raw, {}))).toEqual([
      'gateway.port: expected an integer from 1 to 65535, got string',
      'mcpServers.everything.args[2]: expected a string, got number',
      'mcpServers.everything.env.DEBUG: expected a string, got number',
      'mcpServers.everything.disabled: expected true or false, got string',
      'mcpServers.remote.headers.Authorization: expected a string, got number',
      'mcpServers.remote.tools.allow[1]: must not be empty',
      'mcpServers.remote.tools.deny: expected an array of glob strings, got string',
      'mcpServers.bad__name: server name must not contain "__" (it separates the prefix from the tool name)',
      'mcpServers.bad__name.timeoutMs: must be at least 1, got 0',
    ]);
  });

  it('rejects non-object roots, maps and entries', () => {
    expect(errorsOf(parseConfigObject([], {}))).toEqual([
      ': expected a JSON object at the top level, got array',
    ]);
    expect(errorsOf(parseConfigObject({ mcpServers: [] }, {}))[0]).toContain(
      'mcpServers: expected an object',
    );
    expect(errorsOf(parseConfigObject(cfg({ a: 'npx x' }), {}))).toEqual([
      'mcpServers.a: expected an object describing the server, got string',
    ]);
    expect(errorsOf(parseConfigObject(cfg({ a: stdio }, { gateway: 5 }), {}))).toEqual([
      'gateway: expected an object, got number',
    ]);
  });
});

describe('unknown keys', () => {
  it('warns (never errors) at every level, and suggests near misses', () => {
    const raw = {
      $schema: 'https://example.com/schema.json',
      inputs: [],
      gateway: { oauth: { issuer: 'x' }, prot: 1, disclosure: { budgetToken: 5, mode: 'lazy' } },
      mcpServers: { a: { ...stdio, description: 'd', comand: 'x', tools: { allow: ['x'], block: [] } } },
    };
    const result = ok(parseConfigObject(raw, {}));
    expect(result.warnings.map((w) => w.path)).toEqual([
      'inputs',
      'gateway.prot',
      'gateway.disclosure.budgetToken',
      'gateway.disclosure.mode',
      'gateway.oauth.issuer',
      'mcpServers.a.description',
      'mcpServers.a.comand',
      'mcpServers.a.tools.block',
    ]);
    expect(one(result.warnings, 'gateway.disclosure.budgetToken').fix).toContain(
      'did you mean "budgetTokens"',
    );
    expect(result.config.gateway.disclosure).toEqual({ budgetTokens: 20000, alwaysLoad: [] });
    for (const w of result.warnings) expect(w.message).toMatch(/^unknown key ".+" is ignored$/);
    expect(one(result.warnings, 'mcpServers.a.comand').fix).toContain('did you mean "command"');
    expect(one(result.warnings, 'gateway.prot').fix).toContain('did you mean "port"');
  });

  it('treats the egress, size, disclosure, store and drift keys as known, at the gateway and per server', () => {
    const raw = cfg(
      { a: { ...stdio, maxResultBytes: 1024, budgetTokens: 'off' } },
      {
        gateway: {
          allowedHosts: ['api.example.com'],
          maxResultBytes: 1,
          maxUpstreamBodyBytes: 2,
          maxSchemaBytes: 3,
          maxDescriptionBytes: 4,
          maxToolsPerServer: 5,
          disclosure: { budgetTokens: 6, alwaysLoad: [] },
          store: { path: 'state.db' },
          drift: { recheckSeconds: 60 },
        },
      },
    );
    const result = failed(parseConfigObject(raw, {}));
    expect(result.warnings).toEqual([]);
    // The server's own cap is checked against the gateway's upstream body cap.
    expect(errorsOf(result)).toEqual([
      'mcpServers.a.maxResultBytes: must be at most gateway.maxUpstreamBodyBytes (2), got 1024',
    ]);
  });

  it('does not interpolate ignored keys', () => {
    const result = ok(parseConfigObject(cfg({ a: { ...stdio, description: '${NOPE}' } }), {}));
    expect(result.warnings).toHaveLength(1);
  });
});

describe('${VAR} interpolation', () => {
  it('substitutes in args, env, headers, url, cwd and gateway strings', () => {
    const env = {
      HOME_DIR: '/home/me',
      KEY: 'k-123',
      HOST: 'api.example.com',
      TOKEN: 't0ken-value',
      BIND: '0.0.0.0',
    };
    const raw = {
      gateway: { host: '${BIND}', auth: false, allowedOrigins: ['https://${HOST}'] },
      mcpServers: {
        local: {
          command: 'node',
          args: ['${HOME_DIR}/server.js', '--key=${KEY}'],
          env: { API_KEY: '${KEY}' },
          cwd: '${HOME_DIR}',
        },
        remote: { url: 'https://${HOST}/mcp', headers: { Authorization: 'Bearer ${TOKEN}' } },
      },
    };
    const result = ok(parseConfigObject(raw, env));
    const [local, remote] = result.config.servers;
    expect(local!.args).toEqual(['/home/me/server.js', '--key=k-123']);
    expect(local!.env).toEqual({ API_KEY: 'k-123' });
    expect(local!.cwd).toBe('/home/me');
    expect(remote!.url).toBe('https://api.example.com/mcp');
    expect(remote!.headers).toEqual({ Authorization: 'Bearer t0ken-value' });
    expect(result.config.gateway.host).toBe('0.0.0.0');
    expect(result.config.gateway.allowedOrigins).toEqual(['https://api.example.com']);
    expect(result.secrets.sort()).toEqual(
      ['/home/me', '0.0.0.0', 'api.example.com', 'k-123', 't0ken-value'].sort(),
    );
  });

  it('reports a missing variable by name and path, never leaking set values', () => {
    const env = { OTHER: 'other-secret-value' };
    const raw = cfg({
      github: {
        url: 'https://api.githubcopilot.com/mcp/',
        headers: { Authorization: 'Bearer ${GITHUB_TOKEN} ${OTHER}' },
      },
      local: { command: 'x', args: ['${A}', '${B}'] },
    });
    const result = failed(parseConfigObject(raw, env));
    const issue = one(result.errors, 'mcpServers.github.headers.Authorization');
    expect(issue.message).toBe('environment variable GITHUB_TOKEN is not set');
    expect(issue.fix).toContain('GITHUB_TOKEN');
    expect(one(result.errors, 'mcpServers.local.args[0]').message).toBe('environment variable A is not set');
    expect(one(result.errors, 'mcpServers.local.args[1]').message).toBe('environment variable B is not set');
    expect(allText(result)).not.toContain('other-secret-value');
    expect(formatIssues(result.errors)).toContain(
      'mcpServers.github.headers.Authorization: environment variable GITHUB_TOKEN is not set (fix: ',
    );
  });

  it('treats $${VAR} as a literal ${VAR}', () => {
    const result = ok(
      parseConfigObject(cfg({ a: { command: 'sh', args: ['echo $${HOME} ${X}', 'price $$5', '$$${X}'] } }), {
        X: 'xv',
      }),
    );
    expect(result.config.servers[0]!.args).toEqual(['echo ${HOME} xv', 'price $$5', '$${X}']);
    expect(result.secrets).toEqual(['xv']);
    expect(interpolateString('$${NOT_SET}', {})).toEqual({
      value: '${NOT_SET}',
      secrets: [],
      substituted: false,
      problems: [],
    });
  });

  it('substitutes an empty variable but does not collect it as a secret; dedupes secrets', () => {
    const result = ok(
      parseConfigObject(cfg({ a: { command: 'x', args: ['${E}', '${S}', '${S}'] } }), { E: '', S: 'same' }),
    );
    expect(result.config.servers[0]!.args).toEqual(['', 'same', 'same']);
    expect(result.secrets).toEqual(['same']);
  });

  it('collects only values that came from ${VAR}', () => {
    const result = ok(
      parseConfigObject(
        cfg({ a: { url: 'https://x', headers: { Authorization: 'Bearer literal-token' } } }),
        {},
      ),
    );
    expect(result.secrets).toEqual([]);
  });

  it('does not interpolate object keys', () => {
    const result = ok(parseConfigObject(cfg({ a: { command: 'x', env: { '${K}': 'v' } } }), {}));
    expect(result.config.servers[0]!.env).toEqual({ '${K}': 'v' });
  });

  it('rejects malformed references with the path', () => {
    const bad = ['${}', '${1A}', '${A-B}', '${A', 'x ${env:TOKEN}', '${input:tok}', '${A:-d}'];
    const result = failed(parseConfigObject(cfg({ a: { command: 'x', args: bad } }), { A: 'a' }));
    expect(result.errors).toHaveLength(bad.length);
    bad.forEach((_, i) => {
      expect(one(result.errors, `mcpServers.a.args[${i}]`).message).toMatch(/variable reference/);
    });
    expect(one(result.errors, 'mcpServers.a.args[4]').fix).toBe('write ${TOKEN} instead');
  });

  it('never shows a substituted value in any message', () => {
    const keys = ['type', 'command', 'url', 'prefix', 'cwd'] as const;
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 30 }),
        fc.constantFrom(...keys),
        fc.constantFrom('', '\r\n', '\u0000', 'ftp://', 'https://u:p@', '__', ' '),
        (body, key, twist) => {
          const secret = `Zq9Sekret${body}${twist}`; // a prefix no message text contains
          const server: Record<string, unknown> = {
            url: 'https://x.dev/mcp',
            headers: { Authorization: 'Bearer ${S}', 'X-Other': '${S}' },
            [key]: '${S}',
          };
          const gateway = { host: '${S}', logLevel: '${S}', allowedOrigins: ['${S}'], hostnames: ['${S}'] };
          const result = parseConfigObject(
            cfg({ a: server, b: { url: 'https://y', prefix: '${S}' } }, { gateway }),
            {
              S: secret,
            },
          );
          expect(allText(result)).not.toContain(secret);
        },
      ),
      { numRuns: 300 },
    );
  });
});

function normalise(result: ConfigResult): unknown {
  const sorted = (issues: ConfigIssue[]) => issues.map((i) => JSON.stringify(i)).sort();
  return result.ok
    ? { ...result, warnings: sorted(result.warnings) }
    : { ...result, errors: sorted(result.errors), warnings: sorted(result.warnings) };
}

describe('JSON text', () => {
  it('reports invalid JSON with line and column', () => {
    const text = '{\n  "mcpServers": {\n    "a": { "command": "x", }\n  }\n}';
    const result = failed(parseConfig(text, {}, 'manifold.json'));
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]!.path).toBe('');
    expect(result.errors[0]!.message).toBe('invalid JSON at line 3, column 28: trailing comma');
  });

  it('gives positions for other syntax errors and names the file in the fix', () => {
    const message = (text: string) => failed(parseConfig(text, {}, 'manifold.json')).errors[0]!;
    expect(message('').message).toBe('invalid JSON at line 1, column 1: the file is empty');
    expect(message('{"a": 1 "b": 2}').message).toBe(
      'invalid JSON at line 1, column 9: expected "," or "}" after a property value',
    );
    expect(message('{\n// note\n}').message).toBe(
      'invalid JSON at line 2, column 1: unexpected character "/"',
    );
    expect(message('{\n// note\n}').fix).toContain('comments');
    expect(message('{"a": [1, 2}').message).toContain('line 1, column 12');
    expect(message('{"a": tru}').message).toBe('invalid JSON at line 1, column 7: unexpected character "t"');
    expect(message('{"a": "x').message).toBe('invalid JSON at line 1, column 7: unterminated string');
    expect(message('{} {}').message).toContain('line 1, column 4');
    expect(message('{"a": 01}').fix).toContain('in manifold.json');
  });

  it('matches JSON.parse on valid input, including escapes and __proto__ keys', () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        const raw = JSON.parse(text) as unknown;
        // JSON.parse moves integer-like keys first, so compare the findings as sets.
        expect(normalise(parseConfig(text, {}))).toEqual(normalise(parseConfigObject(raw, {})));
      }),
      { numRuns: 300 },
    );
    const text = '{"mcpServers": {"a": {"command": "x\\u00e9\\n", "env": {"__proto__": "p"}}}}';
    const server = ok(parseConfig(text, {})).config.servers[0]!;
    expect(server.command).toBe('xé\n');
    expect(Object.keys(server.env)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(server.env)).toBe(Object.prototype);
  });

  it('accepts a byte-order mark and reports duplicate keys', () => {
    expect(parseConfig(`\ufeff${JSON.stringify(cfg({ a: stdio }))}`, {}).ok).toBe(true);
    const result = failed(parseConfig('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', {}));
    expect(one(result.errors, 'mcpServers.a').message).toContain('duplicate key "a"');
  });

  it('rejects absurd nesting without throwing', () => {
    const text = `{"mcpServers": {"a": {"command": "x", "extra": ${'['.repeat(10000)}${']'.repeat(10000)}}}}`;
    expect(failed(parseConfig(text, {})).errors[0]!.message).toContain('nesting is deeper than');
  });
});

describe('formatIssues', () => {
  it('writes one problem per line as path: message (fix: ...)', () => {
    const issues: ConfigIssue[] = [
      { path: 'mcpServers.a.url', message: 'is not a valid absolute URL', fix: 'write a URL' },
      { path: '', message: 'invalid JSON at line 1, column 1: the file is empty' },
      { path: 'x', message: 'two\nlines' },
    ];
    expect(formatIssues(issues)).toBe(
      'mcpServers.a.url: is not a valid absolute URL (fix: write a URL)\ninvalid JSON at line 1, column 1: the file is empty\nx: two lines',
    );
    expect(formatIssues(issues.slice(0, 1), 'manifold.json')).toBe(
      'manifold.json: mcpServers.a.url: is not a valid absolute URL (fix: write a URL)',
    );
    expect(formatIssues([])).toBe('');
  });

  it('formats paths with dots, indices and quoted keys', () => {
    expect(formatPath(['mcpServers', 'everything', 'args', 2])).toBe('mcpServers.everything.args[2]');
    expect(formatPath(['mcpServers', 'a.b', 'headers', 'X-Key'])).toBe('mcpServers["a.b"].headers.X-Key');
    expect(formatPath(['a b'])).toBe('["a b"]');
  });
});

// ---------------------------------------------------------------------------------------------
// gateway.auth, gateway.callsPerMinute and the bind-safety rule

const JWKS_URL = 'https://auth.example.com/.well-known/jwks.json';
const SECRET_32 = 'abcdefghijklmnopqrstuvwxyz012345';
const { publicKey: PEM, privateKey: PRIVATE_PEM } = generateKeyPairSync('ec', {
  namedCurve: 'P-256',
  publicKeyEncoding: { type: 'spki', format: 'pem' },
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
});
const baseAuth = { issuer: 'https://auth.example.com/', audience: 'manifold' };
const withAuth = (auth: unknown, gateway: Record<string, unknown> = {}) =>
  cfg({ a: stdio }, { gateway: { ...gateway, auth } });
const authOf = (result: ConfigResult): AuthConfig => {
  const auth = ok(result).config.gateway.auth;
  if (!auth) throw new Error(`expected an auth object, got ${String(auth)}`);
  return auth;
};

describe('gateway.auth: shape and defaults', () => {
  it('fills every default around issuer, audience and one key source', () => {
    const result = ok(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL }), {}));
    expect(result.config.gateway.auth).toEqual({
      ...baseAuth,
      jwksUrl: JWKS_URL,
      clockToleranceSeconds: 30,
      maxTokenLifetimeSeconds: 86400,
      tokenTypes: ['JWT', 'at+jwt'],
      tenantClaim: 'sub',
      tenants: {},
      authorizationServers: [],
      jwksCooldownSeconds: 30,
      jwksTimeoutMs: 5000,
    });
    expect(authOf(result).algorithms).toBeUndefined();
    expect(AUTH_DEFAULTS).toMatchObject({ clockToleranceSeconds: 30, tenantClaim: 'sub' });
    expect(result.warnings).toEqual([]);
  });

  it('keeps every given value, deduplicating algorithms and authorization servers', () => {
    const auth = {
      ...baseAuth,
      jwksFile: 'keys/jwks.json',
      algorithms: ['ES256', 'EdDSA', 'ES256'],
      clockToleranceSeconds: 0,
      maxTokenLifetimeSeconds: 600,
      tokenTypes: ['at+jwt'],
      tenantClaim: 'tid',
      grantsClaim: 'permissions',
      tenants: { acme: { grants: ['github__*', 'memory__read_*'], callsPerMinute: 60 }, globex: {} },
      authorizationServers: ['https://auth.example.com/', 'https://auth.example.com/'],
      resource: 'https://mcp.example.com/mcp',
      jwksCooldownSeconds: 120,
      jwksTimeoutMs: 60000,
    };
    const result = ok(parseConfigObject(withAuth(auth, { callsPerMinute: 600 }), {}));
    expect(result.config.gateway.callsPerMinute).toBe(600);
    expect(result.config.gateway.auth).toEqual({
      ...auth,
      algorithms: ['ES256', 'EdDSA'],
      authorizationServers: ['https://auth.example.com/'],
      tenants: { acme: { grants: ['github__*', 'memory__read_*'], callsPerMinute: 60 }, globex: {} },
    });
  });

  it('accepts "auth": false, and treats auth and callsPerMinute as known keys', () => {
    const result = ok(
      parseConfigObject(cfg({ a: stdio }, { gateway: { auth: false, callsPerMinute: 1 } }), {}),
    );
    expect(result.config.gateway.auth).toBe(false);
    expect(result.warnings).toEqual([]);
    expect(ok(parseConfigObject(cfg({ a: stdio }), {})).config.gateway).not.toHaveProperty('auth');
  });

  it('rejects an auth value that is neither an object nor false', () => {
    for (const auth of [true, 'on', null, [], 1]) {
      const issue = one(failed(parseConfigObject(withAuth(auth), {})).errors, 'gateway.auth');
      expect(issue.message).toMatch(
        /^expected an object with issuer, audience and a key source, or false, got /,
      );
      expect(issue.fix).toContain('false');
    }
  });

  it('requires a non-empty issuer and audience', () => {
    expect(errorsOf(parseConfigObject(withAuth({ jwksUrl: JWKS_URL }), {})).sort()).toEqual([
      'gateway.auth.audience: is missing: tokens are checked against their "aud" claim',
      'gateway.auth.issuer: is missing: tokens are checked against their "iss" claim',
    ]);
    expect(
      errorsOf(parseConfigObject(withAuth({ issuer: '', audience: 7, jwksUrl: JWKS_URL }), {})).sort(),
    ).toEqual([
      'gateway.auth.audience: expected a non-empty string, got number',
      'gateway.auth.issuer: must not be empty',
    ]);
    // Any string is a valid issuer.
    expect(
      authOf(parseConfigObject(withAuth({ issuer: 'my-idp', audience: 'x', secret: SECRET_32 }), {})).issuer,
    ).toBe('my-idp');
  });

  it('requires exactly one key source, naming them', () => {
    const none = one(failed(parseConfigObject(withAuth(baseAuth), {})).errors, 'gateway.auth');
    expect(none.message).toBe(
      'has no key source: set exactly one of "jwksUrl", "jwksFile", "publicKey" or "secret"',
    );
    expect(none.fix).toContain('manifold keys');
    const several = one(
      failed(
        parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, secret: SECRET_32, jwksFile: 'j' }), {}),
      ).errors,
      'gateway.auth',
    );
    expect(several.message).toBe(
      'has several key sources ("jwksUrl", "jwksFile" and "secret"); set exactly one',
    );
    expect(several.fix).toBe('keep one of "jwksUrl", "jwksFile" or "secret" and remove the others');
  });

  it('limits clockToleranceSeconds to 0..60 and checks the other numbers', () => {
    const at = (extra: Record<string, unknown>, gateway: Record<string, unknown> = {}) =>
      errorsOf(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, ...extra }, gateway), {}));
    expect(at({ clockToleranceSeconds: 61 })).toEqual([
      'gateway.auth.clockToleranceSeconds: must be at most 60, got 61',
    ]);
    expect(
      one(
        failed(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, clockToleranceSeconds: 61 }), {}))
          .errors,
        'gateway.auth.clockToleranceSeconds',
      ).fix,
    ).toContain('60');
    expect(at({ clockToleranceSeconds: -1 })).toEqual([
      'gateway.auth.clockToleranceSeconds: must be at least 0, got -1',
    ]);
    expect(at({ clockToleranceSeconds: 1.5 })).toEqual([
      'gateway.auth.clockToleranceSeconds: expected an integer, got 1.5',
    ]);
    for (const ok60 of [0, 60]) {
      expect(
        authOf(
          parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, clockToleranceSeconds: ok60 }), {}),
        ).clockToleranceSeconds,
      ).toBe(ok60);
    }
    expect(at({ jwksCooldownSeconds: 0, jwksTimeoutMs: 60001 }).sort()).toEqual([
      'gateway.auth.jwksCooldownSeconds: must be at least 1, got 0',
      'gateway.auth.jwksTimeoutMs: must be at most 60000, got 60001',
    ]);
    expect(at({}, { callsPerMinute: 0 })).toEqual(['gateway.callsPerMinute: must be at least 1, got 0']);
    expect(at({}, { callsPerMinute: '60' })).toEqual([
      'gateway.callsPerMinute: expected a positive integer (calls per minute per tenant), got string',
    ]);
    expect(at({ tenantClaim: '', grantsClaim: 3 }).sort()).toEqual([
      'gateway.auth.grantsClaim: expected a claim name string, got number',
      'gateway.auth.tenantClaim: must not be empty',
    ]);
  });

  it('warns about unknown keys in auth and in tenants, suggesting near misses', () => {
    const auth = {
      ...baseAuth,
      jwksUrl: JWKS_URL,
      audiance: 'x',
      tenants: { acme: { grants: ['a__*'], callsPerMinut: 5 } },
    };
    const result = ok(parseConfigObject(withAuth(auth), {}));
    expect(result.warnings.map((w) => w.path)).toEqual([
      'gateway.auth.audiance',
      'gateway.auth.tenants.acme.callsPerMinut',
    ]);
    expect(one(result.warnings, 'gateway.auth.audiance').fix).toContain('did you mean "audience"');
    expect(one(result.warnings, 'gateway.auth.tenants.acme.callsPerMinut').fix).toContain(
      'did you mean "callsPerMinute"',
    );
  });

  it('gives every auth error a fix', () => {
    const auth = {
      issuer: 1,
      jwksUrl: 'http://auth.example.com/jwks',
      publicKey: 'nope',
      secret: 'short',
      algorithms: ['none', 'HS256', 'XX'],
      clockToleranceSeconds: 99,
      tenants: { a: { grants: [''], callsPerMinute: 0 }, b: 'x' },
      authorizationServers: ['http://auth.example.com'],
      resource: 'mcp',
      jwksCooldownSeconds: 'x',
    };
    const result = failed(parseConfigObject(withAuth(auth, { callsPerMinute: -1 }), {}));
    expect(result.errors.length).toBeGreaterThan(10);
    for (const issue of result.errors) expect(issue.fix, issue.path).toMatch(/\w/);
  });
});

describe('gateway.auth: key sources', () => {
  it('accepts an https jwksUrl, and http only for a loopback host', () => {
    for (const url of [
      JWKS_URL,
      'http://127.0.0.1:9000/jwks',
      'http://localhost/jwks',
      'http://[::1]:8080/k',
    ]) {
      expect(authOf(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: url }), {})).jwksUrl).toBe(url);
    }
    const bad = {
      'http://auth.example.com/jwks': 'must use https: (http: only for a loopback host), got http:',
      'ftp://auth.example.com/jwks': 'must use https: (http: only for a loopback host), got ftp:',
      '/jwks.json': 'is not a valid absolute URL',
      'https://u:p@auth.example.com/jwks': 'must not contain a username or password',
    };
    for (const [url, message] of Object.entries(bad)) {
      expect(errorsOf(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: url }), {}))).toEqual([
        `gateway.auth.jwksUrl: ${message}`,
      ]);
    }
  });

  it('accepts a PEM public key and rejects anything else without quoting it', () => {
    expect(authOf(parseConfigObject(withAuth({ ...baseAuth, publicKey: PEM }), {})).publicKey).toBe(PEM);
    const priv = failed(parseConfigObject(withAuth({ ...baseAuth, publicKey: PRIVATE_PEM }), {}));
    expect(one(priv.errors, 'gateway.auth.publicKey').message).toBe(
      'contains a private key; the gateway needs only the public key',
    );
    expect(allText(priv)).not.toContain(PRIVATE_PEM.split('\n')[1]);
    const rsa = '-----BEGIN RSA PUBLIC KEY-----\nMIIBCgKCAQEA\n-----END RSA PUBLIC KEY-----\n';
    for (const publicKey of [rsa, 'MIIBCgKCAQEA', PEM.replace('-----END PUBLIC KEY-----', '')]) {
      const result = failed(parseConfigObject(withAuth({ ...baseAuth, publicKey }), {}));
      expect(one(result.errors, 'gateway.auth.publicKey').message).toMatch(/^is not a PEM public key/);
      expect(allText(result)).not.toContain('MIIBCgKCAQEA');
    }
  });

  it('requires a secret of at least 32 bytes, suggesting ${VAR} and openssl, never showing it', () => {
    const short = 'x'.repeat(31);
    const result = failed(parseConfigObject(withAuth({ ...baseAuth, secret: short }), {}));
    const issue = one(result.errors, 'gateway.auth.secret');
    expect(issue.message).toBe('is shorter than 32 bytes, which is too weak for an HMAC key');
    expect(issue.fix).toContain('${');
    expect(issue.fix).toContain('openssl rand -base64 48');
    expect(allText(result)).not.toContain(short);
    // Bytes, not characters: 16 x "é" is 32 bytes, 15 x "é" is 30.
    expect(ok(parseConfigObject(withAuth({ ...baseAuth, secret: 'é'.repeat(16) }), {})).ok).toBe(true);
    expect(errorsOf(parseConfigObject(withAuth({ ...baseAuth, secret: 'é'.repeat(15) }), {}))).toHaveLength(
      1,
    );
    expect(errorsOf(parseConfigObject(withAuth({ ...baseAuth, secret: '' }), {}))).toHaveLength(1);
  });

  it('requires as many bytes as the strictest configured HMAC algorithm needs', () => {
    const secret = (length: number, algorithms: string[]) =>
      parseConfigObject(withAuth({ ...baseAuth, secret: 's'.repeat(length), algorithms }), {});
    expect(errorsOf(secret(47, ['HS256', 'HS384']))).toEqual([
      'gateway.auth.secret: is shorter than 48 bytes, which HS384 needs',
    ]);
    expect(errorsOf(secret(63, ['HS512', 'HS256']))).toEqual([
      'gateway.auth.secret: is shorter than 64 bytes, which HS512 needs',
    ]);
    expect(secret(48, ['HS384']).ok).toBe(true);
    expect(secret(64, ['HS512']).ok).toBe(true);
    expect(secret(32, ['HS256']).ok).toBe(true);
  });

  it('warns about a literal secret and redacts the secret from logs either way', () => {
    const literal = ok(parseConfigObject(withAuth({ ...baseAuth, secret: SECRET_32 }), {}));
    expect(one(literal.warnings, 'gateway.auth.secret').fix).toContain('${');
    expect(allText(literal)).not.toContain(SECRET_32);
    expect(literal.secrets).toEqual([SECRET_32]);
    const fromEnv = ok(
      parseConfigObject(withAuth({ ...baseAuth, secret: '${JWT_SECRET}' }), { JWT_SECRET: SECRET_32 }),
    );
    expect(fromEnv.warnings).toEqual([]);
    expect(fromEnv.secrets).toEqual([SECRET_32]);
    expect(authOf(fromEnv).secret).toBe(SECRET_32);
  });

  it('keeps jwksFile as a path for the host to read', () => {
    expect(
      authOf(parseConfigObject(withAuth({ ...baseAuth, jwksFile: 'keys/jwks.json' }), {})),
    ).toMatchObject({
      jwksFile: 'keys/jwks.json',
    });
    expect(errorsOf(parseConfigObject(withAuth({ ...baseAuth, jwksFile: '' }), {}))).toEqual([
      'gateway.auth.jwksFile: must not be empty',
    ]);
  });
});

describe('gateway.auth: algorithms', () => {
  const algs = (algorithms: unknown, source: Record<string, unknown> = { jwksUrl: JWKS_URL }) =>
    parseConfigObject(withAuth({ ...baseAuth, ...source, algorithms }), {});

  it('accepts every known JWS algorithm for its kind of key', () => {
    const asymmetric = [
      'RS256',
      'RS384',
      'RS512',
      'PS256',
      'PS384',
      'PS512',
      'ES256',
      'ES384',
      'ES512',
      'EdDSA',
    ];
    expect(authOf(algs(asymmetric)).algorithms).toEqual(asymmetric);
    expect(authOf(algs(['HS256', 'HS384', 'HS512'], { secret: SECRET_32.repeat(2) })).algorithms).toEqual([
      'HS256',
      'HS384',
      'HS512',
    ]);
    expect(JWS_ALGORITHMS).toHaveLength(13);
  });

  it("accepts RFC 9864's Ed25519 when listed (never a default), for public-key sources only", () => {
    expect(authOf(algs(['Ed25519'])).algorithms).toEqual(['Ed25519']);
    expect(authOf(algs(['EdDSA', 'Ed25519'], { publicKey: PEM })).algorithms).toEqual(['EdDSA', 'Ed25519']);
    expect(errorsOf(algs(['Ed25519'], { secret: SECRET_32 }))).toEqual([
      'gateway.auth.algorithms[0]: "Ed25519" needs a public key, but the key source is "secret"',
    ]);
    expect(one(failed(algs(['ed25519'])).errors, 'gateway.auth.algorithms[0]').fix).toBe(
      'write "Ed25519"; algorithm names are case-sensitive',
    );
  });

  it('A5: "none" is never allowed, in any case', () => {
    for (const none of ['none', 'None', 'NONE']) {
      const issue = one(failed(algs(['ES256', none])).errors, 'gateway.auth.algorithms[1]');
      expect(issue.message).toBe('"none" is never allowed: it would accept unsigned tokens');
    }
  });

  it('rejects unknown names, suggesting the right case', () => {
    const result = failed(algs(['es256', 'HS257', 'RSA-OAEP']));
    expect(one(result.errors, 'gateway.auth.algorithms[0]').fix).toBe(
      'write "ES256"; algorithm names are case-sensitive',
    );
    expect(one(result.errors, 'gateway.auth.algorithms[1]').message).toMatch(
      /^expected a JWS algorithm .*got "HS257"$/,
    );
    expect(result.errors).toHaveLength(3);
    expect(errorsOf(algs([]))).toEqual(['gateway.auth.algorithms: must not be empty']);
    expect(errorsOf(algs('ES256'))).toEqual([
      'gateway.auth.algorithms: expected a non-empty array of JWS algorithm names, got string',
    ]);
  });

  it('A5: rejects HS* with an asymmetric key source, and asymmetric algorithms with a secret', () => {
    for (const source of [{ jwksUrl: JWKS_URL }, { jwksFile: 'j.json' }, { publicKey: PEM }]) {
      const name = Object.keys(source)[0]!;
      expect(errorsOf(algs(['RS256', 'HS256'], source))).toEqual([
        `gateway.auth.algorithms[1]: "HS256" is a shared-secret algorithm and cannot be used with "${name}"`,
      ]);
    }
    expect(errorsOf(algs(['HS256', 'RS256'], { secret: SECRET_32 }))).toEqual([
      'gateway.auth.algorithms[1]: "RS256" needs a public key, but the key source is "secret"',
    ]);
  });
});

describe('gateway.auth: tenants, authorization servers, resource', () => {
  it('checks tenant entries, grants and limits', () => {
    const tenants = {
      a: { grants: 'x' },
      b: { grants: [''] },
      c: { callsPerMinute: 0 },
      d: 'x',
      e: { grants: [] },
    };
    expect(
      errorsOf(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, tenants }), {})).sort(),
    ).toEqual([
      'gateway.auth.tenants.a.grants: expected an array of glob strings, got string',
      'gateway.auth.tenants.b.grants[0]: must not be empty',
      'gateway.auth.tenants.c.callsPerMinute: must be at least 1, got 0',
      'gateway.auth.tenants.d: expected an object with "grants" and/or "callsPerMinute", got string',
    ]);
    expect(
      errorsOf(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, tenants: [] }), {})),
    ).toEqual([
      'gateway.auth.tenants: expected an object that maps tenant ids to tenant settings, got array',
    ]);
  });

  it('warns about a tenant grant written as a scope entry', () => {
    const result = ok(
      parseConfigObject(
        withAuth({ ...baseAuth, jwksUrl: JWKS_URL, tenants: { a: { grants: ['tools:github__*'] } } }),
        {},
      ),
    );
    expect(one(result.warnings, 'gateway.auth.tenants.a.grants[0]').fix).toContain('github__*');
  });

  it('keeps tenant ids such as __proto__ as plain entries', () => {
    const raw = `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"auth": {"issuer": "i", "audience": "a",
      "jwksUrl": "${JWKS_URL}", "tenants": {"__proto__": {"callsPerMinute": 5}, "constructor": {}}}}}`;
    const auth = authOf(parseConfig(raw, {}));
    expect(Object.keys(auth.tenants)).toEqual(['__proto__', 'constructor']);
    expect(Object.hasOwn(auth.tenants, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(auth.tenants, '__proto__')?.value).toEqual({ callsPerMinute: 5 });
    expect(auth.tenants.toString).toBeUndefined();
  });

  it('requires https authorization servers and an absolute resource URL without a fragment', () => {
    const result = failed(
      parseConfigObject(
        withAuth({
          ...baseAuth,
          jwksUrl: JWKS_URL,
          authorizationServers: ['https://ok.example.com', 'http://auth.example.com', 'auth.example.com'],
          resource: 'https://mcp.example.com/mcp#x',
        }),
        {},
      ),
    );
    expect(errorsOf(result)).toEqual([
      'gateway.auth.authorizationServers[1]: must use https:, got http:',
      'gateway.auth.authorizationServers[2]: is not a valid absolute URL',
      'gateway.auth.resource: must not contain a fragment ("#...")',
    ]);
    expect(
      errorsOf(parseConfigObject(withAuth({ ...baseAuth, jwksUrl: JWKS_URL, resource: '/mcp' }), {})),
    ).toEqual(['gateway.auth.resource: is not a valid absolute URL']);
  });

  it('interpolates every auth string, including tenant grants', () => {
    const env = { ISS: 'https://idp.example.com/', AUD: 'mcp', JWKS: JWKS_URL, G: 'github__*' };
    const auth = authOf(
      parseConfigObject(
        withAuth({
          issuer: '${ISS}',
          audience: '${AUD}',
          jwksUrl: '${JWKS}',
          algorithms: ['ES256'],
          tenants: { acme: { grants: ['${G}'] } },
          authorizationServers: ['${ISS}'],
        }),
        env,
      ),
    );
    expect(auth).toMatchObject({
      issuer: env.ISS,
      audience: 'mcp',
      jwksUrl: JWKS_URL,
      tenants: { acme: { grants: ['github__*'] } },
      authorizationServers: [env.ISS],
    });
  });

  it('never shows a substituted value or key material in any auth message', () => {
    const keys = ['issuer', 'jwksUrl', 'publicKey', 'secret', 'resource', 'tenantClaim', 'jwksFile'] as const;
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 30 }),
        fc.constantFrom(...keys),
        fc.constantFrom(
          '',
          'http://',
          'ftp://',
          '#',
          'none',
          '-----BEGIN PUBLIC KEY-----',
          'PRIVATE KEY-----',
        ),
        (body, key, twist) => {
          const secret = `Zq9Sekret${body}${twist}`; // a prefix no message text contains
          const auth: Record<string, unknown> = {
            audience: '${S}',
            algorithms: ['${S}'],
            authorizationServers: ['${S}'],
            tenants: { t: { grants: ['${S}'] } },
            [key]: '${S}',
          };
          if (key !== 'issuer') auth.issuer = 'i';
          const result = parseConfigObject(withAuth(auth), { S: secret });
          expect(allText(result)).not.toContain(secret);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('bind safety: no auth means loopback only', () => {
  const bind = (host: string, gateway: Record<string, unknown> = {}) =>
    parseConfigObject(cfg({ a: stdio }, { gateway: { host, ...gateway } }), {});

  it('accepts loopback hosts without auth', () => {
    for (const host of [
      '127.0.0.1',
      '127.1.2.3',
      '127.255.255.255',
      'localhost',
      'LocalHost',
      '::1',
      '[::1]',
      '0:0:0:0:0:0:0:1',
    ]) {
      expect(ok(bind(host)).config.gateway.host).toBe(host);
      expect(isLoopbackHost(host)).toBe(true);
    }
  });

  it('rejects any other host without gateway.auth, at gateway.host, with the way out', () => {
    for (const host of [
      '0.0.0.0',
      '::',
      '[::]',
      '192.168.1.10',
      '128.0.0.1',
      '127.0.0.256',
      'mcp.example.com',
      '::ffff:127.0.0.1',
      'localhost.example.com',
    ]) {
      const issue = one(failed(bind(host)).errors, 'gateway.host');
      expect(issue.message).toBe(
        'is not a loopback address and gateway.auth is not set, so anyone who can reach the gateway could list and call every tool',
      );
      expect(issue.fix).toBe(
        'add gateway.auth, or set "auth": false to serve without authentication on a non-loopback address',
      );
      expect(isLoopbackHost(host)).toBe(false);
    }
  });

  it('allows a non-loopback host with "auth": false or an auth object', () => {
    expect(ok(bind('0.0.0.0', { auth: false })).config.gateway.auth).toBe(false);
    expect(authOf(bind('0.0.0.0', { auth: { ...baseAuth, jwksUrl: JWKS_URL } })).issuer).toBe(
      baseAuth.issuer,
    );
  });

  it('does not pile a bind error onto a broken auth object or host', () => {
    expect(errorsOf(bind('0.0.0.0', { auth: { ...baseAuth } })).map((e) => e.split(':')[0])).toEqual([
      'gateway.auth',
    ]);
    expect(errorsOf(bind(''))).toEqual(['gateway.host: must not be empty']);
  });

  it('checkBindSafety re-checks a host changed after parsing (as --host does)', () => {
    const plain = ok(bind('127.0.0.1')).config;
    expect(checkBindSafety(plain)).toBeUndefined();
    plain.gateway.host = '0.0.0.0';
    expect(checkBindSafety(plain)).toMatchObject({
      path: 'gateway.host',
      fix: expect.stringContaining('"auth": false'),
    });
    const off = ok(bind('127.0.0.1', { auth: false })).config;
    off.gateway.host = '0.0.0.0';
    expect(checkBindSafety(off)).toBeUndefined();
    const on = ok(bind('127.0.0.1', { auth: { ...baseAuth, jwksUrl: JWKS_URL } })).config;
    on.gateway.host = '::';
    expect(checkBindSafety(on)).toBeUndefined();
  });
});

describe('gateway.auth.jwksFile (read by the Node host)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'manifold-jwks-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const PUBLIC_JWK = {
    kty: 'EC',
    crv: 'P-256',
    x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
    y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
    kid: 'k1',
    alg: 'ES256',
    use: 'sig',
  };
  const PRIVATE_D = 'jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI';

  function configFile(name: string, jwksFile: string): string {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(withAuth({ ...baseAuth, jwksFile })));
    return path;
  }
  function loadError(path: string): ConfigLoadError {
    try {
      loadConfigFile(path, {});
    } catch (e) {
      if (e instanceof ConfigLoadError) return e;
      throw e;
    }
    throw new Error('expected a ConfigLoadError');
  }

  it('reads the key set into auth.jwks', () => {
    const jwks = join(dir, 'jwks.json');
    writeFileSync(jwks, JSON.stringify({ keys: [PUBLIC_JWK] }));
    const loaded = loadConfigFile(configFile('ok.json', jwks), {});
    expect(loaded.config.gateway.auth).toMatchObject({ jwksFile: jwks, jwks: { keys: [PUBLIC_JWK] } });
  });

  it('resolves a relative path from the working directory it is given', () => {
    writeFileSync(join(dir, 'rel.json'), JSON.stringify({ keys: [PUBLIC_JWK] }));
    const config = ok(parseConfigObject(withAuth({ ...baseAuth, jwksFile: 'rel.json' }), {})).config;
    expect(resolveJwksFile(config, dir)).toBeUndefined();
    expect((config.gateway.auth as AuthConfig).jwks?.keys).toEqual([PUBLIC_JWK]);
    expect(resolveJwksFile(config, join(dir, 'elsewhere'))?.message).toMatch(/^file not found: /);
  });

  it('reports a missing, unparsable or wrong file at gateway.auth.jwksFile without quoting it', () => {
    const cases: [string, string, RegExp][] = [
      ['missing.json', '', /file not found: .*missing\.json/],
      ['garbage.json', `{"keys": [${PRIVATE_D}`, /is not valid JSON$/],
      ['nokeys.json', JSON.stringify({ key: [] }), /is not a JWKS: expected an object with a "keys" array$/],
      ['empty.json', JSON.stringify({ keys: [] }), /has no keys, so no token could be verified$/],
      ['notjwk.json', JSON.stringify({ keys: [{ crv: 'P-256' }] }), /keys\[0\] is not a JWK/],
      [
        'signing-key.json',
        JSON.stringify({ ...PUBLIC_JWK, d: PRIVATE_D }),
        /holds a private key, not a key set$/,
      ],
      [
        'private.json',
        JSON.stringify({ keys: [PUBLIC_JWK, { ...PUBLIC_JWK, d: PRIVATE_D }] }),
        /keys\[1\] contains private or secret key material \("d"\)$/,
      ],
      [
        'oct.json',
        JSON.stringify({ keys: [{ kty: 'oct', k: PRIVATE_D }] }),
        /keys\[0\] contains private or secret key material \("k"\)$/,
      ],
    ];
    for (const [name, content, message] of cases) {
      const jwks = join(dir, name);
      if (content !== '') writeFileSync(jwks, content);
      const error = loadError(configFile(`cfg-${name}`, jwks));
      expect(error.issues).toHaveLength(1);
      expect(error.issues[0]!.path).toBe('gateway.auth.jwksFile');
      expect(error.issues[0]!.message).toMatch(message);
      expect(error.issues[0]!.fix).toMatch(/\w/);
      expect(error.message).toContain('gateway.auth.jwksFile: ');
      expect(JSON.stringify(error.issues) + error.message).not.toContain(PRIVATE_D);
    }
  });
});

describe('protocol eras and multi-instance keys', () => {
  it('protocol defaults to auto, accepts the two revisions, and names the path and the fix otherwise', () => {
    const servers = (protocol?: unknown) =>
      cfg({ a: protocol === undefined ? stdio : { ...stdio, protocol } });
    expect(ok(parseConfigObject(servers(), {})).config.servers[0]!.protocol).toBe('auto');
    expect(ok(parseConfigObject(servers('2026-07-28'), {})).config.servers[0]!.protocol).toBe('2026-07-28');
    expect(ok(parseConfigObject(servers('2025-11-25'), {})).config.servers[0]!.protocol).toBe('2025-11-25');
    const bad = failed(parseConfigObject(servers('2024-01-01'), {}));
    expect(bad.errors[0]).toMatchObject({ path: 'mcpServers.a.protocol' });
    expect(bad.errors[0]!.fix).toContain('"auto"');
  });

  it('an sse server cannot be pinned to 2026-07-28', () => {
    const r = parseConfigObject(
      cfg({ s: { type: 'sse', url: 'https://x.example/sse', protocol: '2026-07-28' } }),
      {},
    );
    expect(errorsOf(r)).toEqual([expect.stringMatching(/^mcpServers\.s\.protocol: .*legacy/)]);
  });

  it('advertiseUrl: absent by default, an http(s) origin normalised, anything else refused with its path', () => {
    expect(ok(parseConfigObject(cfg({ a: stdio }), {})).config.gateway.advertiseUrl).toBeUndefined();
    const good = ok(
      parseConfigObject(cfg({ a: stdio }, { gateway: { advertiseUrl: 'http://10.0.0.5:8787/' } }), {}),
    );
    expect(good.config.gateway.advertiseUrl).toBe('http://10.0.0.5:8787');
    for (const [bad, message] of [
      ['ftp://10.0.0.5', 'must be an http: or https: URL, got ftp:'],
      ['http://u:p@10.0.0.5', 'must not carry credentials'],
      ['http://10.0.0.5/mcp', 'must be an origin only, without a path, query or fragment'],
      ['not a url', 'is not a valid URL'],
    ] as const) {
      const r = failed(parseConfigObject(cfg({ a: stdio }, { gateway: { advertiseUrl: bad } }), {}));
      expect(r.errors[0]).toMatchObject({ path: 'gateway.advertiseUrl', message });
    }
  });

  it('cursorSecret: at least 32 characters, never echoed, and redacted even when written literally', () => {
    const short = failed(parseConfigObject(cfg({ a: stdio }, { gateway: { cursorSecret: 'tooshort' } }), {}));
    expect(short.errors[0]).toMatchObject({
      path: 'gateway.cursorSecret',
      message: 'must be at least 32 characters long',
    });
    expect(JSON.stringify(short.errors)).not.toContain('tooshort');
    const literal = 'x'.repeat(40);
    const r = ok(parseConfigObject(cfg({ a: stdio }, { gateway: { cursorSecret: literal } }), {}));
    expect(r.config.gateway.cursorSecret).toBe(literal);
    expect(r.secrets).toContain(literal);
    const fromEnv = ok(
      parseConfigObject(cfg({ a: stdio }, { gateway: { cursorSecret: '${CS}' } }), { CS: 'y'.repeat(48) }),
    );
    expect(fromEnv.config.gateway.cursorSecret).toBe('y'.repeat(48));
  });
});

describe("upstream OAuth (#19): a server's auth and gateway.oauth", () => {
  const URL_ = 'https://mcp.example.com/mcp';
  const OAUTH_SECRET = 's'.repeat(40);
  const remote = (extra: Record<string, unknown> = {}) => ({ url: URL_, ...extra });
  /** A gateway with JWT auth and an oauth secret, so that modes gateway and user are allowed. */
  const full = (servers: Record<string, unknown>, gateway: Record<string, unknown> = {}) =>
    cfg(servers, {
      gateway: { auth: { ...baseAuth, jwksUrl: JWKS_URL }, oauth: { secret: OAUTH_SECRET }, ...gateway },
    });

  it('absent auth is static: no auth key, headers as they were, no templates without ${VAR}', () => {
    const r = ok(parseConfigObject(cfg({ a: remote({ headers: { 'X-Key': 'literal' } }) }), {}));
    const s = r.config.servers[0]!;
    expect(s.auth).toBeUndefined();
    expect(s.headerTemplates).toBeUndefined();
    expect(r.config.gateway.oauth).toBeUndefined();
  });

  it('keeps the header templates of a static server, so a rotated ${VAR} can be read again', () => {
    const r = ok(
      parseConfigObject(
        cfg({ a: remote({ headers: { Authorization: 'Bearer ${TOKEN}', 'X-Other': 'plain' } }) }),
        {
          TOKEN: 'tok-1234567890',
        },
      ),
    );
    const s = r.config.servers[0]!;
    expect(s.headers).toEqual({ Authorization: 'Bearer tok-1234567890', 'X-Other': 'plain' });
    expect(s.headerTemplates).toEqual({ Authorization: 'Bearer ${TOKEN}', 'X-Other': 'plain' });
    expect(r.secrets).toContain('tok-1234567890');
  });

  it('the string shorthand and the object fill every default', () => {
    const r = ok(
      parseConfigObject(
        full({
          g: remote({ auth: 'gateway' }),
          u: remote({ auth: 'user' }),
          s: remote({ auth: 'static' }),
          o: remote({ auth: { mode: 'gateway', scopes: ['repo'], maxStepUps: 0 } }),
        }),
        {},
      ),
    );
    const [g, u, s, o] = r.config.servers;
    const defaults = { grant: 'authorization_code', scopes: [], maxStepUps: 2 };
    expect(g!.auth).toEqual({ mode: 'gateway', ...defaults });
    expect(g!.isolation).toBe('shared');
    expect(u!.auth).toEqual({ mode: 'user', ...defaults });
    // Mode user implies a connection per caller.
    expect(u!.isolation).toBe('per-subject');
    expect(s!.auth).toEqual({ mode: 'static', ...defaults });
    expect(o!.auth).toEqual({
      mode: 'gateway',
      grant: 'authorization_code',
      scopes: ['repo'],
      maxStepUps: 0,
    });
    expect(r.config.gateway.oauth).toEqual({
      secret: OAUTH_SECRET,
      clientName: 'Manifold',
      flowTtlSeconds: 600,
      refreshSkewSeconds: 60,
    });
  });

  it('a pre-registered client: clientSecret from ${VAR} is a secret, and so is a literal one', () => {
    const auth = {
      mode: 'gateway',
      grant: 'client_credentials',
      clientId: 'manifold',
      clientSecret: '${CS}',
      tokenEndpointAuthMethod: 'client_secret_post',
      issuer: 'https://as.example.com',
      scopes: ['mcp:tools'],
    };
    const r = ok(parseConfigObject(full({ a: remote({ auth }) }), { CS: 'client-secret-value' }));
    expect(r.config.servers[0]!.auth).toEqual({
      ...auth,
      clientSecret: 'client-secret-value',
      maxStepUps: 2,
    });
    expect(r.secrets).toContain('client-secret-value');
    const literal = ok(
      parseConfigObject(full({ a: remote({ auth: { ...auth, clientSecret: 'written-here' } }) }), {}),
    );
    expect(literal.secrets).toContain('written-here');
    expect(literal.secrets).toContain(OAUTH_SECRET);
  });

  it('gateway.oauth: every key, its bounds, and clientMetadataUrl from an https advertiseUrl', () => {
    const oauth = {
      secret: OAUTH_SECRET,
      clientMetadataUrl: 'https://gw.example.com/oauth/client-metadata.json',
      clientName: 'Acme gateway',
      redirectUri: 'https://gw.example.com/oauth/callback',
      flowTtlSeconds: 60,
      refreshSkewSeconds: 0,
    };
    expect(ok(parseConfigObject(cfg({ a: stdio }, { gateway: { oauth } }), {})).config.gateway.oauth).toEqual(
      oauth,
    );
    const advertised = ok(
      parseConfigObject(
        cfg(
          { a: stdio },
          { gateway: { advertiseUrl: 'https://gw.example.com', oauth: { secret: OAUTH_SECRET } } },
        ),
        {},
      ),
    );
    expect(advertised.config.gateway.oauth?.clientMetadataUrl).toBe(
      'https://gw.example.com/oauth/client-metadata.json',
    );
    // An http advertiseUrl gives no CIMD: an authorization server fetches the document over https.
    const plain = ok(
      parseConfigObject(
        cfg(
          { a: stdio },
          { gateway: { advertiseUrl: 'http://10.0.0.5:8787', oauth: { secret: OAUTH_SECRET } } },
        ),
        {},
      ),
    );
    expect(plain.config.gateway.oauth?.clientMetadataUrl).toBeUndefined();
    // A loopback http callback is allowed (RFC 8252 §7.3).
    const loop = { secret: OAUTH_SECRET, redirectUri: 'http://127.0.0.1:8787/oauth/callback' };
    expect(
      ok(parseConfigObject(cfg({ a: stdio }, { gateway: { oauth: loop } }), {})).config.gateway.oauth
        ?.redirectUri,
    ).toBe(loop.redirectUri);
  });

  it('gateway.oauth: every bad value reported at once with its path, the secret never echoed', () => {
    const r = failed(
      parseConfigObject(
        cfg(
          { a: stdio },
          {
            gateway: {
              oauth: {
                secret: 'short-secret',
                clientMetadataUrl: 'http://gw.example.com/cimd.json',
                redirectUri: 'http://gw.example.com/oauth/callback',
                flowTtlSeconds: 59,
                refreshSkewSeconds: 601,
                clientName: '',
                extra: 1,
              },
            },
          },
        ),
        {},
      ),
    );
    expect(one(r.errors, 'gateway.oauth.secret').message).toBe('must be at least 32 characters long');
    expect(one(r.errors, 'gateway.oauth.flowTtlSeconds').fix).toMatch(/600/);
    one(r.errors, 'gateway.oauth.refreshSkewSeconds');
    one(r.errors, 'gateway.oauth.clientName');
    expect(JSON.stringify(r.errors)).not.toContain('short-secret');
    expect(r.warnings.map((w) => w.path)).toContain('gateway.oauth.extra');
    // The URL checks come once the shape is right.
    const urls = failed(
      parseConfigObject(
        cfg(
          { a: stdio },
          {
            gateway: {
              oauth: {
                secret: OAUTH_SECRET,
                clientMetadataUrl: 'http://gw.example.com/cimd.json',
                redirectUri: 'http://gw.example.com/oauth/callback',
              },
            },
          },
        ),
        {},
      ),
    );
    expect(one(urls.errors, 'gateway.oauth.clientMetadataUrl').message).toBe('must be an https URL');
    expect(one(urls.errors, 'gateway.oauth.redirectUri').message).toBe(
      'must be an https URL, or http to a loopback host',
    );
    const shape = failed(parseConfigObject(cfg({ a: stdio }, { gateway: { oauth: 'secret' } }), {}));
    expect(one(shape.errors, 'gateway.oauth').fix).toMatch(/MANIFOLD_OAUTH_SECRET/);
  });

  it('a server auth of the wrong shape names the key and the fix', () => {
    const r = failed(
      parseConfigObject(
        full({
          a: remote({ auth: 'oauth' }),
          b: remote({
            auth: { mode: 'gateway', grant: 'password', maxStepUps: 6, scopes: 'repo', extra: true },
          }),
        }),
        {},
      ),
    );
    expect(one(r.errors, 'mcpServers.a.auth').fix).toMatch(/"auth": "gateway"/);
    one(r.errors, 'mcpServers.b.auth.grant');
    expect(one(r.errors, 'mcpServers.b.auth.maxStepUps').message).toBe('must be at most 5, got 6');
    one(r.errors, 'mcpServers.b.auth.scopes');
  });

  it('every rule of the design, reported all at once with its path and fix', () => {
    const r = failed(
      parseConfigObject(
        cfg(
          {
            // gateway and user without gateway.oauth.secret
            nosecret: remote({ auth: 'gateway' }),
            // user without gateway.auth, and with an isolation other than per-subject
            user: remote({ auth: 'user', isolation: 'shared' }),
            // an Authorization header besides the token the gateway obtains
            header: remote({ auth: 'gateway', headers: { authorization: 'Bearer x' } }),
            // client_credentials without a client, and with mode user
            cc: remote({ auth: { mode: 'user', grant: 'client_credentials' } }),
            // auth on a stdio server
            local: { ...stdio, auth: 'gateway' },
            // a client secret without its id, an issuer that is not https
            half: remote({ auth: { mode: 'gateway', clientSecret: 'x', issuer: 'http://as.example.com' } }),
          },
          { gateway: { auth: false } },
        ),
        {},
      ),
    );
    const secret = one(r.errors, 'mcpServers.nosecret.auth');
    expect(secret.message).toMatch(/needs gateway\.oauth\.secret/);
    expect(secret.fix).toMatch(/MANIFOLD_OAUTH_SECRET/);
    const user = at(r.errors, 'mcpServers.user.auth').map((e) => e.message);
    expect(user).toEqual(expect.arrayContaining([expect.stringMatching(/gateway\.auth is off/)]));
    expect(one(r.errors, 'mcpServers.user.isolation').fix).toMatch(/per-subject/);
    expect(one(r.errors, 'mcpServers.header.headers.authorization').fix).toMatch(
      /remove the Authorization header/,
    );
    const cc = at(r.errors, 'mcpServers.cc.auth.grant').map((e) => e.message);
    expect(cc).toHaveLength(2);
    expect(cc.join('\n')).toMatch(/needs a pre-registered client/);
    expect(cc.join('\n')).toMatch(/the mode is "user"/);
    expect(one(r.errors, 'mcpServers.local.auth').message).toMatch(
      /applies only to streamable-http and sse servers/,
    );
    one(r.errors, 'mcpServers.half.auth.clientSecret');
    expect(one(r.errors, 'mcpServers.half.auth.issuer').message).toBe(
      'must be an https URL, or http to a loopback host',
    );
    // Nothing echoed the header value or the client secret.
    expect(allText(r)).not.toContain('Bearer x');
  });

  it('mode user with isolation per-subject and gateway.auth is accepted; a bad gateway.oauth is reported once', () => {
    ok(parseConfigObject(full({ u: remote({ auth: 'user', isolation: 'per-subject' }) }), {}));
    const r = failed(
      parseConfigObject(
        cfg({ g: remote({ auth: 'gateway' }) }, { gateway: { oauth: { secret: 'short' } } }),
        {},
      ),
    );
    // The secret's own finding, not a second "needs gateway.oauth.secret" on the server.
    expect(r.errors.map((e) => e.path)).toEqual(['gateway.oauth.secret']);
  });

  it('the status page masks clientSecret and oauth.secret, and never shows the header templates', () => {
    const r = ok(
      parseConfigObject(
        full({
          a: remote({
            headers: { 'X-Trace': 'literal-${TRACE}' },
            auth: { mode: 'gateway', clientId: 'manifold', clientSecret: 'cs-literal-123' },
          }),
        }),
        { TRACE: 'trace-value-42' },
      ),
    );
    const masked = maskedConfig(r.config, redactor(r.secrets)) as {
      gateway: { oauth: Record<string, unknown> };
      servers: Record<string, unknown>[];
    };
    expect(masked.gateway.oauth).toMatchObject({ secret: '***', clientName: 'Manifold' });
    expect(masked.servers[0]).toMatchObject({
      auth: { mode: 'gateway', clientId: 'manifold', clientSecret: '***' },
    });
    expect(masked.servers[0]!.headerTemplates).toBeUndefined();
    const text = JSON.stringify(masked);
    for (const secret of [OAUTH_SECRET, 'cs-literal-123', 'trace-value-42', 'literal-'])
      expect(text).not.toContain(secret);
  });
});

describe('isolation placeholders: {{tenant}} and {{subject}} must mean the caller', () => {
  const memory = (extra: Record<string, unknown>) => ({
    command: 'npx',
    args: ['-y', '@modelcontextprotocol/server-memory'],
    ...extra,
  });

  it('49.8: {{subject}} under per-tenant is an error naming its path and the fix', () => {
    const r = failed(
      parseConfigObject(
        cfg({
          memory: memory({
            env: { MEMORY_FILE_PATH: '/var/lib/memory/{{tenant}}-{{subject}}.jsonl' },
            isolation: 'per-tenant',
          }),
        }),
        {},
      ),
    );
    const e = one(r.errors, 'mcpServers.memory.env.MEMORY_FILE_PATH');
    expect(e.message).toContain('contains {{subject}}, but isolation is "per-tenant"');
    expect(e.message).toContain('would reach the server as them');
    expect(e.fix).toBe(
      'set "isolation": "per-subject" for an instance per tenant and subject, or remove {{subject}}',
    );
    // The value is never shown.
    expect(allText(r)).not.toContain('/var/lib/memory');
  });

  it('49.8: under shared (given or by default) both placeholders stay literal, so each is an error', () => {
    for (const isolation of ['shared', undefined]) {
      const r = failed(
        parseConfigObject(
          cfg({
            notes: memory({
              args: ['-y', 'pkg', '--dir=/srv/{{tenant}}'],
              cwd: '/srv/{{subject}}',
              ...(isolation ? { isolation } : {}),
            }),
            remote: {
              url: 'https://mcp.example.com/{{tenant}}/mcp',
              headers: { 'X-User': '{{tenant}}:{{subject}}' },
              ...(isolation ? { isolation } : {}),
            },
          }),
          {},
        ),
      );
      const setting = isolation ? 'isolation is "shared":' : 'isolation is "shared" (the default):';
      const arg = one(r.errors, 'mcpServers.notes.args[2]');
      expect(arg.message).toContain(`contains {{tenant}}, but ${setting}`);
      expect(arg.fix).toBe('set "isolation": "per-tenant" for an instance per tenant, or remove {{tenant}}');
      expect(one(r.errors, 'mcpServers.notes.cwd').fix).toContain('"isolation": "per-subject"');
      expect(one(r.errors, 'mcpServers.remote.url').message).toContain('contains {{tenant}}');
      const header = one(r.errors, 'mcpServers.remote.headers.X-User');
      expect(header.message).toContain('contains {{tenant}} and {{subject}}');
      expect(header.fix).toBe(
        'set "isolation": "per-subject" for an instance per tenant and subject, or remove {{tenant}} and {{subject}}',
      );
    }
  });

  it('49.8: reported with every other config error at once, a ${VAR} value included, command too', () => {
    const r = failed(
      parseConfigObject(
        cfg(
          {
            a: memory({ env: { FILE: '${FILE}' }, isolation: 'per-tenant' }),
            b: { command: '/opt/{{tenant}}/server', isolation: 'per-tenant' },
            c: { ...stdio, timeoutMs: 0 },
          },
          { gateway: { port: 'x' } },
        ),
        { FILE: '/data/{{subject}}.jsonl' },
      ),
    );
    expect(errorsOf(r)).toEqual([
      'gateway.port: expected an integer from 1 to 65535, got string',
      expect.stringMatching(
        /^mcpServers\.a\.env\.FILE: contains \{\{subject\}\}, but isolation is "per-tenant"/,
      ),
      'mcpServers.b.command: contains {{tenant}}, which is never replaced in command (only in args, env values, cwd, url and headers values)',
      'mcpServers.c.timeoutMs: must be at least 1, got 0',
    ]);
    expect(allText(r)).not.toContain('/data/');
  });

  it('49.8: the combinations that mean the caller still load', () => {
    const r = ok(
      parseConfigObject(
        cfg({
          subject: memory({
            env: { MEMORY_FILE_PATH: '/m/{{tenant}}-{{subject}}.jsonl' },
            isolation: 'per-subject',
          }),
          tenant: memory({
            args: ['-y', 'pkg', '{{tenant}}'],
            cwd: '/m/{{tenant}}',
            isolation: 'per-tenant',
          }),
          plain: memory({ isolation: 'shared' }),
        }),
        {},
      ),
    );
    expect(r.config.servers.map((s) => [s.name, s.isolation])).toEqual([
      ['subject', 'per-subject'],
      ['tenant', 'per-tenant'],
      ['plain', 'shared'],
    ]);
    // Mode user implies per-subject, so both placeholders mean the caller.
    ok(
      parseConfigObject(
        cfg(
          { u: { url: 'https://mcp.example.com/{{tenant}}/{{subject}}', auth: 'user' } },
          { gateway: { auth: { ...baseAuth, jwksUrl: JWKS_URL }, oauth: { secret: 's'.repeat(40) } } },
        ),
        {},
      ),
    );
  });
});

describe('gateway.registry and gateway.localPrincipal (#54)', () => {
  it('reads both, with their defaults, and names the path and the fix of a bad one', () => {
    const good = ok(
      parseConfigObject(
        {
          ...cfg({ a: stdio }),
          gateway: { registry: { url: 'https://reg.example/' }, localPrincipal: { grants: ['a__*'] } },
        },
        {},
      ),
    );
    expect(good.config.gateway.registry).toEqual({ url: 'https://reg.example' });
    expect(good.config.gateway.localPrincipal).toEqual({
      subject: 'local',
      tenant: 'default',
      grants: ['a__*'],
      admin: false,
    });
    const bad = parseConfigObject(
      { ...cfg({ a: stdio }), gateway: { registry: { url: 'ftp://x' }, localPrincipal: { grants: 'all' } } },
      {},
    );
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.errors.map((e) => e.path).sort()).toEqual([
      'gateway.localPrincipal.grants',
      'gateway.registry.url',
    ]);
    for (const e of bad.errors) expect(e.fix ?? '').not.toBe('');
  });
});
