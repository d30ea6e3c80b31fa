import type { Catalog, CatalogEntry } from '../aggregate/catalog.js';
import { lockedArguments } from '../aggregate/overrides.js';
import type { Config } from '../config/types.js';
import {
  type ArgsCheck,
  type ArgsValidator,
  compileArgsValidator,
  compileOutputValidator,
} from '../guards/args.js';
import { quarantineDescription } from '../guards/drift/verdict.js';
import { type CappedResult, errorInstead, type ResultFraming, resultCap } from '../guards/result-cap.js';
import { contentsCap, promptResultCap } from '../guards/surface-caps.js';
import { utf8Bytes } from '../guards/text.js';
import type { Logger } from '../lib/log.js';
import { type ParamHeader, paramHeaderPlan } from '../protocol/headers.js';

type Result = Record<string, unknown>;
type Validator = ((args: unknown) => ArgsCheck) | null;

/**
 * The per-call guards of tools/call, wired from the pure policies in src/guards: quarantine
 * refusal, argument validation (validators compiled once per catalog snapshot), and the result cap
 * (built once per server).
 */
export class CallGuards {
  private validators = new WeakMap<Catalog, Map<string, Validator>>();
  /** Output-schema checks, per catalog entry (entries are rebuilt with each catalog snapshot). */
  private outputValidators = new WeakMap<CatalogEntry, Validator>();
  private paramPlans = new WeakMap<CatalogEntry, readonly ParamHeader[]>();
  private caps = new Map<string, { cap: ReturnType<typeof resultCap>; max: number }>();
  private surfaceCaps = new Map<
    string,
    { prompt: ReturnType<typeof promptResultCap>; contents: ReturnType<typeof contentsCap>; max: number }
  >();

  constructor(
    private config: Config,
    private readonly log: Logger,
  ) {}

  /** A reload's config: the caps are built again from it, per server, as calls need them. */
  configure(config: Config): void {
    this.config = config;
    this.caps.clear();
    this.surfaceCaps.clear();
  }

  /**
   * A refusal for a tool that is listed but must not run (drift quarantine), as an isError result;
   * undefined when the call may proceed.
   */
  refuse(entry: CatalogEntry): Result | undefined {
    if (!entry.quarantined) return undefined;
    return { content: [{ type: 'text', text: quarantineDescription(entry.server) }], isError: true };
  }

  /**
   * Validates arguments against the tool's full input schema. Returns an isError result listing
   * the problems (with the schema, so a model can correct itself), or undefined when valid.
   */
  checkArguments(catalog: Catalog, entry: CatalogEntry, args: Record<string, unknown>): Result | undefined {
    // Fixed and hidden arguments are the operator's (#54): a client that sends one is told so.
    const locked = entry.args ? lockedArguments(entry.args, args) : [];
    if (locked.length > 0) {
      const text = [
        `Invalid arguments for tool ${entry.name}; it was not called:`,
        ...locked.map((name) => `- ${JSON.stringify(name)} is set by the gateway and must not be sent`),
        '',
        `Full input schema: ${JSON.stringify(entry.full.inputSchema)}`,
      ].join('\n');
      return { content: [{ type: 'text', text }], isError: true };
    }
    let perCatalog = this.validators.get(catalog);
    if (!perCatalog) {
      perCatalog = new Map();
      this.validators.set(catalog, perCatalog);
    }
    let validate = perCatalog.get(entry.name);
    if (validate === undefined) {
      validate = this.compiled(compileArgsValidator(entry.full.inputSchema), entry, 'guard.args_unvalidated');
      perCatalog.set(entry.name, validate);
    }
    if (validate === null) return undefined;
    const check = validate(args);
    if (check.valid) return undefined;
    const text = [
      `Invalid arguments for tool ${entry.name}; it was not called:`,
      ...check.problems.map((p) => `- ${p}`),
      '',
      `Full input schema: ${JSON.stringify(entry.full.inputSchema)}`,
    ].join('\n');
    return { content: [{ type: 'text', text }], isError: true };
  }

  /**
   * The arguments a tool mirrors into `Mcp-Param-*` headers (its exposed schema's `x-mcp-header`
   * annotations, protocol/headers.ts), read once per catalog entry; none for most tools.
   */
  paramHeaders(entry: CatalogEntry): readonly ParamHeader[] {
    let plan = this.paramPlans.get(entry);
    if (!plan) {
      const read = paramHeaderPlan(entry.tool.inputSchema);
      plan = read.ok ? read.params : [];
      this.paramPlans.set(entry, plan);
    }
    return plan;
  }

  /**
   * The same cap for a `prompts/get` or `resources/read` answer of `server` (its maxResultBytes),
   * logged like a tool result's.
   */
  capSurface(server: string, kind: 'prompt' | 'contents', what: string, result: Result): Result {
    let held = this.surfaceCaps.get(server);
    if (!held) {
      const max =
        this.config.servers.find((s) => s.name === server)?.maxResultBytes ??
        this.config.gateway.maxResultBytes;
      held = { prompt: promptResultCap(max), contents: contentsCap(max), max };
      this.surfaceCaps.set(server, held);
    }
    const capped = (kind === 'prompt' ? held.prompt : held.contents)(result);
    if (capped.truncated) {
      this.log.info('guard.result_truncated', {
        server,
        [kind === 'prompt' ? 'prompt' : 'uri']: what.slice(0, 256),
        bytes: capped.originalBytes,
        max: held.max,
      });
    }
    return capped.result;
  }

