/**
 * The code-mode sandbox (#50): QuickJS compiled to WebAssembly (quickjs-emscripten), so the same
 * engine runs on Node and on Workers. Each run gets its own engine instance (`newEngine`): its own
 * WebAssembly memory, bounded, and one fresh runtime and context in it; nothing is shared between
 * runs but the compiled WebAssembly module, which is code (`Platform.codeEngine`).
 *
 * What a program holds: the language, `tools` (one async function per tool the caller may see),
 * `console` (captured), a fixed clock and a seeded `Math.random`. No host object ever enters the
 * context: a call crosses as JSON text both ways, so nothing the program builds reaches the host
 * but a string, and nothing the host answers is more than a fresh value parsed inside.
 *
 * Limits: heap (`setMemoryLimit`), stack (`setMaxStackSize`), CPU by the interrupt handler (the
 * program's own time, measured only while the engine runs, so time spent waiting on tools does
 * not count), wall clock by the same handler and a timer, calls and log bytes by the host.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSDeferredPromise,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSSyncVariant,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';

/** Why a run ended early: the limit's name, as `gateway.code` spells it. */
export type CodeLimit = 'timeoutMs' | 'cpuMs' | 'memoryBytes' | 'maxCalls' | 'maxLogBytes' | 'stack';

export interface SandboxLimits {
  timeoutMs: number;
  cpuMs: number;
  memoryBytes: number;
  maxLogBytes: number;
}

/** One log line the program wrote. */
export interface LogLine {
  level: 'log' | 'info' | 'warn' | 'error';
  text: string;
}

/**
 * The host's answer to one `tools[name](args)`: a JSON value for the program, or an error
 * message it sees as a thrown `Error`. `stop` ends the whole run (a limit, a diverged replay, a
 * question the client must answer): the program never sees it.
 */
export type HostAnswer = { value: unknown } | { error: string } | { stop: RunStop };

/** What ends a run from the host's side. */
export interface RunStop {
  kind: 'limit' | 'diverged' | 'paused' | 'refused';
  message: string;
  limit?: CodeLimit;
}

export type HostCall = (name: string, argsJson: string) => Promise<HostAnswer>;

export type SandboxOutcome =
  | { ok: true; value: unknown; logs: LogLine[] }
  | { ok: false; error: string; limit?: CodeLimit; stop?: RunStop; logs: LogLine[] };

/**
 * The stack a program may use: small enough that the engine's own check fires before the host's
 * native stack (which the WebAssembly frames share) runs out, deep enough for any sane recursion.
 */
const MAX_STACK_BYTES = 256 * 1024;

/** The bound on interrupt polls per millisecond of `cpuMs` when the host's clock stands still. */
const STILL_POLLS_PER_MS = 8;

/** The engine's build, imported once: its JavaScript glue, not any run's state. */
let variant: Promise<QuickJSSyncVariant> | undefined;

/**
 * Pages of WebAssembly memory the engine's build starts with (its INITIAL_MEMORY, 16 MiB); a
 * memory given to it must start with at least these.
 */
const ENGINE_PAGES = 256;
/** Room for the runtime's own structures beside the program's heap. */
const HEADROOM_PAGES = 64;
const PAGE = 65_536;

/** Zeroed memories waiting for a run, by their maximum in pages; at most this many of each. */
const IDLE_MEMORIES = 8;
/** A memory that grew past this many pages is not kept: idle memory stays small. */
const KEPT_PAGES = 2 * ENGINE_PAGES;
// Why a pool: a WebAssembly.Memory made per run is freed only by a full collection of the whole
// gateway heap, which cost far more than the run itself (bench row `code-10-calls`); a memory
// handed back is wiped to zeros first, so what waits here holds nothing of any run.
const idle = new Map<number, WebAssembly.Memory[]>();

/** A run's engine and the memory it lives in; `release` wipes the memory for the next run. */
export interface Engine {
  module: QuickJSWASMModule;
  release(): void;
}

