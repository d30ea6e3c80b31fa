import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { materialize, parseAnswer, RawJsonString, SPLIT_TEXT_CHARS } from '../../src/guards/raw-text.js';
import { SplitMessage } from '../../src/guards/split-result.js';
import { rawResultMessage } from '../../src/protocol/jsonrpc.js';
import { PlainReply, pieces, toResponse } from '../../src/server/mcp/http-in.js';
import { guardsWithCap, toolEntry } from '../helpers/call-guards.js';

// #18: a big text of an upstream's tools/call answer is kept as the JSON it came in and sent on
// as it is. What the client receives must mean exactly what the upstream sent, and be byte for
// byte what the gateway sent before whenever the upstream escaped as JSON.stringify does.

type Result = Record<string, unknown>;
const MiB = 1 << 20;

const guards = guardsWithCap;
const entry = toolEntry;

const big = (unit: string, n = SPLIT_TEXT_CHARS + 1000) =>
  unit.repeat(Math.ceil(n / unit.length)).slice(0, n);
const answer = (result: Result, indent?: number) =>
  JSON.stringify({ jsonrpc: '2.0', id: 'u1', result }, null, indent);

async function wire(body: SplitMessage | string): Promise<string> {
  const response = toResponse(new PlainReply(200, body, {}));
  return Buffer.from(await response.arrayBuffer()).toString('utf8');
}

