/**
 * One code-mode program, from the model's text to the run's answer (#50): TypeScript annotations
 * stripped (sucrase: a parser, not a compiler, and it neither evaluates nor builds functions),
 * the body run as an async function in a fresh sandbox, and the outcome shaped as one tool result:
 * `structuredContent: {result, logs}` and the same JSON as text, or an `isError` result that
 * names the exception or the limit, with the calls made so far.
 */
import { transform } from 'sucrase';
import type { CodeLimits } from '../config/types.js';
import {
  type HostCall,
  type LogLine,
  newEngine,
  type RunStop,
  runInSandbox,
  type ToolNames,
} from './sandbox.js';

type Result = Record<string, unknown>;

/** A program longer than this is refused before it is parsed. */
export const MAX_PROGRAM_CHARS = 100_000;

export type ProgramOutcome =
  | { ok: true; value: unknown; logs: LogLine[] }
  | { ok: false; error: string; limit?: string; stop?: RunStop; logs: LogLine[] };

/** The program as JavaScript: its annotations stripped, wrapped as the body of an async function. */
export function compileProgram(code: string): { source: string } | { error: string } {
  if (code.length > MAX_PROGRAM_CHARS) {
    return {
      error: `the program is ${code.length} characters long, over the ${MAX_PROGRAM_CHARS} a run takes: make it shorter, or split the work into several runs`,
    };
  }
  const wrapped = `(async function () {\n${code}\n})()`;
  try {
    return { source: transform(wrapped, { transforms: ['typescript'], disableESTransforms: true }).code };
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    return { error: `SyntaxError: ${message.slice(0, 500)}` };
  }
}

/** Runs one program. `seed` and `now` make a replay take the same path (journal.ts). */
export async function runProgram(
  code: string,
  options: {
    names: ToolNames;
    call: HostCall;
    limits: CodeLimits;
    now: number;
    seed: number;
    clock: () => number;
    wasmModule?: (() => Promise<WebAssembly.Module>) | undefined;
  },
): Promise<ProgramOutcome> {
  const compiled = compileProgram(code);
  if ('error' in compiled) return { ok: false, error: compiled.error, logs: [] };
  const engine = await newEngine(options.limits.memoryBytes, options.wasmModule);
  return runInSandbox(engine, compiled.source, options);
}

/** A run's seed from its id: the same run id, the same random numbers. */
export function seedOf(run: string): number {
  let h = 2166136261;
  for (let i = 0; i < run.length; i++) {
    h ^= run.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

/** The run's answer: its return value and logs, as structured content and as text. */
export function runResult(value: unknown, logs: LogLine[]): Result {
  const structured = { result: value ?? null, logs };
  return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
}

/** A run that ended early: what ended it, the limit's name when one did, and the calls it made. */
export function runFailure(
  error: string,
  limit: string | undefined,
  calls: readonly string[],
  logs: LogLine[],
): Result {
  const what = limit && limit !== 'stack' ? `${error} (gateway.code.${limit})` : error;
  const made =
    calls.length === 0 ? 'It made no tool call.' : `Tool calls made before it ended: ${calls.join(', ')}.`;
  return {
    content: [{ type: 'text', text: `The program did not finish: ${what}. ${made}` }],
    structuredContent: { error: what, ...(limit ? { limit } : {}), calls: [...calls], logs },
    isError: true,
  };
}