/**
 * A fresh engine for one run, in its own WebAssembly memory that cannot grow past the run's heap
 * limit. The engine's own limit counts single allocations only (its build cannot read a block's
 * real size), so this bound is what keeps a program's total within `memoryBytes`. `wasmModule`:
 * the compiled module the host has (Workers import the .wasm as a module and cannot compile bytes
 * at run time); absent, the build loads its own file.
 */
export async function newEngine(
  memoryBytes: number,
  wasmModule?: () => Promise<WebAssembly.Module>,
): Promise<Engine> {
  variant ??= import('@jitl/quickjs-wasmfile-release-sync').then(variantOf).catch((e: unknown) => {
    variant = undefined;
    throw e;
  });
  const base = await variant;
  const maximum = ENGINE_PAGES + HEADROOM_PAGES + Math.ceil(memoryBytes / PAGE);
  const wasmMemory = idle.get(maximum)?.pop() ?? new WebAssembly.Memory({ initial: ENGINE_PAGES, maximum });
  const module = await newQuickJSWASMModuleFromVariant(
    newVariant(base, { wasmMemory, ...(wasmModule ? { wasmModule } : {}) }),
  );
  let released = false;
  return {
    module,
    release: () => {
      if (released) return;
      released = true;
      const pages = wasmMemory.buffer.byteLength / PAGE;
      const kept = idle.get(maximum) ?? [];
      if (pages > KEPT_PAGES || kept.length >= IDLE_MEMORIES) return;
      new Uint8Array(wasmMemory.buffer).fill(0);
      kept.push(wasmMemory);
      idle.set(maximum, kept);
    },
  };
}

/**
 * The variant from its module: its types describe the CommonJS build (the variant one `default`
 * deeper) while an ES import's `default` is the variant itself; either way, checked.
 */
function variantOf(loaded: unknown): QuickJSSyncVariant {
  for (let v = loaded, depth = 0; depth < 3; depth++) {
    if (typeof v !== 'object' || v === null) break;
    const candidate = v as Partial<QuickJSSyncVariant> & { default?: unknown };
    if (candidate.type === 'sync' && typeof candidate.importFFI === 'function')
      return candidate as QuickJSSyncVariant;
    v = candidate.default;
  }
  throw new Error('the QuickJS variant did not load');
}

/**
 * The prelude run before the program, in the context: it takes the two host functions away from
 * the global object, builds `tools` and `console` over them, fixes the clock and seeds the
 * random numbers. Its inputs are JSON the host made (names, time, seed), never the program's text.
 */
function prelude(now: number, seed: number): string {
  return `(function (call, log, has, list, now, seed) {
  'use strict';
  delete globalThis.__manifoldCall;
  delete globalThis.__manifoldLog;
  delete globalThis.__manifoldHas;
  delete globalThis.__manifoldList;
  const parse = JSON.parse, stringify = JSON.stringify, freeze = Object.freeze;
  const made = new Map();
  const tool = (name) => {
    if (typeof name !== 'string' || !has(name)) return undefined;
    let fn = made.get(name);
    if (!fn) {
      fn = freeze(async function (args) {
        const text = stringify(args === undefined ? {} : args);
        if (typeof text !== 'string') throw new TypeError('tool arguments must be a JSON object');
        const answer = parse(await call(name, text));
        if (answer.e !== undefined) throw new Error(answer.e);
        return answer.v;
      });
      made.set(name, fn);
    }
    return fn;
  };
  // Only the tools the caller may see exist, asked of the host by name: a catalog of thousands
  // costs nothing until a program names one.
  const tools = new Proxy(Object.create(null), {
    get: (_, name) => tool(name),
    has: (_, name) => typeof name === 'string' && has(name),
    ownKeys: () => parse(list()),
    getOwnPropertyDescriptor: (_, name) => {
      const fn = tool(name);
      return fn && { value: fn, writable: false, enumerable: true, configurable: true };
    },
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    setPrototypeOf: () => false,
  });
  Object.defineProperty(globalThis, 'tools', { value: tools, enumerable: false });
  const show = (v) => {
    if (typeof v === 'string') return v;
    try { const s = stringify(v); return s === undefined ? String(v) : s; } catch { return String(v); }
  };
  const consoleObject = Object.create(null);
  for (const level of ['log', 'info', 'warn', 'error']) {
    consoleObject[level] = freeze((...args) => { log(level, args.map(show).join(' ')); });
  }
  Object.defineProperty(globalThis, 'console', { value: freeze(consoleObject), enumerable: false });
  const RealDate = Date;
  class FixedDate extends RealDate {
    constructor(...args) { if (args.length === 0) super(now); else super(...args); }
    static now() { return now; }
  }
  Object.defineProperty(globalThis, 'Date', { value: FixedDate, writable: true, configurable: true });
  let state = seed >>> 0;
  Math.random = function () {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
})(globalThis.__manifoldCall, globalThis.__manifoldLog, globalThis.__manifoldHas, globalThis.__manifoldList, ${JSON.stringify(now)}, ${JSON.stringify(seed)});`;
}

