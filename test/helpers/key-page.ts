import { expect } from 'vitest';

/**
 * Follows a user-key page link (#52) as a person would: opens the page, pastes the key, saves.
 * Resolves with the page's status when it does not open, else the save's; the key never comes
 * back in either answer.
 */
export async function giveKey(link: string, key: string): Promise<number> {
  const page = await fetch(link);
  const body = await page.text();
  if (page.status !== 200) return page.status;
  expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
  expect(body).toContain('type="password"');
  const url = new URL(link);
  const saved = await fetch(new URL(url.pathname, url.origin), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ t: url.searchParams.get('t')!, key }).toString(),
  });
  expect(await saved.text()).not.toContain(key);
  return saved.status;
}
