import { describe, expect, it } from 'vitest';
import { SPLIT_TEXT_CHARS, SplitMessage } from '../../src/guards/split-result.js';
import { rawResultMessage } from '../../src/protocol/jsonrpc.js';
import { PlainReply, pieces, toResponse } from '../../src/server/mcp/http-in.js';
import { guardsWithCap, toolEntry } from '../helpers/call-guards.js';

// #18: a result with one big text block leaves as a serialized head, the text (escaped a step at
// a time) and a serialized tail. The bytes on the wire must be exactly today's: JSON.stringify of
// the whole message, for any text; a result over the cap is capped exactly as before.

type Result = Record<string, unknown>;
const MiB = 1 << 20;
const STEP = 256 * 1024;

const guards = guardsWithCap;
const entry = toolEntry;

/** `n` characters of `unit` repeated, with `at` placed so that it straddles the first step's end. */
function text(unit: string, n = SPLIT_TEXT_CHARS + 1000, at = ''): string {
  const body = unit.repeat(Math.ceil(n / unit.length)).slice(0, n);
  return at === '' ? body : `${body.slice(0, STEP - 1)}${at}${body.slice(STEP - 1 + at.length)}`;
}

async function wire(body: SplitMessage | string): Promise<Uint8Array> {
  const response = toResponse(new PlainReply(200, body, {}));
  return new Uint8Array(await response.arrayBuffer());
}

const cases: Array<[string, Result]> = [
  ['ASCII text with nothing to escape', { content: [{ type: 'text', text: text('abc def ') }] }],
  [
    'ASCII lines with quotes, backslashes and controls',
    { content: [{ type: 'text', text: text('line "x" \\ \t\u0001\u001f\n') }] },
  ],
  ['non-ASCII text', { content: [{ type: 'text', text: text('wörld \u2028 日本 ') }] }],
  [
    'emoji with a pair across the first step',
    { content: [{ type: 'text', text: text('a😀', undefined, '😀') }] },
  ],
  ['lone surrogates', { content: [{ type: 'text', text: text('x\ud800y\udc00z') }] }],
  [
    'several blocks, an empty one, _meta and other fields around the big one',
    {
      resultType: 'complete',
      content: [
        { type: 'text', text: '' },
        { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        { type: 'text', text: text('big "one"\n'), annotations: { priority: 1 } },
        { type: 'text', text: text('second big, sent as it is ') },
      ],
      isError: false,
      _meta: { 'x/y': 'é"\n' },
    },
  ],
  [
    'a text that holds the gateway split mark',
    {
      content: [
        { type: 'text', text: text('a') },
        { type: 'text', text: '\u0000manifold-split\u0000' },
      ],
    },
  ],
];

describe('CallGuards.resultMessage split around a big text', () => {
  for (const [what, result] of cases) {
    it(`sends exactly JSON.stringify of the whole message: ${what}`, async () => {
      const g = guards(16 * MiB);
      for (const id of [7, 'ïd "q" \u0000']) {
        const expected = rawResultMessage(id, JSON.stringify(result));
        const message = g.resultMessage(entry(), result, id);
        if (!what.includes('mark')) expect(message).toBeInstanceOf(SplitMessage);
        expect(message.length).toBe(expected.length);
        expect(String(message)).toBe(expected);
        expect([...pieces(message)].join('')).toBe(expected);
        expect(Buffer.from(await wire(message)).equals(Buffer.from(expected, 'utf8'))).toBe(true);
      }
    });
  }

  it('is not split when the text is short, and then is what it was', () => {
    const result = { content: [{ type: 'text', text: 'x'.repeat(1000) }] };
    const message = guards(16 * MiB).resultMessage(entry(), result, 1);
    expect(message).toBe(rawResultMessage(1, JSON.stringify(result)));
  });

  const capped: Array<[string, number, Result]> = [
    ['characters over the cap', 64 * 1024, { content: [{ type: 'text', text: text('ab\n') }] }],
    // Fewer characters than the cap, more UTF-8 bytes: only the byte count can tell.
    ['bytes over the cap', 2 * MiB, { content: [{ type: 'text', text: text('é', 1.2 * MiB) }] }],
    ['escapes over the cap', 2 * MiB, { content: [{ type: 'text', text: text('\u0001', 1.1 * MiB) }] }],
  ];
  for (const [what, cap, result] of capped) {
    it(`caps as before: ${what}`, () => {
      const g = guards(cap);
      const message = g.resultMessage(entry(), result, 3);
      expect(typeof message).toBe('string');
      expect(message).toBe(rawResultMessage(3, g.capResult(entry(), result)));
      expect(message).toContain('manifold/truncated');
    });
  }

  it('fits by its bytes when the characters alone cannot tell', () => {
    // 1.1 Mi characters, 2.2 MiB: within a 3 MiB cap only by its UTF-8 size.
    const result = { content: [{ type: 'text', text: text('é', 1.1 * MiB) }] };
    const message = guards(3 * MiB).resultMessage(entry(), result, 3);
    expect(message).toBeInstanceOf(SplitMessage);
    expect(String(message)).toBe(rawResultMessage(3, JSON.stringify(result)));
  });

  it('leaves a tool with an output schema to the whole-message path', () => {
    const result = { content: [{ type: 'text', text: text('a') }], structuredContent: { n: 1 } };
    const e = entry({ type: 'object', properties: { n: { type: 'number' } } });
    const message = guards(16 * MiB).resultMessage(e, result, 3);
    expect(message).toBe(rawResultMessage(3, JSON.stringify(result)));
  });
});
