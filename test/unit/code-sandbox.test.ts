import { describe, expect, it } from 'vitest';
import { nodeCodeEngine } from '../../deploy/node/runtime/code-engine.js';
import { compileProgram, MAX_PROGRAM_CHARS } from '../../src/code/run.js';
import { type HostCall, newEngine, runInSandbox, type SandboxLimits } from '../../src/code/sandbox.js';

const LIMITS: SandboxLimits = {
  timeoutMs: 5000,
  cpuMs: 1000,
  memoryBytes: 32 * 1024 * 1024,
  maxLogBytes: 1024,
};

const NAMES = ['memory__read_graph', 'weird-name'];
const echo: HostCall = async (name, args) => ({ value: { name, args: JSON.parse(args) } });

async function run(program: string, call: HostCall = echo, limits: Partial<SandboxLimits> = {}) {
  const all = { ...LIMITS, ...limits };
  const engine = await newEngine(all.memoryBytes, nodeCodeEngine);
  return runInSandbox(engine, `(async function () {\n${program}\n})()`, {
    names: { has: (n) => NAMES.includes(n), list: () => NAMES },
    call,
    limits: all,
    now: 1_700_000_000_000,
    seed: 42,
    clock: () => performance.now(),
  });
}

describe('the code-mode sandbox', () => {
  it('runs a program that calls tools and returns JSON, with its logs', async () => {
    const out = await run(`
      const a = await tools.memory__read_graph({ q: 1 });
      const b = await tools['weird-name']();
      console.log('got', a.name, { n: 1 });
      return { a, b, keys: Object.keys(tools) };
    `);
    expect(out).toEqual({
      ok: true,
      value: {
        a: { name: 'memory__read_graph', args: { q: 1 } },
        b: { name: 'weird-name', args: {} },
        keys: ['memory__read_graph', 'weird-name'],
      },
      logs: [{ level: 'log', text: 'got memory__read_graph {"n":1}' }],
    });
  });

  it('H2: a name the caller cannot see does not exist in tools', async () => {
    const out = await run(`
      return [typeof tools.secret__tool, 'secret__tool' in tools, 'weird-name' in tools,
        typeof tools.constructor, typeof tools.__proto__, Object.getPrototypeOf(tools)];
    `);
    expect(out).toMatchObject({
      ok: true,
      value: ['undefined', false, true, 'undefined', 'undefined', null],
    });
  });

  it('H1: has no process, require, fetch, host functions or timers', async () => {
    const out = await run(`
      return [typeof process, typeof require, typeof fetch, typeof setTimeout, typeof __manifoldCall,
        typeof globalThis.__manifoldLog, typeof WebAssembly, typeof XMLHttpRequest];
    `);
    expect(out).toMatchObject({ ok: true, value: Array(8).fill('undefined') });
  });

  it('fixes the clock and seeds Math.random', async () => {
    const a = await run('return [Date.now(), new Date().getTime(), Math.random(), Math.random()]');
    const b = await run('return [Date.now(), new Date().getTime(), Math.random(), Math.random()]');
    expect(a.ok && b.ok).toBe(true);
    expect(a).toEqual(b);
    expect((a as { value: number[] }).value[0]).toBe(1_700_000_000_000);
  });

  it('H3: an endless loop ends at cpuMs', async () => {
    const out = await run('for (;;) {}', echo, { cpuMs: 100 });
    expect(out).toMatchObject({ ok: false, limit: 'cpuMs' });
  });

  it('H3: a call that never answers ends the run at timeoutMs', async () => {
    const t = performance.now();
    const out = await run('await tools.memory__read_graph({}); return 1;', () => new Promise(() => {}), {
      timeoutMs: 300,
    });
    expect(out).toMatchObject({ ok: false, limit: 'timeoutMs' });
    expect(performance.now() - t).toBeLessThan(5000);
  });

  it('H3: a program awaiting what never comes ends cleanly', async () => {
    const out = await run('await new Promise(() => {}); return 1;');
    expect(out).toMatchObject({ ok: false, error: expect.stringContaining('never happen') });
  });

  it('H3: a memory bomb ends at memoryBytes', async () => {
    const out = await run('const a = []; for (;;) a.push(new Uint8Array(1 << 20));', echo, {
      cpuMs: 5000,
      memoryBytes: 8 * 1024 * 1024,
    });
    expect(out).toMatchObject({ ok: false, limit: 'memoryBytes' });
  });

  it('H3: many small allocations end at memoryBytes too: the run cannot grow its memory past it', async () => {
    const t = performance.now();
    const out = await run('const a = []; for (;;) a.push("ab".repeat(1 << 12) + a.length);', echo, {
      cpuMs: 20_000,
      memoryBytes: 8 * 1024 * 1024,
    });
    expect(out).toMatchObject({ ok: false, limit: 'memoryBytes' });
    expect(performance.now() - t).toBeLessThan(15_000);
  });

  it('H3: deep recursion ends cleanly', async () => {
    const out = await run('const f = (n) => f(n + 1) + 1; return f(0);');
    expect(out).toMatchObject({ ok: false, limit: 'stack' });
  });

  it('H3: a huge string ends the run cleanly', async () => {
    const out = await run('let s = "x"; for (let i = 0; i < 40; i++) s = s + s; return s.length;');
    expect(out).toMatchObject({ ok: false });
    expect((out as { error: string }).error).toMatch(/string too long|out of memory/);
  });

  it('a run after each abuse still works', async () => {
    await run('const f = (n) => f(n + 1) + 1; return f(0);');
    await run('const a = []; for (;;) a.push(new Uint8Array(1 << 20));');
    expect(await run('return 1 + 1')).toMatchObject({ ok: true, value: 2 });
  });

  it('an exception ends the run naming it', async () => {
    const out = await run('throw new TypeError("nope")');
    expect(out).toMatchObject({ ok: false, error: 'TypeError: nope' });
  });

  it('a tool error throws an Error inside the program', async () => {
    const out = await run(
      'try { await tools.memory__read_graph({}); } catch (e) { return e.message; }',
      async () => ({
        error: 'bad input',
      }),
    );
    expect(out).toMatchObject({ ok: true, value: 'bad input' });
  });

  it('globalThis.constructor.constructor is the sandbox own Function, not a way out', async () => {
    const out = await run(
      'const F = globalThis.constructor.constructor; return F("return typeof process")();',
    );
    expect(out).toMatchObject({ ok: true, value: 'undefined' });
  });

  it('caps logs at maxLogBytes', async () => {
    const out = await run('for (let i = 0; i < 100; i++) console.log("0123456789"); return 1;', echo, {
      maxLogBytes: 25,
    });
    expect(out.ok).toBe(true);
    expect(out.logs.map((l) => l.text)).toEqual([
      '0123456789',
      '0123456789',
      '01234',
      expect.stringContaining('maxLogBytes'),
    ]);
  });
});

describe('compileProgram', () => {
  it('strips TypeScript annotations and wraps the body as an async function', () => {
    const out = compileProgram('const n: number = 2; return n as number;');
    expect(out).toEqual({ source: expect.stringContaining('const n = 2; return n ;') });
  });

  it('refuses a program over MAX_PROGRAM_CHARS before parsing it, and takes one at the bound', () => {
    const over = compileProgram(`return (${' '.repeat(MAX_PROGRAM_CHARS)}`);
    expect(over).toEqual({ error: expect.stringMatching(/over the 100000 a run takes/) });
    const at = compileProgram(`return 1;${' '.repeat(MAX_PROGRAM_CHARS - 9)}`);
    expect(at).toEqual({ source: expect.stringContaining('return 1;') });
    expect(compileProgram('return (')).toEqual({ error: expect.stringMatching(/^SyntaxError/) });
  });
});
