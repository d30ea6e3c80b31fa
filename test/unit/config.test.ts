// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the tests write ${VAR} references in plain strings
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ConfigIssue,
  type ConfigResult,
  formatIssues,
  formatPath,
  GATEWAY_DEFAULTS,
  interpolateString,
  parseConfig,
  parseConfigObject,
} from '../../src/config/index.js';

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
      timeoutMs: 60000,
      disabled: false,
      maxResultBytes: 65536,
      budgetTokens: 20000,
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
      host: '127.0.0.1',
      port: 8787,
      logLevel: 'info',
      allowedOrigins: [],
      hostnames: [],
      maxBodyBytes: 1048576,
      maxSessions: 10000,
      sessionIdleSeconds: 3600,
      callTimeoutMs: 60000,
      maxCallTimeoutMs: 600000,
      connectTimeoutMs: 15000,
      listTimeoutMs: 15000,
      maxListPages: 100,
      pageSize: 500,
      shutdownGraceMs: 10000,
      allowedHosts: [],
      maxResultBytes: 65536,
      maxUpstreamBodyBytes: 8388608,
      maxSchemaBytes: 20480,
      maxDescriptionBytes: 4096,
      maxToolsPerServer: 1000,
      disclosure: { budgetTokens: 20000, alwaysLoad: [] },
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
      url: 'https://x',
      args: [],
      env: {},
      headers: {},
      prefix: 'a',
      tools: { deny: [] },
      timeoutMs: 5000,
      disabled: false,
      maxResultBytes: 65536,
      budgetTokens: 20000,
    });
  });

  it('keeps given gateway values and server fields', () => {
    const gateway = {
      host: '0.0.0.0',
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
      timeoutMs: 120000,
      disabled: true,
      maxResultBytes: 1000,
      budgetTokens: 'off',
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
    expect(result.config.servers[0]).toEqual({ name: 's', type: 'stdio', headers: {}, ...server });
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
      gateway: { auth: { issuer: 'x' }, prot: 1, disclosure: { budgetToken: 5, mode: 'lazy' } },
      mcpServers: { a: { ...stdio, description: 'd', comand: 'x', tools: { allow: ['x'], block: [] } } },
    };
    const result = ok(parseConfigObject(raw, {}));
    expect(result.warnings.map((w) => w.path)).toEqual([
      'inputs',
      'gateway.auth',
      'gateway.prot',
      'gateway.disclosure.budgetToken',
      'gateway.disclosure.mode',
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

  it('treats the egress, size and disclosure keys as known, at the gateway and per server', () => {
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
      gateway: { host: '${BIND}', allowedOrigins: ['https://${HOST}'] },
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
          const secret = `SECRET${body}${twist}`;
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
