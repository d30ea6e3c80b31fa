import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { ManifoldError } from '../../src/errors.js';
import type { VerifiedListing } from '../../src/guards/drift/verdict.js';
import type { Era } from '../../src/protocol/versions.js';
import type { Listing } from '../../src/upstream/listing.js';
import type { DiscoverInfo } from '../../src/upstream/modern/session.js';
import {
  declaresTools,
  type ItemsPage,
  type SessionCallOptions,
  type UpstreamSession,
} from '../../src/upstream/session.js';

type Result = Record<string, unknown>;

/**
 * A session over an upstream object's snapshot (#15): the listing and verdict are published, so
 * nothing is listed here; requests go to `calls` (a direct modern session, or a legacy one).
 */
export class PublishedSession implements UpstreamSession {
  private tools: readonly Tool[] = [];
  /** The session that last heard `tools` (its `x-mcp-header` plans are built once, not per call). */
  private noted: UpstreamSession | undefined;

  constructor(
    readonly era: Era,
    private readonly info: DiscoverInfo,
    readonly published: { listing: Listing; verified: VerifiedListing },
    private readonly calls: () => Promise<UpstreamSession>,
  ) {}

  get protocolVersion(): string {
    return this.info.version;
  }

  get hasTools(): boolean {
    return declaresTools(this.info.capabilities);
  }

  get capabilities(): Record<string, unknown> {
    return this.info.capabilities;
  }

  async listPage(): Promise<ItemsPage> {
    throw new ManifoldError('ERR_UPSTREAM_UNAVAILABLE', 'a published session is not listed');
  }

  async request(method: string, params: Result, options: SessionCallOptions): Promise<Result> {
    const session = await this.calls();
    if (this.noted !== session) {
      session.noteTools(this.tools);
      this.noted = session;
    }
    return session.request(method, params, options);
  }

  noteTools(tools: readonly Tool[]): void {
    this.tools = tools;
    this.noted = undefined;
  }

  /** Resource subscriptions live on a listen stream, which the tenant object holds (not this). */
  async subscribe(): Promise<void> {}

  async unsubscribe(): Promise<void> {}

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}
