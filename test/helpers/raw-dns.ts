// A DNS server whose every datagram the test writes by hand (not the zone
// helper, which sends only well-formed answers): one UDP socket and a TCP
// listener on the same port, each query handed to the test with the
// question it asked, and the wire pieces to build answers no encoder would.
import { createSocket, RemoteInfo, Socket as UdpSocket } from 'node:dgram';
import { createServer, Server } from 'node:net';
import * as dnsPacket from 'dns-packet';

export type Reply = (buf: Buffer) => void;

export interface Seen {
  udp: { name: string; type: string }[];
  tcp: { name: string; type: string }[];
}

export interface RawDns {
  port: number;
  seen: Seen;
  close(): Promise<void>;
}

// The question exactly as the query carries it (name, type, class).
export function questionBytes(query: Buffer): Buffer {
  let at = 12;
  while (query[at] !== 0) at += query[at]! + 1;
  return query.subarray(12, at + 5);
}

export function question(query: Buffer): { name: string; type: string } {
  const q = dnsPacket.decode(query).questions![0]!;
  return { name: q.name.toLowerCase(), type: q.type };
}

export const QNAME_PTR = Buffer.from([0xc0, 0x0c]); // the question's name

export function wireName(name: string): Buffer {
  const parts = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'ascii')]));
  return Buffer.concat([...parts, Buffer.from([0])]);
}

export function rr(owner: Buffer, type: number, rdata: Buffer, ttl = 60, cls = 1): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(type, 0);
  fixed.writeUInt16BE(cls, 2);
  fixed.writeUInt32BE(ttl >>> 0, 4);
  fixed.writeUInt16BE(rdata.length, 8);
  return Buffer.concat([owner, fixed, rdata]);
}

// `onUdp` answers a datagram (reply sends from the server's socket); `onTcp`
// gives the answer to a query over TCP (framed and sent, then the
// connection closed).
export async function startRawDns(
  onUdp: (query: Buffer, reply: Reply, from: RemoteInfo, socket: UdpSocket) => void,
  onTcp: (query: Buffer) => Buffer,
): Promise<RawDns> {
  const seen: Seen = { udp: [], tcp: [] };
  const socket = createSocket('udp4');
  socket.on('message', (msg, from) => {
    seen.udp.push(question(msg));
    onUdp(msg, (buf) => socket.send(buf, from.port, from.address), from, socket);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const port = socket.address().port;
  const tcp: Server = createServer((conn) => {
    let got = Buffer.alloc(0);
    conn.on('error', () => undefined);
    conn.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length < 2 || got.length < 2 + got.readUInt16BE(0)) return;
      const query = got.subarray(2, 2 + got.readUInt16BE(0));
      seen.tcp.push(question(query));
      const answer = onTcp(query);
      const len = Buffer.alloc(2);
      len.writeUInt16BE(answer.length);
      conn.end(Buffer.concat([len, answer]));
    });
  });
  await new Promise<void>((resolve) => tcp.listen(port, '127.0.0.1', resolve));
  return {
    port,
    seen,
    close: async () => {
      await new Promise<void>((resolve) => socket.close(() => resolve()));
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}
