// A stub DNS client: one A or AAAA query to a recursive server, its outcome
// as a value (no exception objects on the hot path).
//
// Sockets: each server gets a connected UDP socket, reused across queries
// (opening one per query cost more than the query), and retired after
// MAX_QUERIES queries or MAX_AGE_MS, so the source port keeps changing.
// A query's id is random and unique among the socket's outstanding queries.
// An answer ends a query only if it arrives on that socket (connected: the
// kernel drops datagrams from any other address or port), carries the id of
// an outstanding query, and echoes its question (wire.ts); anything else is
// dropped and the query keeps waiting. 0x20 case randomisation is not used:
// a server that does not preserve case would need a second query to fall
// back, and SPEC §6.2 allows one query per type.
//
// Several servers: the next is asked only when one cannot be reached (a
// connect or send error, or ICMP port unreachable reported on the socket);
// an answer, SERVFAIL and REFUSED included, is final, and a silent server
// uses up the timeout. TC set: the query is asked once more over TCP, to
// the same server, within the same timeout.
import { createSocket, Socket as UdpSocket } from 'node:dgram';
import { connect as tcpConnect, Socket as TcpSocket } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { DnsServer } from '../../../shared/config';
import { decodeAnswer, DnsRecord, encodeName, encodeQuery, QType, questionKey } from './wire';

export type Outcome = { ok: true; records: DnsRecord[] } | { ok: false; code: string };

export interface ClientLimits {
  maxQueries: number; // per socket, then a fresh one (a new source port)
  maxAgeMs: number; // per socket, likewise, used or not
}

const DEFAULT_LIMITS: ClientLimits = { maxQueries: 64, maxAgeMs: 5000 };
const MAX_CHANNELS = 32;

// Query ids from a pool of random bytes: fewer calls into the CSPRNG than
// one per query.
class Ids {
  private pool = Buffer.alloc(0);
  private at = 0;
  next(): number {
    if (this.at + 2 > this.pool.length) {
      this.pool = randomBytes(512);
      this.at = 0;
    }
    const id = this.pool.readUInt16BE(this.at);
    this.at += 2;
    return id;
  }
}

interface Query {
  key: string; // the question name as the answer must echo it
  wire: Buffer;
  qtype: QType;
  servers: readonly DnsServer[];
  index: number; // the server being asked
  id: number;
  conn: Conn | undefined;
  tcp: TcpSocket | undefined;
  timer: NodeJS.Timeout | undefined;
  done: boolean;
  resolve: (o: Outcome) => void;
}

// One connected UDP socket and the queries outstanding on it.
class Conn {
  readonly pending = new Map<number, Query>();
  private readonly waiting: Query[] = []; // sent once connected
  private connected = false;
  uses = 0;
  retired = false;
  private closed = false;
  private readonly socket: UdpSocket;
  private readonly ageTimer: NodeJS.Timeout;

  constructor(
    private readonly client: DnsClient,
    server: DnsServer,
  ) {
    this.socket = createSocket(server.family === 6 ? 'udp6' : 'udp4');
    this.socket.unref();
    // An error is about this socket only: its queries go to the next server.
    this.socket.on('error', () => this.fail());
    this.socket.on('message', (msg) => this.onMessage(msg));
    this.socket.connect(server.port, server.address, (err?: Error) => {
      if (err) return this.fail();
      this.connected = true;
      for (const q of this.waiting.splice(0)) if (!q.done && q.conn === this) this.send(q);
    });
    this.ageTimer = setTimeout(() => this.retire(), client.limits.maxAgeMs);
    this.ageTimer.unref();
  }

  add(q: Query): void {
    let id = this.client.ids.next();
    while (this.pending.has(id)) id = this.client.ids.next();
    q.id = id;
    q.conn = this;
    this.pending.set(id, q);
    this.uses++;
    if (this.uses >= this.client.limits.maxQueries) this.retire();
    if (this.connected) this.send(q);
    else this.waiting.push(q);
  }

  private send(q: Query): void {
    // A send error may be the ICMP error an earlier query provoked (the
    // kernel reports it once, to whichever call comes next): it is about the
    // server, so every query on the socket moves on.
    this.socket.send(encodeQuery(q.id, q.wire, q.qtype), (err) => {
      if (err) this.fail();
    });
  }

  remove(q: Query): void {
    if (this.pending.get(q.id) === q) this.pending.delete(q.id);
    q.conn = undefined;
    if (this.retired && this.pending.size === 0) this.close();
  }

