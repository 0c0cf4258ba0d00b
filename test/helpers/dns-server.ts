// A real UDP DNS server on 127.0.0.1 (random port) for tests: point
// `dns_servers` at it and decide each answer in the test. It records every
// question it receives, so a test can count the queries one resolution made,
// and it passes each answer function the per-(name, type) query count, so a
// name can change its answer between queries (DNS rebinding).
import { createSocket, RemoteInfo } from 'node:dgram';
import * as dnsPacket from 'dns-packet';

export interface Answer {
  A?: string[];
  AAAA?: string[];
  // The name is an alias: the answer carries a CNAME record, then the
  // records the answer function gives for the target (chains are followed,
  // at most MAX_CHAIN links, so a CNAME loop in a test ends).
  CNAME?: string;
  ttl?: number; // seconds, default 60
  rcode?: 'NXDOMAIN' | 'SERVFAIL' | 'NOERROR' | 'REFUSED';
  delayMs?: number; // answer this late
  drop?: boolean; // never answer (a timeout for the client)
}

// `name` is lower-cased, without a trailing dot; `count` is 1 for the first
// query for this name and type, 2 for the second, ... For a CNAME target the
// count of the query that led to it is passed on.
export type AnswerFn = (name: string, type: 'A' | 'AAAA' | string, count: number) => Answer | Promise<Answer>;

export interface DnsQuery {
  name: string;
  type: string;
  at: number; // Date.now() when received
}

export interface DnsServerHandle {
  port: number;
  address: '127.0.0.1';
  queries: DnsQuery[];
  close(): Promise<void>;
}

const MAX_CHAIN = 8;
const DEFAULT_TTL = 60;
const RCODES: Record<NonNullable<Answer['rcode']>, number> = { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3, REFUSED: 5 };

function canonicalName(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

// The answer section for one question: the CNAME chain, then the records of
// the asked type at its end. Returns the rcode of the last link.
async function buildAnswers(
  answer: AnswerFn,
  qname: string,
  type: string,
  count: number,
  first: Answer,
): Promise<{ rcode: number; records: dnsPacket.Answer[] }> {
  const records: dnsPacket.Answer[] = [];
  let owner = qname;
  let current = first;
  for (let link = 0; ; link++) {
    const ttl = current.ttl ?? DEFAULT_TTL;
    const rcode = RCODES[current.rcode ?? 'NOERROR'];
    // An error ends the answer; at the end of a chain NXDOMAIN keeps the
    // CNAMEs already given (the alias exists, its target does not).
    if (rcode !== RCODES.NOERROR) return { rcode, records };
    if (current.CNAME !== undefined && type !== 'CNAME') {
      records.push({ type: 'CNAME', name: owner, ttl, class: 'IN', data: current.CNAME });
      if (link + 1 >= MAX_CHAIN) return { rcode: 0, records };
      owner = current.CNAME;
      current = await answer(canonicalName(owner), type, count);
      continue;
    }
    const data = type === 'A' ? current.A : type === 'AAAA' ? current.AAAA : undefined;
    for (const address of data ?? []) {
      records.push({ type: type as 'A' | 'AAAA', name: owner, ttl, class: 'IN', data: address });
    }
    return { rcode: 0, records };
  }
}

export async function startDnsServer(answer: AnswerFn): Promise<DnsServerHandle> {
  const socket = createSocket('udp4');
  const queries: DnsQuery[] = [];
  const counts = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  let closed = false;

  async function respond(msg: Buffer, from: RemoteInfo): Promise<void> {
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return; // not DNS: ignore, as a real server would
    }
    const question = query.questions?.[0];
    if (!question) return;
    const name = canonicalName(question.name);
    const key = `${name}\n${question.type}`;
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    queries.push({ name, type: question.type, at: Date.now() });

    const first = await answer(name, question.type, count);
    if (first.drop) return;
    const { rcode, records } = await buildAnswers(answer, question.name, question.type, count, first);
    const reply = dnsPacket.encode({
      type: 'response',
      id: query.id ?? 0,
      flags: dnsPacket.RECURSION_AVAILABLE | (query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0) | rcode,
      questions: [question], // echoed as asked: the client matches on it
      answers: records,
    });
    const send = (): void => {
      if (!closed) socket.send(reply, from.port, from.address);
    };
    if (first.delayMs && first.delayMs > 0) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        send();
      }, first.delayMs);
      timers.add(timer);
    } else {
      send();
    }
  }

  socket.on('message', (msg, from) => {
    respond(msg, from).catch((e: unknown) => {
      // A broken answer function is a bug in the test: make it loud.
      socket.emit('error', e instanceof Error ? e : new Error(String(e)));
    });
  });

  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });

  return {
    port: socket.address().port,
    address: '127.0.0.1',
    queries,
    close: () =>
      new Promise<void>((resolve) => {
        if (closed) return resolve();
        closed = true;
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        socket.close(() => resolve());
      }),
  };
}

// A fixed zone: names (lower case, no trailing dot) to answers; each value
// may also be a function of (type, count) for answers that change between
// queries. Names not listed answer NXDOMAIN.
export function zone(records: Record<string, Answer | ((type: string, count: number) => Answer)>): AnswerFn {
  return (name, type, count) => {
    const entry = Object.prototype.hasOwnProperty.call(records, name) ? records[name] : undefined;
    if (entry === undefined) return { rcode: 'NXDOMAIN' };
    return typeof entry === 'function' ? entry(type, count) : entry;
  };
}