const cases: Array<[string, Result]> = [
  ['ASCII lines', { content: [{ type: 'text', text: big('line of text\n') }] }],
  ['quotes, backslashes and controls', { content: [{ type: 'text', text: big('say "x" \\ \t\u0001\n') }] }],
  ['JSON inside the text', { content: [{ type: 'text', text: big('{"k":"v","n":[1,2,"\\""]},') }] }],
  ['non-ASCII and a pair', { content: [{ type: 'text', text: big('wörld \u2028 日本 😀 ') }] }],
  ['escaped lone surrogates', { content: [{ type: 'text', text: big('x\ud800y\udc00z') }] }],
  [
    'two big blocks among small ones, _meta around',
    {
      content: [
        { type: 'text', text: 'small' },
        { type: 'text', text: big('first "big"\n'), annotations: { audience: ['user'] } },
        { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        { type: 'text', text: big('second ') },
      ],
      isError: false,
      _meta: { 'x/y': 'é"\n' },
    },
  ],
];

describe('parseAnswer keeps a big content text as its JSON', () => {
  for (const [what, result] of cases) {
    for (const indent of [undefined, 2]) {
      it(`${what}${indent ? ', pretty-printed upstream' : ''}: means what JSON.parse reads, sent unchanged`, async () => {
        const text = answer(result, indent);
        const parsed = parseAnswer(text, true) as { result: Result };
        const blocks = parsed.result.content as { text: unknown }[];
        const bigOnes = (result.content as { text?: string }[]).filter(
          (b) => (b.text?.length ?? 0) >= SPLIT_TEXT_CHARS,
        );
        expect(blocks.filter((b) => b.text instanceof RawJsonString)).toHaveLength(bigOnes.length);
        // Everything that serializes it the ordinary way still reads the same value.
        expect(JSON.stringify(parsed)).toBe(JSON.stringify(JSON.parse(text)));
        expect(materialize(parsed.result)).toEqual(result);
        const g = guards(64 * MiB);
        const message = g.resultMessage(entry(), parsed.result, 7);
        expect(message).toBeInstanceOf(SplitMessage);
        const expected = rawResultMessage(7, JSON.stringify(result));
        const sent = await wire(message);
        // JSON.stringify's escaping upstream: the bytes are exactly what a whole parse sends.
        expect(sent).toBe(expected);
        expect([...pieces(message)].join('')).toBe(expected);
        expect(message.length).toBe(expected.length);
      });
    }
  }

  it('sends an upstream that escapes differently as it wrote it, meaning the same', async () => {
    const value = big('é / "q"\n');
    // \u escapes for non-ASCII and an escaped solidus: valid JSON that JSON.stringify never writes.
    const literal = JSON.stringify(value).slice(1, -1).replace(/é/g, '\\u00e9').replace(/\//g, '\\/');
    const text = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"${literal}"}]}}`;
    const parsed = parseAnswer(text, true) as { result: Result };
    const sent = await wire(guards(64 * MiB).resultMessage(entry(), parsed.result, 9));
    expect(sent).toBe(`{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"${literal}"}]}}`);
    expect(JSON.parse(sent).result.content[0].text).toBe(value);
  });

  it('parses whole anything that is not a tools/call content text, or is small', () => {
    const value = big('abc\n');
    const shapes: Array<[Result, boolean]> = [
      [{ content: [{ type: 'text', text: 'small' }] }, true],
      [{ content: [{ type: 'text', text: value }] }, false],
      [{ content: [{ type: 'resource', resource: { uri: 'x:', text: value } }] }, true],
      [{ content: [{ type: 'text', text: 'ok' }], structuredContent: { text: value } }, true],
      [{ contents: [{ uri: 'x:', text: value }] }, true],
      [{ messages: [{ role: 'user', content: { type: 'text', text: value } }] }, true],
      // A block that is not a text block, with a text field.
      [{ content: [{ type: 'note', text: value }] }, true],
    ];
    for (const [result, toolsCall] of shapes) {
      const text = answer(result);
      const parsed = parseAnswer(text, toolsCall);
      expect(parsed).toEqual(JSON.parse(text));
      expect(JSON.stringify(parsed)).not.toContain('manifold-raw');
    }
  });

  it('cannot be made to move a text by an upstream that writes a mark', () => {
    const value = big('z');
    const forged = '\u0000manifold-raw:00000000-0000-0000-0000-000000000000:0';
    const text = answer({
      content: [
        { type: 'text', text: forged },
        { type: 'text', text: value },
      ],
    });
    const parsed = parseAnswer(text, true) as { result: { content: { text: unknown }[] } };
    expect(parsed.result.content[0]!.text).toBe(forged);
    expect(String(parsed.result.content[1]!.text)).toBe(value);
  });

  it('throws JSON.parse’s error for a big literal that is not JSON', () => {
    const head = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"';
    const pad = 'a'.repeat(SPLIT_TEXT_CHARS);
    for (const bad of ['\u0001', '\\x', '\\u12g4', '\\uzzzz', '\n', '\u001f']) {
      const text = `${head}${pad}${bad}${pad}"}]}}`;
      expect(() => JSON.parse(text)).toThrow(SyntaxError);
      expect(() => parseAnswer(text, true)).toThrow(SyntaxError);
    }
    expect(() => parseAnswer(`${head}${pad}`, true)).toThrow(SyntaxError);
  });

  it('agrees with JSON.parse on generated texts around escapes', () => {
    const pieceArb = fc.constantFrom('a', '"', '\\', '\n', 'é', '😀', '\ud800', '\u0000', '/', ' ', '\u2028');
    fc.assert(
      fc.property(
        fc.array(pieceArb, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 0, max: 3 }),
        (parts, at) => {
          const filler = 'x'.repeat(SPLIT_TEXT_CHARS);
          const value =
            at === 0 ? parts.join('') + filler : filler.slice(0, at * 1000) + parts.join('') + filler;
          const text = answer({
            content: [
              { type: 'text', text: value },
              { type: 'text', text: parts.join('') },
            ],
          });
          const parsed = parseAnswer(text, true) as { result: Result };
          expect((parsed.result.content as { text: unknown }[])[0]!.text).toBeInstanceOf(RawJsonString);
          expect(JSON.stringify(parsed)).toBe(text);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('a raw text on the paths that must read it', () => {
  const result = { content: [{ type: 'text', text: big('ab "c"\n', 2 * SPLIT_TEXT_CHARS) }] };
  const parsed = () => (parseAnswer(answer(result), true) as { result: Result }).result;

  it('is capped exactly as the parsed text was', () => {
    const g = guards(64 * 1024);
    const message = g.resultMessage(entry(), parsed(), 3);
    expect(typeof message).toBe('string');
    expect(message).toBe(rawResultMessage(3, g.capResult(entry(), result)));
    expect(message).toContain('manifold/truncated');
  });

  it('is checked against an output schema as the parsed text was', () => {
    const e = entry({ type: 'object', properties: { n: { type: 'number' } }, required: ['n'] });
    const g = guards(64 * MiB);
    expect(g.resultMessage(e, parsed(), 3)).toBe(g.resultMessage(e, result, 3));
  });
});
