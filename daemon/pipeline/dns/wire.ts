// The DNS message format (RFC 1035 §4), only as much of it as an A/AAAA stub
// resolver needs: encode one query, and check and decode its answer. Every
// read is bounds-checked and every failure is a value, never a throw: the
// answer comes from the network and may be hostile (truncated, looping
// compression pointers, lengths that run past the end).

export type QType = 1 | 28; // A, AAAA

export interface DnsRecord {
  address: string;
  ttl: number;
}

// What an answer means for the query. 'mismatch': not an answer to this
// query (a stray or spoofed datagram): the caller keeps waiting.
// 'truncated': TC set, ask again over TCP.
export type Decoded =
  | { kind: 'records'; records: DnsRecord[] }
  | { kind: 'error'; code: string }
  | { kind: 'mismatch' }
  | { kind: 'truncated' };

const CLASS_IN = 1;
const TYPE_CNAME = 5;
const HEADER = 12;
// Aliases followed inside one answer before it counts as malformed (a loop,
// or a chain no sane zone has).
export const MAX_CHAIN = 16;
// Compression pointers followed in one name; each must also point strictly
// backwards, so a name always ends, this only bounds the work.
const MAX_POINTERS = 64;
const MAX_NAME_WIRE = 255; // RFC 1035 §3.1, length bytes included
// The UDP payload size announced in EDNS (RFC 6891): the common safe value
// that avoids IP fragmentation; larger answers come back with TC and go TCP.
export const EDNS_UDP_SIZE = 1232;

// RCODE → outcome code, as node's c-ares reported them.
const RCODES: Record<number, string> = { 1: 'EFORMERR', 2: 'ESERVFAIL', 3: 'ENOTFOUND', 4: 'ENOTIMP', 5: 'EREFUSED' };

// The name's labels as wire bytes, or null when it is not a DNS name we
// send: empty labels, a label over 63 bytes, over 253 characters, or
// anything but printable ASCII, or a backslash (an escape to c-ares; the URL step has turned IDNs into punycode
// already). One trailing dot is accepted.
export function encodeName(name: string): Buffer | null {
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  if (bare.length === 0 || bare.length > 253) return null;
  const out = Buffer.allocUnsafe(bare.length + 2);
  let at = 0;
  for (const label of bare.split('.')) {
    if (label.length === 0 || label.length > 63) return null;
    out[at++] = label.length;
    for (let i = 0; i < label.length; i++) {
      const c = label.charCodeAt(i);
      if (c <= 0x20 || c >= 0x7f || c === 0x5c) return null;
      out[at++] = c;
    }
  }
  out[at++] = 0;
  return out.subarray(0, at);
}

// A recursive query (RD) for one question, with an EDNS OPT record.
export function encodeQuery(id: number, wireName: Buffer, qtype: QType): Buffer {
  const msg = Buffer.alloc(HEADER + wireName.length + 4 + 11);
  msg.writeUInt16BE(id, 0);
  msg.writeUInt16BE(0x0100, 2); // RD
  msg.writeUInt16BE(1, 4); // QDCOUNT
  msg.writeUInt16BE(1, 10); // ARCOUNT: the OPT record
  let at = HEADER + wireName.copy(msg, HEADER);
  msg.writeUInt16BE(qtype, at);
  msg.writeUInt16BE(CLASS_IN, at + 2);
  at += 4;
  // OPT: root owner, type 41, class = UDP size, TTL 0, no options.
  msg[at] = 0;
  msg.writeUInt16BE(41, at + 1);
  msg.writeUInt16BE(EDNS_UDP_SIZE, at + 3);
  return msg;
}

interface Name {
  name: string; // lower case, labels joined by '.', a '.' or '\' inside a label escaped
  end: number; // offset just past the name where it was read
}

// Reads a possibly compressed name at `at`; null when malformed.
function readName(msg: Buffer, at: number): Name | null {
  let name = '';
  let wire = 0;
  let end = -1;
  let pointers = 0;
  let pos = at;
  for (;;) {
    if (pos >= msg.length) return null;
    const len = msg[pos]!;
    if (len === 0) {
      if (end < 0) end = pos + 1;
      return { name, end };
    }
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= msg.length || ++pointers > MAX_POINTERS) return null;
      const target = ((len & 0x3f) << 8) | msg[pos + 1]!;
      // Strictly backwards: a pointer can never reach itself again.
      if (target >= pos) return null;
      if (end < 0) end = pos + 2;
      pos = target;
      continue;
    }
    if (kind !== 0) return null; // extended label types: not in answers we accept
    wire += len + 1;
    if (wire + 1 > MAX_NAME_WIRE || pos + 1 + len > msg.length) return null;
    if (name.length > 0) name += '.';
    for (let i = pos + 1; i <= pos + len; i++) {
      let c = msg[i]!;
      if (c >= 0x41 && c <= 0x5a) c += 0x20;
      if (c === 0x2e || c === 0x5c) name += '\\';
      name += String.fromCharCode(c);
    }
    pos += len + 1;
  }
}

