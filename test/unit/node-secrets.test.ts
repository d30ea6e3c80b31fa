/**
 * Platform.readSecret on Node (#19): `NAME`, or the file `NAME_FILE` names, read afresh on every
 * call, so that a static upstream token can be rotated by replacing the file. The config loader
 * resolves `${NAME}` the same way.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../deploy/node/cli/load.js';
import { nodePlatform } from '../../deploy/node/runtime/platform.js';
import { readNodeSecret, secretFileEnv } from '../../deploy/node/runtime/secrets.js';
import { silentLogger } from '../../src/lib/log.js';

const dir = mkdtempSync(join(tmpdir(), 'manifold-secrets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('readNodeSecret', () => {
  it('reads the variable when no NAME_FILE is set, and undefined when neither is', () => {
    expect(readNodeSecret('TOKEN', { TOKEN: 'from-env' })).toBe('from-env');
    expect(readNodeSecret('TOKEN', {})).toBeUndefined();
    // An empty NAME_FILE is no file.
    expect(readNodeSecret('TOKEN', { TOKEN: 'from-env', TOKEN_FILE: '' })).toBe('from-env');
  });

  it('reads NAME_FILE afresh each time, less one trailing newline, and it wins over NAME', () => {
    const file = join(dir, 'token');
    writeFileSync(file, 'first-value\n');
    const env = { TOKEN: 'stale', TOKEN_FILE: file };
    expect(readNodeSecret('TOKEN', env)).toBe('first-value');
    // Replaced the way a secret mount does it: a new file renamed over the old one.
    writeFileSync(join(dir, 'token.new'), 'second-value\r\n');
    renameSync(join(dir, 'token.new'), file);
    expect(readNodeSecret('TOKEN', env)).toBe('second-value');
    // Only one newline goes: a value may end in one of its own.
    writeFileSync(file, 'third\n\n');
    expect(readNodeSecret('TOKEN', env)).toBe('third\n');
  });

  it('a NAME_FILE that cannot be read is no value (not the stale variable, not a crash)', () => {
    expect(readNodeSecret('TOKEN', { TOKEN: 'stale', TOKEN_FILE: join(dir, 'missing') })).toBeUndefined();
  });

  it('is the Node platform readSecret, over process.env', () => {
    const file = join(dir, 'platform-token');
    writeFileSync(file, 'platform-value\n');
    const platform = nodePlatform(silentLogger, {} as never);
    process.env.MANIFOLD_TEST_SECRET_FILE = file;
    try {
      expect(platform.readSecret?.('MANIFOLD_TEST_SECRET')).toBe('platform-value');
      writeFileSync(file, 'rotated\n');
      expect(platform.readSecret?.('MANIFOLD_TEST_SECRET')).toBe('rotated');
    } finally {
      delete process.env.MANIFOLD_TEST_SECRET_FILE;
    }
    expect(platform.readSecret?.('MANIFOLD_TEST_SECRET')).toBeUndefined();
  });
});

describe('the config loader resolves ${NAME} from NAME_FILE too', () => {
  it('substitutes the file content, redacts it, and reports a missing variable as before', () => {
    const file = join(dir, 'header-token');
    writeFileSync(file, 'file-token-123\n');
    const config = join(dir, 'manifold.json');
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          a: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer ${HDR}' } },
        },
      }),
    );
    const loaded = loadConfigFile(config, secretFileEnv({ HDR_FILE: file }));
    expect(loaded.config.servers[0]!.headers.Authorization).toBe('Bearer file-token-123');
    expect(loaded.config.servers[0]!.headerTemplates).toEqual({ Authorization: 'Bearer ${HDR}' });
    expect(loaded.secrets).toContain('file-token-123');
    expect(() => loadConfigFile(config, secretFileEnv({}))).toThrow(/environment variable HDR is not set/);
  });
});

describe('Platform.readSecret on Workers: the binding', () => {
  it('reads a string binding, and nothing else (a namespace is no secret)', async () => {
    const { workersPlatform } = await import('../../deploy/workers/platform.js');
    const env: Record<string, unknown> = { TOKEN: 'bound-value', UPSTREAMS: { idFromName() {} } };
    const platform = workersPlatform(
      silentLogger,
      { allowedHosts: [], maxUpstreamBodyBytes: 1 << 20 } as never,
      env,
    );
    expect(platform.readSecret?.('TOKEN')).toBe('bound-value');
    expect(platform.readSecret?.('UPSTREAMS')).toBeUndefined();
    expect(platform.readSecret?.('toString')).toBeUndefined();
    env.TOKEN = 'redeployed';
    expect(platform.readSecret?.('TOKEN')).toBe('redeployed');
  });
});
