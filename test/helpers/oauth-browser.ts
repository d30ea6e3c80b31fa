/**
 * The user's browser for the upstream-OAuth tests (#19): opens an authorization URL, follows the
 * authorization server's redirects with a cookie jar (oidc-provider's interaction and resume cookies),
 * through test/fixtures/oauth-as.mjs's auto-approving interaction, until a `Location` under the
 * gateway's redirect URI, and then delivers that callback to the gateway, as a browser would.
 * No page is rendered: the AS fixture answers its login and consent prompts itself.
 */

export interface BrowseOptions {
  /** Where the flow ends: the first redirect whose URL starts with this is the callback (the gateway's redirect URI). */
  callback: string;
  /** The account the AS fixture signs in (its `x-test-user` header); default alice. */
  user?: string;
  /** Deliver the callback to the gateway (default true); false returns it unopened. */
  deliver?: boolean;
  /** At most this many redirects before giving up (default 15). */
  maxHops?: number;
}

export interface BrowseResult {
  /** The callback URL the AS redirected to (code, state, iss...). */
  callbackUrl: URL;
  /** The gateway's answer to the callback, when delivered. */
  status?: number;
  body?: string;
  contentType?: string | null;
  /** The authorization request's query, as the AS saw it. */
  request: URLSearchParams;
}

/** A minimal cookie jar: name=value per origin, enough for oidc-provider's cookies on loopback. */
class Jar {
  private readonly byOrigin = new Map<string, Map<string, string>>();

  take(url: string, response: Response): void {
    const origin = new URL(url).origin;
    const jar = this.byOrigin.get(origin) ?? new Map<string, string>();
    for (const line of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const at = pair.indexOf('=');
      if (at <= 0) continue;
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      // An expired or emptied cookie is a deletion.
      const expired =
        value === '' ||
        attributes.some((a) => {
          const [k = '', v = ''] = a.split('=');
          const key = k.trim().toLowerCase();
          if (key === 'max-age') return Number(v) <= 0;
          return key === 'expires' && Date.parse(v) <= Date.now();
        });
      if (expired) jar.delete(name);
      else jar.set(name, value);
    }
    this.byOrigin.set(origin, jar);
  }

  header(url: string): string {
    const jar = this.byOrigin.get(new URL(url).origin);
    return jar ? [...jar].map(([k, v]) => `${k}=${v}`).join('; ') : '';
  }
}

export async function browse(authorizationUrl: string, options: BrowseOptions): Promise<BrowseResult> {
  const jar = new Jar();
  const request = new URL(authorizationUrl).searchParams;
  const user = options.user ?? 'alice';
  let url = authorizationUrl;
  for (let hop = 0; hop < (options.maxHops ?? 15); hop++) {
    const cookie = jar.header(url);
    const response = await fetch(url, {
      redirect: 'manual',
      headers: { 'x-test-user': user, ...(cookie && { cookie }) },
    });
    jar.take(url, response);
    const location = response.headers.get('location');
    if (!location || response.status < 300 || response.status >= 400) {
      const text = await response.text();
      throw new Error(
        `the authorization server stopped at ${response.status} without a redirect: ${text.slice(0, 300)}`,
      );
    }
    await response.body?.cancel();
    const next = new URL(location, url).href;
    if (next.startsWith(options.callback)) {
      const callbackUrl = new URL(next);
      if (options.deliver === false) return { callbackUrl, request };
      const answer = await fetch(next, { redirect: 'manual' });
      return {
        callbackUrl,
        request,
        status: answer.status,
        body: await answer.text(),
        contentType: answer.headers.get('content-type'),
      };
    }
    url = next;
  }
  throw new Error('too many redirects before the callback');
}
