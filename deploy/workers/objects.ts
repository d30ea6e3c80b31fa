/**
 * The Durable Objects of the Workers layout (#15). State is sharded by what owns it:
 *
 * - `ManifoldUpstream`, one per upstream server: that server's baseline, catalog cache and trust
 *   epoch (its own SQLite store), its verification, its connection (the legacy session when the
 *   upstream is legacy, and with it any bridged call waiting on an MRTR answer), its published
 *   snapshot, and its re-trust.
 * - `ManifoldTenant`, one per tenant: legacy clients' sessions and the modern methods that keep
 *   state (listen streams, tasks), over snapshots like an isolate; and the place for the tenant's
 *   rate-limit leases. One object of this class, by its own name, keeps the deployment key.
 * - `ManifoldGateway`, the single object of `MANIFOLD_ROUTE=object` (the layout before #15).
 */
import { DurableObject } from 'cloudflare:workers';
import {
  type AdminStateClient,
  AdminStatePull,
  answerAdminState,
  isAdminStateRequest,
  withSharedState,
} from './admin-state.js';
import { AuditRing, type AuditShipper, auditShipper, isAuditRequest } from './audit.js';
import { ConfigFailure, type Env, INTERNAL, readConfig, SERVER_HEADER, TENANT_HEADER } from './boot.js';
import { durableObjectStore } from './do-store.js';
import { refreshStale } from './fresh.js';
import { answerCredential, objectAuths, observeAuth, remoteAuths, SeenOrigin } from './oauth.js';
import { type SnapshotOpener, snapshotOpener } from './opener.js';
import { buildPlace, deploymentSecret, keptSecret, type Place } from './place.js';
import { RequestCount } from './request-count.js';
import { snapshotTtl, takeSnapshot } from './snapshot.js';
import { answerLease, isLeaseRequest, tenantLimiter } from './tenant-limit.js';

/** Where an object's request counts are read (RequestCount; the layout tests). */
const COUNTS_PATH = `${INTERNAL}requests`;

const refuse = (status: number, error: string) => Response.json({ error }, { status });

/**
 * What the objects share: their request count, the origin their clients use (the callback URL of
 * a login begun here, #19) and one booted place. A boot that failed on I/O (the key object, say)
 * is tried again by the next request; a refusal (a bad config) is kept.
 */
abstract class PlaceObject extends DurableObject<Env> {
  protected booting: Promise<Place | ConfigFailure> | undefined;
  protected readonly counts = new RequestCount(COUNTS_PATH);
  protected readonly origin = new SeenOrigin();
  /** #52: the shared state's object (stored servers, tokens), and this object's refresh of it. */
  protected shared: AdminStateClient | undefined;
  /** Sends the calls this object audited to the deployment's window (audit.ts). */
  protected shipper: AuditShipper | undefined;
  private readonly pull = new AdminStatePull();

  protected abstract boot(): Promise<Place | ConfigFailure>;

  /** The shared state read again when stale, before the request is served; its writes waited for after. */
  protected async serveShared(place: Place, request: Request): Promise<Response> {
    await this.pull.pull(place.gateway, Date.now());
    const response = await place.app.fetch(request);
    if (this.shared) this.ctx.waitUntil(this.shared.settled());
    return this.shipper ? this.shipper.after(response, (p) => this.ctx.waitUntil(p)) : response;
  }

  protected async placed(): Promise<Place | Response> {
    this.booting ??= this.boot().catch((e: unknown) => {
      this.booting = undefined;
      return new ConfigFailure(500, `gateway failed to start: ${e instanceof Error ? e.message : String(e)}`);
    });
    const place = await this.booting;
    return place instanceof ConfigFailure ? place.response() : place;
  }
}

export class ManifoldUpstream extends PlaceObject {
  private server: string | undefined;

  override async fetch(request: Request): Promise<Response> {
    const counted = this.counts.count(request);
    if (counted) return counted;
    // Named by the Worker (the object's id is idFromName of the same name): which server it is.
    const server = request.headers.get(SERVER_HEADER);
    if (!server) return refuse(400, 'an upstream object is reached through the Worker');
    this.server ??= server;
    if (server !== this.server) return refuse(409, 'this object serves another server');
    this.origin.note(request);
    const place = await this.placed();
    if (place instanceof Response) return place;
    if (new URL(request.url).pathname === `${INTERNAL}snapshot`) {
      return Response.json(
        await takeSnapshot(place.gateway, server, snapshotTtl(this.env.MANIFOLD_SNAPSHOT_TTL_MS)),
      );
    }
    // The current token for isolates and tenant objects, and their refusals (#19, oauth.ts).
    const rpc = await answerCredential(request, place.gateway.upstreamAuth, server, this.origin);
    if (rpc) return rpc;
    return this.serveShared(place, request);
  }

  /** The deployment's gateway narrowed to this one server, with this object's storage. */
  protected async boot(): Promise<Place | ConfigFailure> {
    const server = this.server!;
    const booted = readConfig(this.env);
    if (booted instanceof ConfigFailure) return booted;
    const servers = booted.config.servers.filter((s) => s.name === server);
    const config = { ...booted.config, servers };
    const own = durableObjectStore(this.ctx.storage as never);
    // #52: a server added through the admin API is served from its stored entry (its own alone).
    const { store, shared } = withSharedState(this.env.TENANTS, own, server);
    this.shared = shared;
    const place = buildPlace(booted, {
      config,
      store,
      // This server's credentials (#19) live here, in the object's own SQLite.
      upstreamAuth: await objectAuths(booted, config, this.ctx.storage, store, this.origin),
      origin: this.origin,
      secret: await deploymentSecret(this.env, booted.config),
      // A call forwarded here is counted where the isolates count it: in the tenant's object.
      callLimiter: tenantLimiter(this.env.TENANTS, { log: booted.log }),
    });
    place.gateway.tokens.pulled = true;
    if (servers.length === 0) await place.gateway.managed.poll();
    // Not kept as a refusal: a server added later boots this object again at its next request.
    if (!place.gateway.pool.get(server)) throw new Error(`no server named ${server}`);
    this.shipper = auditShipper(place.gateway, this.env.TENANTS);
    void place.gateway.start();
    return place;
  }
}

