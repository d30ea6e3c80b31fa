/**
 * 2025 servers' tasks waiting for a 2026 client's input (tasks.ts bridges the two): the requests a
 * server sends on a kept-open tasks/result, gathered per task and answered by tasks/update.
 */
import { ManifoldError } from '../../errors.js';
import { isObject } from '../../lib/json.js';
import type { InputHandler, InputResponses } from '../../upstream/session.js';
import { CallerBounds, type CallerLimits, type Holder } from './caller-bounds.js';

type Result = Record<string, unknown>;

/** A failure as a JSON-RPC error object, in the gateway's public words. */
export function errorObject(e: unknown): Result {
  if (e instanceof ManifoldError) return { code: -32603, message: e.publicMessage };
  return { code: -32603, message: 'the task failed' };
}

/**
 * The input a 2025 server's task waits for, gathered for 2026 clients: the server sends its
 * requests on a tasks/result call, which a pump keeps open; tasks/get shows them under keys of
 * the gateway's (unique for the task's life), tasks/update answers them. On this instance only,
 * like the upstream session the task lives in. Bounded per principal and per tenant before the
 * total (caller-bounds.ts, SECURITY G4): one caller's flood ends only its own pumps. Each pump
 * ends with its call, its task, or after `ttlMs`. The upstream's own deadline for tasks/result
 * still applies.
 */
interface Asked {
  method: string;
  params?: Record<string, unknown>;
  resolve: (answer: Result) => void;
  reject: (reason: Error) => void;
}

interface Pump {
  asked: Map<string, Asked>;
  seq: number;
  running: boolean;
  outcome?: { result?: Result; error?: Result };
  firstAsk?: (() => void) | undefined;
  expires: number;
}

/** How long a tasks/get waits for a just-started pump to hear the server's requests. */
const FIRST_ASK_WAIT_MS = 1_500;

export class TaskPumps {
  private readonly pumps = new Map<string, Pump>();
  private readonly bounds: CallerBounds<string>;

  constructor(
    private readonly now: () => number,
    limits: CallerLimits,
    private readonly ttlMs = 10 * 60_000,
  ) {
    this.bounds = new CallerBounds(limits);
  }

  /**
   * The requests waiting for answers, keyed for the client; starts the pump (`call`, given the
   * handler that collects the server's requests) unless one is running. `holder` is whose task it
   * is (task ids are bound to their principal).
   */
  async pending(
    taskId: string,
    holder: Holder,
    call: (onInput: InputHandler) => Promise<Result>,
  ): Promise<Result | undefined> {
    let pump = this.pumps.get(taskId);
    if (!pump?.running) pump = this.start(taskId, holder, call);
    if (pump.asked.size === 0 && pump.running) {
      const p = pump;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, FIRST_ASK_WAIT_MS);
        p.firstAsk = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    if (pump.asked.size === 0) return undefined;
    const out: Result = {};
    for (const [key, a] of pump.asked)
      out[key] = { method: a.method, ...(a.params ? { params: a.params } : {}) };
    return out;
  }

  /** Delivers answers to the requests they name; unknown or answered keys are ignored (SEP-2663). */
  answer(taskId: string, answers: InputResponses): void {
    const pump = this.pumps.get(taskId);
    if (!pump) return;
    for (const [key, answer] of Object.entries(answers)) {
      const asked = pump.asked.get(key);
      if (!asked || !isObject(answer)) continue;
      pump.asked.delete(key);
      asked.resolve(answer);
    }
  }

  /** How the pump's tasks/result ended, if it did. */
  outcome(taskId: string): { result?: Result; error?: Result } | undefined {
    return this.pumps.get(taskId)?.outcome;
  }

  /** Ends a task's pump: its waiting requests are refused, so the server's call ends too. */
  end(taskId: string, reason = new Error('the task was cancelled')): void {
    const pump = this.pumps.get(taskId);
    this.pumps.delete(taskId);
    this.bounds.remove(taskId);
    if (!pump) return;
    for (const a of pump.asked.values()) a.reject(reason);
    pump.asked.clear();
  }

  closeAll(): void {
    for (const id of [...this.pumps.keys()]) this.end(id, new Error('the gateway is shutting down'));
  }

  private start(taskId: string, holder: Holder, call: (onInput: InputHandler) => Promise<Result>): Pump {
    // A pump that ran to its end makes room for its successor: nothing of it is waiting.
    this.pumps.delete(taskId);
    this.bounds.remove(taskId);
    this.evict(holder);
    const pump: Pump = { asked: new Map(), seq: 0, running: true, expires: this.now() + this.ttlMs };
    this.pumps.set(taskId, pump);
    this.bounds.add(taskId, holder);
    const onInput: InputHandler = (requests) =>
      Promise.all(
        Object.entries(requests).map(
          ([upstreamKey, r]) =>
            new Promise<[string, Result]>((resolve, reject) => {
              const key = `i${++pump.seq}`;
              pump.asked.set(key, {
                method: r.method,
                ...(r.params ? { params: r.params } : {}),
                resolve: (answer) => resolve([upstreamKey, answer]),
                reject,
              });
              pump.firstAsk?.();
              pump.firstAsk = undefined;
            }),
        ),
      ).then((entries) => Object.fromEntries(entries) as InputResponses);
    call(onInput)
      .then(
        (result) => {
          pump.outcome = { result };
        },
        (e: unknown) => {
          pump.outcome = { error: errorObject(e) };
        },
      )
      .finally(() => {
        pump.running = false;
        for (const a of pump.asked.values()) a.reject(new Error('the server stopped waiting'));
        pump.asked.clear();
        pump.firstAsk?.();
        pump.firstAsk = undefined;
      });
    return pump;
  }

  private evict(holder: Holder): void {
    const now = this.now();
    for (const [id, pump] of this.pumps)
      if (pump.expires < now) this.end(id, new Error('the task waited too long'));
    this.bounds.admit(holder, (id) => this.end(id, new Error('too many tasks waiting for input')));
  }
}
