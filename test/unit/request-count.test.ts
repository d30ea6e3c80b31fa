import { describe, expect, it } from 'vitest';
import { RequestCount } from '../../deploy/workers/request-count.js';

// A Durable Object's request counter (#15 layout tests): by path, and bounded, since the paths of
// forwarded requests come from clients.
const get = (path: string) => new Request(`https://manifold.internal${path}`);

async function read(counts: RequestCount): Promise<{ requests: number; paths: Record<string, number> }> {
  const res = counts.count(get('/__manifold/requests'));
  if (!res) throw new Error('the read was counted');
  return (await res.json()) as { requests: number; paths: Record<string, number> };
}

describe('RequestCount', () => {
  it('counts by path, not the read itself, and bounds the distinct paths', async () => {
    const counts = new RequestCount('/__manifold/requests');
    expect(counts.count(get('/__manifold/snapshot'))).toBeUndefined();
    counts.count(get('/__manifold/snapshot'));
    counts.count(get('/mcp'));
    expect(await read(counts)).toEqual({ requests: 3, paths: { '/__manifold/snapshot': 2, '/mcp': 1 } });
    for (let i = 0; i < 200; i++) counts.count(get(`/mcp/p${i}`));
    counts.count(get('/mcp'));
    const { requests, paths } = await read(counts);
    expect(requests).toBe(204);
    expect(Object.keys(paths).length).toBe(65);
    expect(paths['/mcp']).toBe(2);
    expect(paths['(other)']).toBe(200 - 62);
    expect(Object.values(paths).reduce((a, b) => a + b, 0)).toBe(204);
  });
});
