/**
 * The page where a caller gives their own key for a `user-key` server (#52): `GET
 * /keys/<server>?t=...` shows a form, and its POST stores the key, sealed, for the caller the
 * link was made for (upstream/user-key.ts). The link is the caller's URL elicitation (or the text
 * of an isError result); it is sealed, names the server and the caller, and expires in minutes.
 * The key is never shown again, not even on this page: the form field is a password field and the
 * answer says only that it was saved. No script; every value escaped (hono/html).
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { html } from 'hono/html';
import type { Gateway } from '../../gateway/gateway.js';
import { MAX_KEY_LENGTH, UserKeyAuth } from '../../upstream/user-key.js';
import { readBodyCapped } from './guards.js';

const HEADERS: Record<string, string> = {
  'content-security-policy': [
    "default-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function mountUserKeyPage(app: Hono, gateway: Gateway, guard: MiddlewareHandler): void {
  app.use('/keys/*', guard);
  const authOf = (c: Context) => {
    const auth = gateway.upstreamAuth.get(c.req.param('server') ?? '');
    return auth instanceof UserKeyAuth ? auth : undefined;
  };
  const page = (c: Context, status: 200 | 400 | 404, body: ReturnType<typeof html>) =>
    c.html(
      html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Manifold: your key</title></head><body>${body}</body></html>`,
      status,
      HEADERS,
    );
  const invalid = (c: Context) =>
    page(
      c,
      404,
      html`<h1>This link is not valid</h1><p>It was altered or has expired: call the tool again for a new one.</p>`,
    );

  app.get('/keys/:server', async (c) => {
    const auth = authOf(c);
    const token = c.req.query('t');
    if (!auth || !(await auth.openLink(token))) return invalid(c);
    return page(
      c,
      200,
      html`<h1>Your key for ${auth.server}</h1>
<p>The gateway sends it to ${auth.server} with your calls, and to nothing else. It is stored encrypted and never shown again.</p>
<form method="post" action="/keys/${encodeURIComponent(auth.server)}"><input type="hidden" name="t" value="${token}">
<label>Key <input type="password" name="key" autocomplete="off" required></label> <button type="submit">Save</button></form>`,
    );
  });

  app.post('/keys/:server', async (c) => {
    const auth = authOf(c);
    if (!auth) return invalid(c);
    let form: URLSearchParams;
    try {
      form = new URLSearchParams(await readBodyCapped(c.req.raw, MAX_KEY_LENGTH * 2));
    } catch {
      return page(c, 400, html`<h1>The form could not be read</h1>`);
    }
    const subject = await auth.openLink(form.get('t'));
    if (!subject) return invalid(c);
    const key = (form.get('key') ?? '').trim();
    if (key === '' || key.length > MAX_KEY_LENGTH || /[\r\n\0]/.test(key)) {
      return page(c, 400, html`<h1>That is not a key</h1><p>Paste the key on one line, and try again.</p>`);
    }
    await auth.saveKey(subject, key);
    gateway.log.info('user_key.saved', { server: auth.server });
    return page(c, 200, html`<h1>Saved</h1><p>Go back to your client and call the tool again.</p>`);
  });
}