/** The tools a program may name: asked by name, listed only when it enumerates `tools`. */
export interface ToolNames {
  has(name: string): boolean;
  list(): readonly string[];
}

/** One run of a program (an expression that evaluates to a promise) in a fresh context. */
export async function runInSandbox(
  engine: Engine,
  program: string,
  options: {
    names: ToolNames;
    call: HostCall;
    limits: SandboxLimits;
    /** The program's fixed clock (ms since the epoch) and its random seed. */
    now: number;
    seed: number;
    /** The host's clock, for the CPU and wall-clock limits. */
    clock: () => number;
  },
): Promise<SandboxOutcome> {
  const { limits, clock } = options;
  const runtime = engine.module.newRuntime();
  runtime.setMemoryLimit(limits.memoryBytes);
  runtime.setMaxStackSize(MAX_STACK_BYTES);
  const context = runtime.newContext();
  const run = new Run(runtime, context, options.call, limits, clock);
  let healthy = true;
  try {
    return await run.start(options.names, program, options.now, options.seed);
  } catch {
    // The engine itself failed (the host's stack, an abort): the run ends, and its instance and
    // memory with it.
    healthy = false;
    return { ok: false, error: 'the sandbox failed while running the program', logs: [] };
  } finally {
    if (run.dispose() && healthy) engine.release();
  }
}

