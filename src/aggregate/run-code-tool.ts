/**
 * Code mode's listing (#50): `manifold__run_code` with `manifold__search_tools` and
 * `manifold__describe_tool` (and the pinned tools). The run tool's description says how to write
 * a program in a few lines and, while the caller's view fits `catalog.maxTools`, carries the
 * TypeScript declarations of every tool it sees (src/code/declarations.ts); past that, a search
 * answers each hit's declaration.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { toolDeclaration, toolsDeclaration } from '../code/declarations.js';
import { DESCRIBE_TOOL_NAME } from '../guards/disclosure.js';
import type { CatalogEntry } from './catalog.js';
import { SEARCH_TOOL_NAME, searchMetaEntries } from './search.js';

export const RUN_CODE_NAME = 'manifold__run_code';

export function runCodeDefinition(declarations: string | undefined): Tool {
  const how = [
    'Runs a short JavaScript or TypeScript program in a sandbox and returns only what it returns.',
    'Write the body of an async function: call tools with `await tools.name(args)` (or `tools["name"](args)`),',
    "pass data between calls, and `return` a JSON value. A call returns the tool's structured content when it",
    'declares an output schema, else its result; a tool error throws an Error. console.log is captured.',
    'No network, files or timers: `tools` is the only way out. Every call is checked like a direct one.',
  ].join(' ');
  const where = declarations
    ? `The tools:\n${declarations}`
    : `Find tools with ${SEARCH_TOOL_NAME} (each hit carries its TypeScript declaration), and full schemas with ${DESCRIBE_TOOL_NAME}.`;
  return {
    name: RUN_CODE_NAME,
    title: 'Run code against the tools',
    description: `${how}\n${where}`,
    inputSchema: {
      type: 'object',
      properties: {
        code: {
          type: 'string',
          description:
            'The body of an async function, e.g. const g = await tools.memory__read_graph(); return g.entities.length;',
        },
      },
      required: ['code'],
    },
  };
}

/**
 * The meta entries of a code-mode view: the run tool (when the caller may use it), search and
 * describe. `declared`: the tools whose declarations the run tool's description carries.
 */
export function codeMetaEntries(
  searchLimit: number,
  runCode: boolean,
  declared: readonly CatalogEntry[] | undefined,
): CatalogEntry[] {
  const others = searchMetaEntries(searchLimit).filter((m) => m.meta !== 'call_tool');
  if (!runCode) return others;
  const tool = runCodeDefinition(declared ? toolsDeclaration(declared.map((e) => e.tool)) : undefined);
  const run: CatalogEntry = {
    name: RUN_CODE_NAME,
    server: 'manifold',
    original: RUN_CODE_NAME,
    tool,
    full: tool,
    deferred: false,
    meta: 'run_code',
    risk: 'undeclared',
    approval: 'allow',
  };
  return [run, ...others];
}

/**
 * What a code-mode search answers for one tool: its name and declaration (whose doc comment is
 * its description), and the flags a search hit carries; the input schema is in the declaration.
 */
export function codeHit(e: CatalogEntry): Record<string, unknown> {
  return {
    name: e.name,
    ...(e.tool.title !== undefined ? { title: e.tool.title } : {}),
    declaration: toolDeclaration(e.tool),
    ...(e.deferred ? { schemaShortened: true } : {}),
    ...(e.quarantined ? { quarantined: true } : {}),
  };
}
