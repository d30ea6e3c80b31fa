import { describe, expect, it } from 'vitest';
import { eventually, FIXTURE, type LogLine, startTestGateway } from '../helpers/harness.js';

/**
 * SECURITY F6, J2: closing the gateway ends every upstream attempt still under way. A stdio child
 * that is being connected (its handshake unanswered) or listed (initialize answered, tools/list
 * not) is gone when `stop` resolves, long before its connect or listing deadline.
 */

/** kill(pid, 0) succeeds for a live process (this process is not its parent: no zombie stays). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw e;
  }
}

const stderrLine = (logs: LogLine[], text: string) =>
  logs.some((l) => l.event === 'upstream.stderr' && typeof l.line === 'string' && l.line.includes(text));

async function stopWhile(server: Record<string, unknown>, reached: string): Promise<void> {
  const gw = await startTestGateway(
    {
      mcpServers: { slow: server },
      // Deadlines far beyond the test: only closing can end the attempt in time.
      gateway: { connectTimeoutMs: 120_000, listTimeoutMs: 120_000 },
    },
    { waitReady: false },
  );
  let pid: number | undefined;
  try {
    await eventually(() => stderrLine(gw.logs, reached), `the child reached "${reached}"`);
    pid = gw.logs.find((l) => l.event === 'upstream.spawned')?.pid as number;
    expect(isAlive(pid)).toBe(true);
    expect(gw.gateway.health().upstreams[0]?.state).toBe('connecting');
    await gw.stop();
    expect(isAlive(pid), 'the child outlived the stopped gateway').toBe(false);
    expect(gw.logs.filter((l) => l.event === 'upstream.unavailable')).toEqual([]);
  } finally {
    await gw.stop();
    if (pid !== undefined && isAlive(pid)) process.kill(-pid, 'SIGKILL');
  }
}

describe('49.14: closing the gateway while an upstream is still connecting', () => {
  it('49.14: stopped while a stdio server is listing (initialize answered, tools/list not): the session being connected is closed, its child gone', async () => {
    await stopWhile(
      { command: process.execPath, args: [FIXTURE], env: { FIXTURE_MODE: 'hang-list' } },
      'tools/list received',
    );
  });

  it('49.14: stopped while a stdio server has not answered its handshake: the child being opened is gone', async () => {
    await stopWhile(
      {
        command: process.execPath,
        args: ['-e', "process.stderr.write('started, answering nothing\\n'); process.stdin.resume()"],
      },
      'started, answering nothing',
    );
  });
});