  private onMessage(msg: Buffer): void {
    if (msg.length < 2) return;
    const q = this.pending.get(msg.readUInt16BE(0));
    if (!q) return;
    const d = decodeAnswer(msg, q.key, q.qtype);
    if (d.kind === 'mismatch') return;
    if (d.kind === 'truncated') {
      this.remove(q);
      this.client.overTcp(q);
      return;
    }
    this.client.finish(q, d.kind === 'records' ? { ok: true, records: d.records } : { ok: false, code: d.code });
  }

  // No new queries; closed once the outstanding ones are over.
  retire(): void {
    if (this.retired) return;
    this.retired = true;
    this.client.retired(this);
    if (this.pending.size === 0) this.close();
  }

  private fail(): void {
    this.retire();
    const moved = [...this.pending.values()];
    this.pending.clear();
    this.waiting.length = 0;
    this.close();
    for (const q of moved) {
      q.conn = undefined;
      if (!q.done) this.client.nextServer(q);
    }
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.ageTimer);
    try {
      this.socket.close();
    } catch {
      // Already closed by node after an error: nothing to release.
    }
  }
}

export class DnsClient {
  readonly ids = new Ids();
  private readonly current = new Map<string, Conn>();

  constructor(readonly limits: ClientLimits = DEFAULT_LIMITS) {}

  query(servers: readonly DnsServer[], name: string, qtype: QType, timeoutMs: number): Promise<Outcome> {
    const wire = encodeName(name);
    if (!wire) return Promise.resolve({ ok: false, code: 'EBADNAME' });
    return new Promise<Outcome>((resolve) => {
      const q: Query = {
        key: questionKey(name),
        wire,
        qtype,
        servers,
        index: -1,
        id: 0,
        conn: undefined,
        tcp: undefined,
        timer: undefined,
        done: false,
        resolve,
      };
      q.timer = setTimeout(() => this.finish(q, { ok: false, code: 'ETIMEOUT' }), timeoutMs);
      q.timer.unref();
      this.nextServer(q);
    });
  }

  // The current server could not be reached: ask the next one, if any.
  nextServer(q: Query): void {
    q.index++;
    const server = q.servers[q.index];
    if (!server) return this.finish(q, { ok: false, code: 'ECONNREFUSED' });
    const key = `${server.address}|${server.port}`;
    let conn = this.current.get(key);
    if (!conn) {
      if (this.current.size >= MAX_CHANNELS) for (const c of [...this.current.values()]) c.retire();
      conn = new Conn(this, server);
      this.current.set(key, conn);
    }
    conn.add(q);
  }

  retired(conn: Conn): void {
    for (const [key, c] of this.current) if (c === conn) this.current.delete(key);
  }

  // The UDP answer was truncated: once over TCP (2-byte length prefix).
  overTcp(q: Query): void {
    const server = q.servers[q.index]!;
    const sock = tcpConnect({ host: server.address, port: server.port });
    q.tcp = sock;
    sock.unref();
    let got = Buffer.alloc(0);
    sock.on('connect', () => {
      const msg = encodeQuery(q.id, q.wire, q.qtype);
      const len = Buffer.alloc(2);
      len.writeUInt16BE(msg.length);
      sock.write(Buffer.concat([len, msg]));
    });
    sock.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length < 2 || got.length < 2 + got.readUInt16BE(0)) return;
      const msg = got.subarray(2, 2 + got.readUInt16BE(0));
      // Our own connection: anything but the answer is a broken server.
      const d = msg.length >= 2 && msg.readUInt16BE(0) === q.id ? decodeAnswer(msg, q.key, q.qtype) : undefined;
      this.finish(
        q,
        d?.kind === 'records'
          ? { ok: true, records: d.records }
          : d?.kind === 'error'
            ? { ok: false, code: d.code }
            : { ok: false, code: 'EBADRESP' },
      );
    });
    sock.on('error', (e: NodeJS.ErrnoException) =>
      this.finish(q, { ok: false, code: e.code === 'ECONNREFUSED' ? 'ECONNREFUSED' : 'EBADRESP' }),
    );
    sock.on('close', () => this.finish(q, { ok: false, code: 'EBADRESP' }));
  }

  finish(q: Query, outcome: Outcome): void {
    if (q.done) return;
    q.done = true;
    clearTimeout(q.timer);
    q.conn?.remove(q);
    q.tcp?.destroy();
    q.tcp = undefined;
    q.resolve(outcome);
  }
}
