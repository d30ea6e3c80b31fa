/**
 * `spotlight` (#51): upstream text returned to the model is data, not instructions. Each text is
 * wrapped in delimiters that carry a nonce fresh for every response (so an upstream cannot close
 * the block early by guessing it), and text that reads like an instruction to the model is
 * flagged. There is no maintained pattern set for prompt injection; the few phrasings below are
 * written here, and they flag, they never prove (a client still treats the block as data).
 */
import type { Detector, Finding } from './scan.js';

const INSTRUCTION_LIKE: readonly RegExp[] = [
  /\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|preceding|system)\s+(?:instructions?|prompts?|messages?|rules|context)/i,
  /\byou\s+are\s+now\s+(?:a|an|in|the)\b/i,
  /\b(?:new|updated|real|actual)\s+(?:system\s+)?instructions?\s*:/i,
  /<\|?(?:im_start|im_end|system|endoftext)\|?>|\[\/?INST\]|<\/?(?:system|instructions?|important)>/i,
  /\b(?:do\s+not|don't)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+(?:this\s+)?to)\s+the\s+user\b/i,
  /\b(?:reveal|print|output|repeat)\s+(?:your|the)\s+(?:system\s+prompt|instructions|hidden\s+prompt)/i,
];

/** Flags instruction-like text; each finding is typed `instruction`. */
export const detectInstructions: Detector = (text) => {
  const found: Finding[] = [];
  for (const re of INSTRUCTION_LIKE) {
    const m = re.exec(text);
    if (m) found.push({ type: 'instruction', start: m.index, end: m.index + m[0].length });
  }
  return found;
};

/** A nonce for one response's delimiters. */
export function spotlightNonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(9));
  return btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, 'x');
}

/** The text inside the marked delimiters of one response. */
export function spotlightWrap(text: string, nonce: string): string {
  return `<<untrusted-data ${nonce}>>\n${text}\n<</untrusted-data ${nonce}>>`;
}