class Run {
  private readonly logs: LogLine[] = [];
  private logBytes = 0;
  private logsCut = false;
  /** The program's CPU time so far, and when the current slice began (undefined: not running). */
  private cpu = 0;
  private sliceStart: number | undefined;
  /** Interrupt polls seen while the host's clock stood still, and when it last moved. */
  private stillPolls = 0;
  private lastTick = Number.NaN;
  private readonly deadline: number;
  private stopped: { error: string; limit?: CodeLimit; stop?: RunStop } | undefined;
  private readonly pending = new Set<QuickJSDeferredPromise>();
  private disposed = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly runtime: QuickJSRuntime,
    private readonly context: QuickJSContext,
    private readonly call: HostCall,
    private readonly limits: SandboxLimits,
    private readonly clock: () => number,
  ) {
    this.deadline = clock() + limits.timeoutMs;
    runtime.setInterruptHandler(() => this.overLimit());
  }

  /** Called by the engine as it runs: true interrupts the program. */
  private overLimit(): boolean {
    if (this.stopped) return true;
    const now = this.clock();
    // Where the clock stands still while code runs (Workers in production advance it only at
    // I/O), the engine's own interrupt polls bound the program instead: `polls per ms` is set
    // above the fastest rate the bench measures, so this never cuts a run the clock would allow.
    this.stillPolls = now === this.lastTick ? this.stillPolls + 1 : 0;
    this.lastTick = now;
    if (this.stillPolls > this.limits.cpuMs * STILL_POLLS_PER_MS) {
      this.stop({ error: `the program used more than ${this.limits.cpuMs} ms of CPU`, limit: 'cpuMs' });
      return true;
    }
    if (this.sliceStart !== undefined && this.cpu + (now - this.sliceStart) > this.limits.cpuMs) {
      this.stop({ error: `the program used more than ${this.limits.cpuMs} ms of CPU`, limit: 'cpuMs' });
      return true;
    }
    if (now > this.deadline) {
      this.stop({ error: `the run took longer than ${this.limits.timeoutMs} ms`, limit: 'timeoutMs' });
      return true;
    }
    return false;
  }

  private stop(why: { error: string; limit?: CodeLimit; stop?: RunStop }): void {
    this.stopped ??= why;
    this.wake?.();
  }

  /** Runs engine work as one CPU slice. */
  private slice<T>(work: () => T): T {
    this.sliceStart = this.clock();
    try {
      return work();
    } finally {
      this.cpu += this.clock() - this.sliceStart;
      this.sliceStart = undefined;
    }
  }

  async start(names: ToolNames, program: string, now: number, seed: number): Promise<SandboxOutcome> {
    const { context } = this;
    const hasFn = context.newFunction('has', (nameHandle) =>
      names.has(context.getString(nameHandle)) ? context.true : context.false,
    );
    const listFn = context.newFunction('list', () => context.newString(JSON.stringify(names.list())));
    context.setProp(context.global, '__manifoldHas', hasFn);
    context.setProp(context.global, '__manifoldList', listFn);
    hasFn.dispose();
    listFn.dispose();
    const callFn = context.newFunction('call', (nameHandle, argsHandle) =>
      this.hostCall(nameHandle, argsHandle),
    );
    const logFn = context.newFunction('log', (levelHandle, textHandle) => {
      this.log(context.getString(levelHandle), context.getString(textHandle));
    });
    context.setProp(context.global, '__manifoldCall', callFn);
    context.setProp(context.global, '__manifoldLog', logFn);
    callFn.dispose();
    logFn.dispose();
    const set = this.slice(() => context.evalCode(prelude(now, seed), 'prelude.js'));
    if (set.error) {
      set.error.dispose();
      return this.failed('the sandbox could not be prepared');
    }
    set.value.dispose();
    // The program is an expression whose value is a promise (run.ts wraps the model's body).
    const evaluated = this.slice(() => context.evalCode(program, 'program.js'));
    if (evaluated.error) return this.failed(this.errorText(evaluated.error));
    const promise = evaluated.value;
    const timer = setTimeout(
      () => this.stop({ error: `the run took longer than ${this.limits.timeoutMs} ms`, limit: 'timeoutMs' }),
      Math.max(0, this.limits.timeoutMs),
    );
    try {
      for (;;) {
        this.pump();
        if (this.stopped) break;
        const state = context.getPromiseState(promise);
        if (state.type !== 'pending') {
          if (state.type === 'fulfilled') {
            const value = this.exportValue(state.value);
            state.value.dispose();
            if (this.stopped) break;
            return { ok: true, value, logs: this.logs };
          }
          const error = this.errorText(state.error);
          return this.failed(error);
        }
        if (this.pending.size === 0) {
          // Nothing the host owes it and nothing left to run: the program awaits forever.
          return this.failed('the program is waiting for something that will never happen');
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
      }
    } finally {
      clearTimeout(timer);
      promise.dispose();
    }
    const why = this.stopped!;
    return { ok: false, ...why, logs: this.logs };
  }

  /** Runs the engine's queued jobs (promise reactions) as one CPU slice. */
  private pump(): void {
    if (this.stopped) return;
    const result = this.slice(() => this.runtime.executePendingJobs());
    if (result.error) {
      // A job that threw outside the program's own promise chain (or an interrupt).
      const text = this.errorText(result.error);
      if (!this.stopped) this.stop({ error: text, ...this.engineLimit(text) });
    }
  }

  private hostCall(nameHandle: QuickJSHandle, argsHandle: QuickJSHandle): QuickJSHandle {
    const { context } = this;
    const name = context.getString(nameHandle);
    const args = context.getString(argsHandle);
    const deferred = context.newPromise();
    this.pending.add(deferred);
    void this.call(name, args).then(
      (answer) => this.settle(deferred, answer),
      () => this.settle(deferred, { error: 'the tool call failed inside the gateway' }),
    );
    return deferred.handle;
  }

  private settle(deferred: QuickJSDeferredPromise, answer: HostAnswer): void {
    this.pending.delete(deferred);
    if (this.disposed) return;
    if ('stop' in answer) {
      deferred.dispose();
      this.stop({
        error: answer.stop.message,
        stop: answer.stop,
        ...(answer.stop.limit ? { limit: answer.stop.limit } : {}),
      });
      return;
    }
    const text = JSON.stringify('error' in answer ? { e: answer.error } : { v: answer.value ?? null });
    const handle = this.context.newString(text);
    deferred.resolve(handle);
    handle.dispose();
    deferred.dispose();
    this.wake?.();
  }

  private log(level: string, text: string): void {
    if (this.logsCut) return;
    const lvl = (['log', 'info', 'warn', 'error'] as const).find((l) => l === level) ?? 'log';
    const room = this.limits.maxLogBytes - this.logBytes;
    if (text.length > room) {
      if (room > 0) this.logs.push({ level: lvl, text: text.slice(0, room) });
      this.logs.push({
        level: 'warn',
        text: `[logs cut at gateway.code.maxLogBytes (${this.limits.maxLogBytes})]`,
      });
      this.logsCut = true;
      this.logBytes = this.limits.maxLogBytes;
      return;
    }
    this.logBytes += text.length;
    this.logs.push({ level: lvl, text });
  }

  /** The program's return value as JSON (undefined becomes null), made inside the context. */
  private exportValue(handle: QuickJSHandle): unknown {
    const { context } = this;
    const json = context.getProp(context.global, 'JSON');
    const stringify = context.getProp(json, 'stringify');
    const result = this.slice(() => context.callFunction(stringify, json, handle));
    stringify.dispose();
    json.dispose();
    if (result.error) {
      const text = this.errorText(result.error);
      this.stop({ error: `the program's result is not JSON: ${text}`, ...this.engineLimit(text) });
      return undefined;
    }
    const text = context.typeof(result.value) === 'string' ? context.getString(result.value) : 'null';
    result.value.dispose();
    return JSON.parse(text);
  }

  /** A thrown value as text ("TypeError: …"), bounded; disposes the handle. */
  private errorText(handle: QuickJSHandle): string {
    const { context } = this;
    let text: string;
    try {
      const name = context.typeof(handle) === 'object' ? context.getProp(handle, 'name') : undefined;
      const message = context.typeof(handle) === 'object' ? context.getProp(handle, 'message') : undefined;
      const n = name && context.typeof(name) === 'string' ? context.getString(name) : '';
      const m = message && context.typeof(message) === 'string' ? context.getString(message) : '';
      name?.dispose();
      message?.dispose();
      text = n || m ? `${n || 'Error'}: ${m}` : String(context.dump(handle));
    } catch {
      text = 'an exception that could not be read';
    } finally {
      handle.dispose();
    }
    return text.length > 1000 ? `${text.slice(0, 1000)}…` : text;
  }

  /**
   * Which limit an engine error stands for. The engine reports a full heap and a deep stack as
   * its own InternalError (QuickJS has no error codes): the heap limit and stack limit are ours,
   * so these are the only texts read, and only from the engine's own errors.
   */
  private engineLimit(text: string): { limit?: CodeLimit } {
    if (text === 'InternalError: out of memory' || text.startsWith('null')) return { limit: 'memoryBytes' };
    if (text === 'InternalError: stack overflow' || text.startsWith('RangeError: Maximum call stack'))
      return { limit: 'stack' };
    return {};
  }

  private failed(error: string): SandboxOutcome {
    if (this.stopped) return { ok: false, ...this.stopped, logs: this.logs };
    const limit = this.engineLimit(error);
    const named =
      limit.limit === 'memoryBytes'
        ? `the program ran out of memory (gateway.code.memoryBytes, ${this.limits.memoryBytes} bytes)`
        : limit.limit === 'stack'
          ? 'the program recursed too deeply (stack overflow)'
          : error;
    return { ok: false, error: named, ...limit, logs: this.logs };
  }

  /** Frees the run's runtime and context; false when the engine could not free them cleanly. */
  dispose(): boolean {
    this.disposed = true;
    for (const d of this.pending) d.dispose();
    this.pending.clear();
    try {
      this.context.dispose();
      this.runtime.dispose();
      return true;
    } catch {
      // The instance and its memory were this run's alone, and go with it.
      return false;
    }
  }
}
