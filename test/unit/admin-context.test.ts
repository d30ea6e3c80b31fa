import { describe, expect, it } from 'vitest';
import { anonymousPrincipal } from '../../src/auth/principal.js';
import { ManifoldError } from '../../src/errors.js';
import type { Gateway } from '../../src/gateway/gateway.js';
import { adminContext } from '../../src/server/http/admin/context.js';

/** #52: who may use the admin API, decided before any route runs. */
const gatewayOn = (host: string, auth: boolean) =>
  ({ config: { gateway: { host, auth: auth ? {} : undefined } } }) as unknown as Gateway;
const request = { req: { raw: new Request('http://127.0.0.1/admin/servers') } } as never;
const refusal = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return e instanceof ManifoldError ? e.code : 'other';
  }
  return undefined;
};

describe('the admin API admits (#52)', () => {
  it('I4: the anonymous operator of a loopback gateway without auth', async () => {
    const ctx = adminContext(gatewayOn('127.0.0.1', false), async () => anonymousPrincipal);
    expect(await ctx.admin(request)).toBe(anonymousPrincipal);
  });

  it('I4: nobody on a gateway bound elsewhere without auth, where anyone reaching it would be an admin', async () => {
    const ctx = adminContext(gatewayOn('0.0.0.0', false), async () => anonymousPrincipal);
    expect(await refusal(ctx.admin(request))).toBe('ERR_FORBIDDEN');
  });

  it('I4: with auth, only a principal holding manifold:admin', async () => {
    const tenant = { ...anonymousPrincipal, admin: false, subject: 'acme' };
    expect(await refusal(adminContext(gatewayOn('0.0.0.0', true), async () => tenant).admin(request))).toBe(
      'ERR_FORBIDDEN',
    );
    const ops = { ...anonymousPrincipal, subject: 'ops' };
    expect(await adminContext(gatewayOn('0.0.0.0', true), async () => ops).admin(request)).toBe(ops);
  });
});
