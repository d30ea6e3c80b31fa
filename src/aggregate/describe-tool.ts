import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { DESCRIBE_TOOL_NAME } from '../guards/disclosure.js';

export const DESCRIBE_MAX_NAMES = 5;

/** The meta-tool that returns full schemas the disclosure budget shortened in tools/list. */
export function describeToolDefinition(): Tool {
  return {
    name: DESCRIBE_TOOL_NAME,
    title: 'Describe tool',
    description:
      'Returns the full description and input/output schemas of tools whose listing was shortened to save context. ' +
      `Pass {"name": "<tool>"} or {"names": ["<tool>", ...]} (at most ${DESCRIBE_MAX_NAMES}).`,
    inputSchema: {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'One exposed tool name.' },
        names: {
          type: 'array',
          items: { type: 'string' },
          minItems: 1,
          maxItems: DESCRIBE_MAX_NAMES,
          description: 'Several exposed tool names.',
        },
      },
    },
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  };
}
