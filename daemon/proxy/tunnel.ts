// proxy.other_hosts = "tunnel": a CONNECT to a host no credential covers is
// relayed as bytes, after the one resolution with every address classified
// (SPEC §6.2, no allow_addresses: no credential names any), to the first
// checked address. No secret is involved, so nothing is read or redacted;
// the tunnel is journaled when it closes, with the bytes each way.
import net from 'node:net';
import { Refusal } from '../../shared/errors';
import type { Identity } from '../identity/identify';
import type { PipelineServices } from '../pipeline/context';
import { who } from '../pipeline/evidence';
import { resolveChecked } from '../pipeline/pinned-address';
import type { ConnectTarget } from './connect-target';

function connectTo(address: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const up = net.connect({ host: address, port });
    const timer = setTimeout(() => {
      up.destroy();
      reject(
        new Refusal('upstream_timeout', `${address} port ${port} did not accept a connection within http.timeout`),
      );
    }, timeoutMs);
    up.once('connect', () => {
      clearTimeout(timer);
      resolve(up);
    });
    up.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Refusal('upstream_error', `could not connect to ${address} port ${port} (${e.code ?? 'error'})`));
    });
  });
}

// Throws a refusal before the 200; then relays until either side closes.
export async function openTunnel(
  s: PipelineServices,
  identity: Identity,
  t: ConnectTarget,
  client: net.Socket,
  head: Buffer,
): Promise<void> {
  const { pinned } = await resolveChecked(s, t.target, []);
  const up = await connectTo(pinned.address, t.port, s.config().http.timeout);
  let bytesUp = head.length;
  let bytesDown = 0;
  client.on('data', (c: Buffer) => (bytesUp += c.length));
  up.on('data', (c: Buffer) => (bytesDown += c.length));
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0) up.write(head);
  client.pipe(up);
  up.pipe(client);
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    client.destroy();
    up.destroy();
    void s.journal
      .recordOutcome({
        kind: 'proxy_tunnel',
        ...who(identity),
        host: t.host,
        port: t.port,
        address: pinned.address,
        bytes_up: bytesUp,
        bytes_down: bytesDown,
      })
      .catch(() => undefined);
  };
  for (const sock of [client, up]) {
    sock.on('close', close);
    sock.on('error', close);
    sock.on('end', () => sock.end());
  }
}
