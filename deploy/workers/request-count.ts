/** Distinct paths an object counts one by one (RequestCount). */
const MAX_COUNTED_PATHS = 64;

/**
 * Counts the requests an object receives (in memory, per object instance), in all and by path,
 * so the layout tests can show which requests touched no object at all. A GET of `readPath`
 * answers the counts and is not counted. Its own module, free of Workers types, so that Node's
 * tests can load it.
 */
export class RequestCount {
  private n = 0;
  private readonly paths = new Map<string, number>();

  constructor(private readonly readPath: string) {}

  count(request: Request): Response | undefined {
    const path = new URL(request.url).pathname;
    if (path === this.readPath) {
      return new Response(JSON.stringify({ requests: this.n, paths: Object.fromEntries(this.paths) }), {
        headers: { 'content-type': 'application/json' },
      });
    }
    this.n++;
    // Bounded: paths can come from clients (forwarded requests); past the bound, one bucket.
    const key = this.paths.has(path) || this.paths.size < MAX_COUNTED_PATHS ? path : '(other)';
    this.paths.set(key, (this.paths.get(key) ?? 0) + 1);
    return undefined;
  }
}
