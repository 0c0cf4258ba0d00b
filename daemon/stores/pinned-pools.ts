// Upstream connections pinned to the checked address (SPEC §6.2): the
// socket goes to the address that was classified, and only to it — the
// connector's lookup answers with that address and nothing else, so no
// second resolution can happen between check and connect. TLS SNI,
// certificate verification and Host keep the name. Connections are pooled
// per (credential, requester, origin, checked address): no two credentials
// ever share a connection, and a new address never reuses an old pool.
//
// The requester is the agent-socket peer's process instance (for the proxy
// front door, the `postern run`), or the daemon itself for its own token
// requests. An upstream that writes bytes after a complete response (a
// wrong Content-Length, a forged response a moment later) makes HTTP/1.1
// attribute them to the next request on that connection, and every later
// answer on it to the request after its own. Shared between requesters,
// that put one agent's answers (what a human approved for it alone) in
// another's hands; per requester, a broken upstream can only confuse the
// answers of the process that keeps using it.
import type { buildConnector, Pool } from 'undici';

// undici is loaded with the first pool, not with the daemon: it costs
// ≈80 ms of a start, and a daemon may serve no HTTP request before it stops.
let undici: typeof import('undici') | null = null;
function loadUndici(): typeof import('undici') {
  undici ??= require('undici') as typeof import('undici');
  return undici;
}
import { guardParserEnd } from './parser-end-guard';
import { rootCertificates, createSecureContext, SecureContext } from 'node:tls';
import type { LookupAddress } from 'node:dns';

export interface PinKey {
  credential: string;
  requester: string; // the process instance key, or DAEMON_REQUESTER
  origin: string; // scheme://host:port as the request names it
  address: string;
  family: 4 | 6;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

// A lookup that can only ever answer the checked address. Node's
// autoSelectFamily asks with `all: true` and expects an array. The answer is
// given on a later tick, as a real lookup's is: answered synchronously, a
// connect that fails at once (ENETUNREACH on an offline host) is emitted
// before undici has attached its error handler, and the unhandled 'error'
// ends the process.
export function pinnedLookup(address: string, family: 4 | 6) {
  return (_hostname: string, options: { all?: boolean } | number | undefined, callback: LookupCallback): void => {
    const all = typeof options === 'object' && options !== null && options.all === true;
    process.nextTick(() => {
      if (all) callback(null, [{ address, family }]);
      else callback(null, address, family);
    });
  };
}

// Node's bundled roots plus ca_file: never NODE_EXTRA_CA_CERTS or
// SSL_CERT_FILE, which are ignored (passing `ca` replaces the default store).
export function caList(caFile: Buffer | null): string[] {
  const list = [...rootCertificates];
  if (caFile) list.push(caFile.toString('utf8'));
  return list;
}

// The requester of the daemon's own requests (tokens fetched for a
// computed credential): no process instance key has this form.
export const DAEMON_REQUESTER = 'postern-daemon';

// Pools kept at most; beyond it the least recently used one is closed (its
// idle connections go; a request still on it finishes first).
export const MAX_POOLS = 256;
// How long a retired pool's requests may run before it is destroyed.
const RETIRE_GRACE_MS = 10 * 60 * 1000;

// Each connection made guarded against undici's end-while-paused
// assertion (parser-end-guard.ts).
function guardedConnector(connect: buildConnector.connector): buildConnector.connector {
  return (options, callback) =>
    connect(options, (err, socket) => {
      if (socket) guardParserEnd(socket);
      callback(err as never, socket as never);
    });
}

// Closed once their requests finish; destroyed after RETIRE_GRACE_MS at
// the latest (close() may never settle after a failed TLS connect).
function retire(pools: Pool[]): void {
  for (const pool of pools) {
    const force = setTimeout(() => void pool.destroy().catch(() => undefined), RETIRE_GRACE_MS);
    force.unref();
    pool.close().then(
      () => clearTimeout(force),
      () => undefined,
    );
  }
}

export class PinnedPools {
  // Map order is use order: the first entry is the least recently used.
  private pools = new Map<string, { credential: string; pool: Pool }>();
  // Parsing Node's ~150 roots costs milliseconds: one context serves every
  // connection until the CA file changes.
  private context: { caFile: Buffer | null; ctx: SecureContext } | null = null;

  // `caFile` is asked for each new pool, so a CA file approved later applies.
  constructor(
    private readonly caFile: () => Buffer | null,
    private readonly maxConnectionsPerPool = 64,
  ) {}

  private secureContext(): SecureContext {
    const file = this.caFile();
    const same =
      this.context &&
      (this.context.caFile === file ||
        (this.context.caFile !== null && file !== null && this.context.caFile.equals(file)));
    if (!same || !this.context) this.context = { caFile: file, ctx: createSecureContext({ ca: caList(file) }) };
    return this.context.ctx;
  }

  get(key: PinKey): Pool {
    const id = `${key.credential}\n${key.requester}\n${key.origin}\n${key.address}`;
    const known = this.pools.get(id);
    if (known && !known.pool.destroyed && !known.pool.closed) {
      this.pools.delete(id);
      this.pools.set(id, known);
      return known.pool;
    }
    const { Pool, buildConnector } = loadUndici();
    const pool = new Pool(key.origin, {
      connections: this.maxConnectionsPerPool,
      pipelining: 1,
      allowH2: false,
      connect: guardedConnector(
        buildConnector({
          lookup: pinnedLookup(key.address, key.family) as never,
          autoSelectFamily: false,
          secureContext: this.secureContext(),
          rejectUnauthorized: true,
          // A bounded session cache per pool; pools are per credential.
          maxCachedSessions: 16,
        }),
      ),
    });
    this.pools.delete(id);
    this.pools.set(id, { credential: key.credential, pool });
    while (this.pools.size > MAX_POOLS) {
      const [oldest, entry] = this.pools.entries().next().value as [string, { pool: Pool }];
      this.pools.delete(oldest);
      retire([entry.pool]);
    }
    return pool;
  }

  // A credential updated or removed: no new request goes on its
  // connections (they were made and checked under its old definition);
  // requests already sent finish (SPEC §6.1: past its intent a request
  // completes), then they close.
  retireCredential(credential: string): void {
    const mine = [...this.pools].filter(([, e]) => e.credential === credential);
    for (const [id] of mine) this.pools.delete(id);
    retire(mine.map(([, e]) => e.pool));
  }

  // A config change (CA list, DNS servers): no new request goes on a
  // connection made under the old settings, so a removed CA is never trusted
  // again; requests already on one finish, then it closes.
  retireAll(): void {
    const all = [...this.pools.values()];
    this.pools.clear();
    this.context = null;
    retire(all.map((e) => e.pool));
  }

  // Lock: no connection outlives the authority that opened it.
  async closeAll(): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((e) => e.pool.destroy().catch(() => undefined)));
  }

  get size(): number {
    return this.pools.size;
  }
}
