/**
 * The `pii` detector (#51): e-mail addresses, phone numbers, payment card numbers and IBANs. No
 * maintained validator for these is installed (libphonenumber-js, ibantools and validator.js are
 * not dependencies), so the candidates are found by bounded patterns written here and then
 * checked with the standard check digits: Luhn (ISO/IEC 7812) for cards, mod-97 (ISO 13616) for
 * IBANs. National identifiers are not detected: there is no maintained validator to lean on.
 *
 * @example
 * piiDetector(['card'])('pay with 4111 1111 1111 1111'); // [{ type: 'card', start: 9, end: 28 }]
 */

import type { Detector, Finding } from './scan.js';
import type { PiiType } from './types.js';

// Bounded quantifiers throughout: no input makes these backtrack without limit.
const EMAIL = /[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}\b/g;
const CARD = /\b\d(?:[ -]?\d){12,18}\b/g;
const IBAN = /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b/g;
// International (+ or 00 and a country code) or North American (area code in parentheses).
const PHONE = /(?:\+|\b00)[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){2,6}\b|\(\d{3}\)[ .-]?\d{3}[ .-]\d{4}\b/g;

export function piiDetector(types: readonly PiiType[]): Detector {
  const want = new Set(types);
  return function detectPii(text: string): Finding[] {
    const found: Finding[] = [];
    const taken = (start: number, end: number) => found.some((f) => start < f.end && f.start < end);
    // Cards and IBANs first: their check digits make them the surest; a phone never overlaps one.
    if (want.has('card') && /\d{4}/.test(text)) {
      for (const m of text.matchAll(CARD)) {
        const digits = m[0].replace(/[ -]/g, '');
        if (digits.length >= 13 && digits.length <= 19 && luhn(digits))
          found.push({ type: 'card', start: m.index, end: m.index + m[0].length });
      }
    }
    if (want.has('iban') && /[A-Z]{2}\d{2}/.test(text)) {
      for (const m of text.matchAll(IBAN)) {
        const compact = m[0].replace(/ /g, '');
        if (
          compact.length >= 15 &&
          compact.length <= 34 &&
          mod97(compact) &&
          !taken(m.index, m.index + m[0].length)
        )
          found.push({ type: 'iban', start: m.index, end: m.index + m[0].length });
      }
    }
    if (want.has('email') && text.includes('@')) {
      for (const m of text.matchAll(EMAIL))
        found.push({ type: 'email', start: m.index, end: m.index + m[0].length });
    }
    if (want.has('phone') && (text.includes('+') || text.includes('00') || text.includes('('))) {
      for (const m of text.matchAll(PHONE)) {
        const digits = m[0].replace(/\D/g, '').length;
        const end = m.index + m[0].length;
        if (digits >= 8 && digits <= 15 && !taken(m.index, end))
          found.push({ type: 'phone', start: m.index, end });
      }
    }
    return found;
  };
}

/** The Luhn check (ISO/IEC 7812-1 annex B). */
export function luhn(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/** The IBAN check (ISO 13616-1): the first four characters moved to the end, letters as 10-35, mod 97 is 1. */
export function mod97(iban: string): boolean {
  const moved = iban.slice(4) + iban.slice(0, 4);
  let rest = 0;
  for (const c of moved) {
    const code = c.charCodeAt(0);
    const value = code >= 65 ? code - 55 : code - 48;
    rest = value >= 10 ? (rest * 100 + value) % 97 : (rest * 10 + value) % 97;
  }
  return rest === 1;
}
