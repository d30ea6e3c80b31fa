/**
 * Where an object's request counts are read (the Worker's internal prefix, boot.ts `INTERNAL`).
 * Its own module, free of Workers types, so that Node's tests can load it.
 */
export const COUNTS_PATH = '/__manifold/requests';

/** Distinct paths an object counts one by one (RequestCount). */
const MAX_COUNTED_PATHS = 64;

/**
 * Counts the requests an object receives (in memory, per object instance), in all and by path,
 * so the layout tests can show which requests touched no object at all. `GET
 * /__manifold/requests` reads it and is not counted.
 */
export class RequestCount {
  private n = 0;
  private readonly paths: Record<string, number> = Object.create(null);
  count(request: Request): Response | undefined {
    const path = new URL(request.url).pathname;
    if (path === COUNTS_PATH) {
      return new Response(JSON.stringify({ requests: this.n, paths: this.paths }), {
        headers: { 'content-type': 'application/json' },
      });
    }
    this.n++;
    // Bounded: paths can come from clients (forwarded requests); past the bound, one bucket.
    const key = path in this.paths || Object.keys(this.paths).length < MAX_COUNTED_PATHS ? path : '(other)';
    this.paths[key] = (this.paths[key] ?? 0) + 1;
    return undefined;
  }
}