  /**
   * Applies the server's result cap (E1) and, for a tool with an output schema, checks the
   * answer against it; returns the result serialized. Results that fit pass through untouched and
   * are serialized once (the cap's measurement is reused). A tool without an output schema costs
   * nothing more.
   *
   * For a tool with an output schema, a non-error answer a conforming client must reject (MCP
   * server/tools, "Output Schema": results MUST conform; SDK clients throw) becomes an isError
   * result instead, keeping `_meta` and `resultType`: structured content that is missing or does
   * not match the schema (its problems listed, the content not relayed), or that the cap had to
   * drop (its size and the cap named). An upstream isError result is relayed unchecked.
   */
  capResult(entry: CatalogEntry, result: Result): string {
    return this.capped(entry, result, undefined);
  }

  /**
   * `capResult` as the JSON-RPC response to request `id`: the same text as
   * `rawResultMessage(id, capResult(entry, result))`, serialized in one piece, so a big result is
   * never copied into the message after being serialized. `result` is as the client gets it
   * (dressed for its era, server/mcp/exchange.ts): the cap counts the dress.
   */
  resultMessage(entry: CatalogEntry, result: Result, id: string | number): string {
    return this.capped(entry, result, responseFraming(id));
  }

  private held(server: string): { cap: ReturnType<typeof resultCap>; max: number } {
    let held = this.caps.get(server);
    if (!held) {
      const config = this.config.servers.find((s) => s.name === server);
      const max = config?.maxResultBytes ?? this.config.gateway.maxResultBytes;
      held = { cap: resultCap(max), max };
      this.caps.set(server, held);
    }
    return held;
  }

  private capped(entry: CatalogEntry, result: Result, framing: ResultFraming | undefined): string {
    const { cap, max } = this.held(entry.server);
    const capped = cap(result, framing);
    if (capped.truncated) {
      this.log.info('guard.result_truncated', {
        server: entry.server,
        tool: entry.name,
        bytes: capped.originalBytes,
        max,
      });
    }
    const outputSchema = entry.full.outputSchema;
    if (outputSchema !== undefined && result.isError !== true) {
      const instead = this.checkOutput(entry, outputSchema, result, capped, max);
      if (instead) {
        const fitted = cap(instead, framing);
        return fitted.json ?? serialize(fitted.result, framing);
      }
    }
    return capped.json ?? serialize(capped.result, framing);
  }

  /**
   * The isError result to send instead of a non-error answer of a tool with an output schema, or
   * undefined when the answer (as capped) may go out.
   */
  private checkOutput(
    entry: CatalogEntry,
    outputSchema: unknown,
    result: Result,
    capped: CappedResult,
    max: number,
  ): Result | undefined {
    const structured = capped.result.structuredContent;
    if (structured === undefined && result.structuredContent !== undefined) {
      // The cap dropped it: the answer was fine, just too large to relay whole.
      const text = [
        `The answer of tool ${entry.name} was too large to relay: ${capped.originalBytes} bytes, over the`,
        `result size cap of ${max} bytes. Its structured content, which the tool's output schema`,
        'requires, cannot be cut to fit. Ask for less: a narrower query, fewer items or a smaller page.',
      ].join(' ');
      return errorInstead(capped.result, text);
    }
    let problems: string[];
    if (structured === undefined) {
      problems = ['(root): structuredContent is missing'];
    } else {
      const validate = this.outputValidator(entry, outputSchema);
      if (validate === null) return undefined;
      const check = validate(structured);
      if (check.valid) return undefined;
      problems = check.problems;
    }
    this.log.info('guard.output_invalid', {
      server: entry.server,
      tool: entry.name,
      problems: problems.length,
    });
    const text = [
      `The answer of tool ${entry.name} did not match its declared output schema, so it was not relayed:`,
      ...problems.map((p) => `- ${p}`),
    ].join('\n');
    return errorInstead(capped.result, text);
  }

  /**
   * Whether structured content matches the entry's output schema (a schema the validator cannot
   * compile counts as matching, as in `capResult`). For a result a guardrail redacted (#51).
   */
  outputValid(entry: CatalogEntry, structured: unknown): boolean {
    const outputSchema = entry.full.outputSchema;
    if (outputSchema === undefined) return true;
    if (structured === undefined) return false;
    const validate = this.outputValidator(entry, outputSchema);
    return validate === null || validate(structured).valid;
  }

  /** The entry's compiled output-schema check; null (logged once) when it cannot be compiled. */
  private outputValidator(entry: CatalogEntry, outputSchema: unknown): Validator {
    let validate = this.outputValidators.get(entry);
    if (validate !== undefined) return validate;
    validate = this.compiled(compileOutputValidator(outputSchema), entry, 'guard.output_unvalidated');
    this.outputValidators.set(entry, validate);
    return validate;
  }

  /** A compiled check, or null for a schema the validator cannot handle (logged: it never blocks). */
  private compiled(compiled: ArgsValidator, entry: CatalogEntry, event: string): Validator {
    if (compiled.ok) return compiled.validate;
    this.log.warn(event, {
      rule: 'schema-unsupported',
      server: entry.server,
      tool: entry.name,
      reason: compiled.reason,
    });
    return null;
  }
}

function serialize(result: Result, framing: ResultFraming | undefined): string {
  return framing ? JSON.stringify(framing.wrap(result)) : JSON.stringify(result);
}

/**
 * A result inside its JSON-RPC response: `{"jsonrpc":"2.0","id":…,"result":…}`, exactly what
 * `rawResultMessage` makes of the result's JSON; the framing is the head and the closing `}`.
 */
function responseFraming(id: string | number): ResultFraming {
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`;
  return {
    wrap: (result) => ({ jsonrpc: '2.0', id, result }),
    chars: head.length + 1,
    bytes: utf8Bytes(head) + 1,
  };
}