export class ManifoldTenant extends PlaceObject {
  private opener: SnapshotOpener | undefined;
  /** When a client last asked: the alarm keeps snapshots fresh while its sessions may be open. */
  private lastRequest = 0;
  private armed = false;
  /** Whose object this is (the Worker names it on every request it forwards here). */
  private tenant: string | undefined;
  /** In the shared state's object only (admin-state.ts): its own stores. */
  private adminStore: ReturnType<typeof durableObjectStore> | undefined;
  /** In the audit window's object only (audit.ts). */
  private auditRing: AuditRing | undefined;

  override async fetch(request: Request): Promise<Response> {
    const counted = this.counts.count(request);
    if (counted) return counted;
    if (new URL(request.url).pathname === `${INTERNAL}key`) return keptSecret(this.ctx.storage);
    if (isAdminStateRequest(request)) {
      this.adminStore ??= durableObjectStore(this.ctx.storage as never);
      return answerAdminState(this.adminStore, request);
    }
    if (isAuditRequest(request)) {
      this.auditRing ??= new AuditRing(this.ctx.storage as never);
      return this.auditRing.answer(request);
    }
    // Isolates' and upstream objects' leases of this tenant's rate limit (tenant-limit.ts).
    if (isLeaseRequest(request)) return answerLease(this.ctx.storage as never, request);
    this.tenant ??= request.headers.get(TENANT_HEADER) ?? undefined;
    this.origin.note(request);
    const place = await this.placed();
    if (place instanceof Response) return place;
    this.lastRequest = Date.now();
    await refreshStale(place.gateway, this.opener!, this.lastRequest);
    await this.arm();
    return this.serveShared(place, request);
  }

  /**
   * Legacy sessions' GET streams and modern listen streams must hear of a verified change without
   * a request to pull it: an alarm reads stale snapshots again (announcing what changed) while a
   * session could still be open, i.e. until `sessionIdleSeconds` after the last request.
   */
  override async alarm(): Promise<void> {
    this.armed = false;
    const place = this.booting && (await this.booting);
    if (!place || place instanceof ConfigFailure) return;
    await refreshStale(place.gateway, this.opener!, Date.now());
    if (Date.now() - this.lastRequest < place.gateway.config.gateway.sessionIdleSeconds * 1000)
      await this.arm();
  }

  private async arm(): Promise<void> {
    if (this.armed) return;
    this.armed = true;
    await this.ctx.storage.setAlarm(Date.now() + snapshotTtl(this.env.MANIFOLD_SNAPSHOT_TTL_MS));
  }

  /** The whole catalog over snapshots, as an isolate has it; legacy calls on sessions of its own. */
  protected async boot(): Promise<Place | ConfigFailure> {
    const booted = readConfig(this.env);
    if (booted instanceof ConfigFailure) return booted;
    const upstreamAuth = remoteAuths(booted, this.env, this.origin);
    this.opener = snapshotOpener(this.env.UPSTREAMS, () => Date.now(), true, observeAuth(upstreamAuth));
    const { store, shared } = withSharedState(
      this.env.TENANTS,
      durableObjectStore(this.ctx.storage as never),
    );
    this.shared = shared;
    const place = buildPlace(booted, {
      store,
      upstreamAuth,
      origin: this.origin,
      secret: await deploymentSecret(this.env, booted.config),
      openSession: this.opener.open,
      // Its own tenant's calls lease from its storage directly, not by a request to itself.
      callLimiter: tenantLimiter(this.env.TENANTS, {
        log: booted.log,
        ...(this.tenant ? { local: { tenant: this.tenant, storage: this.ctx.storage as never } } : {}),
      }),
    });
    place.gateway.tokens.pulled = true;
    this.shipper = auditShipper(place.gateway, this.env.TENANTS);
    await place.gateway.start();
    return place;
  }
}

/**
 * `MANIFOLD_ROUTE=object`: the whole gateway in one object, as before #15 (its upstream
 * connections outlive a request there). Kept as an escape hatch and as the bench's baseline.
 */
export class ManifoldGateway extends PlaceObject {
  override async fetch(request: Request): Promise<Response> {
    const counted = this.counts.count(request);
    if (counted) return counted;
    this.origin.note(request);
    const place = await this.placed();
    if (place instanceof Response) return place;
    return place.app.fetch(request);
  }

  protected async boot(): Promise<Place | ConfigFailure> {
    const booted = readConfig(this.env);
    if (booted instanceof ConfigFailure) return booted;
    const { cursorSecret } = booted.config.gateway;
    const store = durableObjectStore(this.ctx.storage as never);
    const place = buildPlace(booted, {
      store,
      upstreamAuth: await objectAuths(booted, booted.config, this.ctx.storage, store, this.origin),
      origin: this.origin,
      ...(cursorSecret ? { secret: new TextEncoder().encode(cursorSecret) } : {}),
    });
    void place.gateway.start();
    return place;
  }
}