// An AAAA address printed as c-ares's inet_ntop (BIND's) printed it, which
// the tests and the audit record name: lower-case hex, the longest run (of
// two or more) of zero groups as "::", the first on a tie, and the IPv4
// forms ::a.b.c.d (compatible) and ::ffff:a.b.c.d (mapped) dotted.
function ipv6(msg: Buffer, at: number): string {
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push(msg.readUInt16BE(at + i));
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestLen < 2) best = -1;
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (best >= 0 && i >= best && i < best + bestLen) {
      if (i === best) out += ':';
      continue;
    }
    if (i !== 0) out += ':';
    if (
      i === 6 &&
      best === 0 &&
      (bestLen === 6 || (bestLen === 7 && words[7] !== 1) || (bestLen === 5 && words[5] === 0xffff))
    ) {
      out += `${msg[at + 12]}.${msg[at + 13]}.${msg[at + 14]}.${msg[at + 15]}`;
      return out;
    }
    out += words[i]!.toString(16);
  }
  if (best >= 0 && best + bestLen === 8) out += ':';
  return out;
}

// The question name as the answer must echo it: lower case, no trailing dot.
export function questionKey(name: string): string {
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  return bare.toLowerCase();
}

// Checks that `msg` answers the query (id matched by the caller) for
// `qname` (questionKey form) and `qtype`, then decodes it. Only a message
// that echoes the question exactly can end the query; once it does,
// anything malformed after the question is EBADRESP.
export function decodeAnswer(msg: Buffer, qname: string, qtype: QType): Decoded {
  if (msg.length < HEADER) return { kind: 'mismatch' };
  const flags = msg.readUInt16BE(2);
  if ((flags & 0x8000) === 0 || (flags & 0x7800) !== 0) return { kind: 'mismatch' }; // QR, opcode QUERY
  if (msg.readUInt16BE(4) !== 1) return { kind: 'mismatch' };
  const q = readName(msg, HEADER);
  if (!q || q.end + 4 > msg.length || q.name !== qname) return { kind: 'mismatch' };
  if (msg.readUInt16BE(q.end) !== qtype || msg.readUInt16BE(q.end + 2) !== CLASS_IN) return { kind: 'mismatch' };

  if (flags & 0x0200) return { kind: 'truncated' };
  const rcode = flags & 0x000f;
  if (rcode !== 0) return { kind: 'error', code: RCODES[rcode] ?? 'EBADRESP' };

  const ancount = msg.readUInt16BE(6);
  const aliases = new Map<string, { target: string; ttl: number }>();
  const found: { owner: string; address: string; ttl: number }[] = [];
  let at = q.end + 4;
  for (let i = 0; i < ancount; i++) {
    const owner = readName(msg, at);
    if (!owner || owner.end + 10 > msg.length) return { kind: 'error', code: 'EBADRESP' };
    const type = msg.readUInt16BE(owner.end);
    const cls = msg.readUInt16BE(owner.end + 2);
    const ttl = Math.min(msg.readUInt32BE(owner.end + 4), 0x7fffffff);
    const rdlength = msg.readUInt16BE(owner.end + 8);
    const rdata = owner.end + 10;
    if (rdata + rdlength > msg.length) return { kind: 'error', code: 'EBADRESP' };
    at = rdata + rdlength;
    if (cls !== CLASS_IN) continue;
    if (type === TYPE_CNAME) {
      const target = readName(msg, rdata);
      if (!target || target.end !== at) return { kind: 'error', code: 'EBADRESP' };
      if (aliases.has(owner.name)) return { kind: 'error', code: 'EBADRESP' }; // two CNAMEs for one name
      aliases.set(owner.name, { target: target.name, ttl });
    } else if (type === qtype) {
      if (rdlength !== (qtype === 1 ? 4 : 16)) return { kind: 'error', code: 'EBADRESP' };
      const address =
        qtype === 1 ? `${msg[rdata]}.${msg[rdata + 1]}.${msg[rdata + 2]}.${msg[rdata + 3]}` : ipv6(msg, rdata);
      found.push({ owner: owner.name, address, ttl });
    }
    // Other types (RRSIG, DNAME...) are not followed: as c-ares.
  }

  // The records that count are those of the name the CNAME chain from the
  // question ends at; a TTL along the chain caps the records' TTL.
  let name = qname;
  let cap = 0x7fffffff;
  for (let links = 0; ; links++) {
    const alias = aliases.get(name);
    if (!alias) break;
    if (links >= MAX_CHAIN) return { kind: 'error', code: 'EBADRESP' };
    cap = Math.min(cap, alias.ttl);
    name = alias.target;
  }
  const records: DnsRecord[] = [];
  for (const r of found) if (r.owner === name) records.push({ address: r.address, ttl: Math.min(r.ttl, cap) });
  if (records.length === 0) return { kind: 'error', code: 'ENODATA' };
  return { kind: 'records', records };
}
