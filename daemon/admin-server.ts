// admin.sock: the CLI's and approver's door. Only the daemon's own uid may
// connect (checked with SO_PEERCRED on every connection). Requests are frames
// (shared/admin-frame.ts); passphrases and secrets arrive as attachments and
// are wiped once the request has been answered.
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { FrameDecoder, encodeFrame, Frame } from '../shared/admin-frame';
import { ADMIN_OPS, AdminOp, isAdminOp } from '../shared/admin-protocol';
import { Refusal } from '../shared/errors';
import { peerCredOfSocket } from '../shared/native';
import type { AdminContext } from './admin/context';
import { lock, passwd, rotateAuditKey, unlock } from './admin/unlock';
import { configApprove, configDiff } from './admin/config';
import { credAdd, credList, credRemove, credShow, credUpdate } from './admin/credentials';
import { attachApprover, decide, detachApprover } from './admin/approvals';
import { sessionsList, sessionsRevoke } from './admin/sessions';
import type { Logger } from './logger';

// One admin connection; an approver's becomes `attached` after its proof.
interface Conn {
  id: string;
  attached: boolean;
  sock: net.Socket;
}

type Handler = (
  c: AdminContext,
  args: Record<string, unknown>,
  att: Buffer[],
  conn: Conn,
) => Promise<Record<string, unknown>> | Record<string, unknown>;

function attachedOnly(conn: Conn): void {
  if (!conn.attached)
    throw new Refusal(
      'denied_by_user',
      'only an approver that proved the passphrase may decide; run `postern approver`',
    );
}

function str(args: Record<string, unknown>, key: string): string {
  const v = args[key];
  if (typeof v !== 'string' || v === '') throw new Refusal('bad_request', `missing "${key}"; use the postern CLI`);
  return v;
}

function need(att: Buffer[], i: number, what: string): Buffer {
  const b = att[i];
  if (!b || b.length === 0) throw new Refusal('bad_request', `missing ${what}; use the postern CLI`);
  return b;
}

// Each operation and the action in daemon/admin/ that serves it.
const HANDLERS: Record<AdminOp, Handler> = {
  status: (c) => c.status(),
  unlock: (c, a, att) => unlock(c, need(att, 0, 'passphrase'), a['accept_rollback'] === true),
  lock: (c) => {
    c.state.lockAsked();
    return lock(c, 'locked by `postern lock`');
  },
  'config.diff': (c) => configDiff(c),
  'config.approve': (c, a, att) => configApprove(c, need(att, 0, 'passphrase'), str(a, 'hash')),
  passwd: (c, _a, att) => passwd(c, need(att, 0, 'passphrase'), need(att, 1, 'new passphrase')),
  'audit.rotate_key': (c, _a, att) => rotateAuditKey(c, need(att, 0, 'passphrase')),
  'cred.add': (c, a, att) => credAdd(c, need(att, 0, 'passphrase'), a['definition'], need(att, 1, 'secret')),
  'cred.update': (c, a, att) =>
    credUpdate(
      c,
      need(att, 0, 'passphrase'),
      str(a, 'name'),
      a['definition'],
      att[1] && att[1].length > 0 ? att[1] : undefined,
    ),
  'cred.list': (c) => credList(c),
  'cred.show': (c, a) => credShow(c, str(a, 'name')),
  'cred.rm': (c, a, att) => credRemove(c, need(att, 0, 'passphrase'), str(a, 'name')),
  'approver.attach': async (c, _a, att, conn) => {
    if (conn.attached) return { attached: true, approver: conn.id };
    const r = await attachApprover(c, need(att, 0, 'passphrase'), {
      id: conn.id,
      push: (event) => {
        if (!conn.sock.destroyed) conn.sock.write(encodeFrame({ id: 0, ...event }));
      },
    });
    conn.attached = true;
    return r;
  },
  'approval.decide': (c, a, _att, conn) => {
    attachedOnly(conn);
    return decide(c, a);
  },
  'approvals.list': (c, _a, _att, conn) => {
    attachedOnly(conn);
    return { pending: c.approvals.list() };
  },
  'sessions.list': (c) => sessionsList(c),
  'sessions.revoke': (c, a) => sessionsRevoke(c, a),
};

export function createAdminServer(controller: AdminContext, log: Logger): net.Server {
  const ownUid = process.getuid?.() ?? -1;
  return net.createServer((sock) => {
    // First of all: a peer that vanishes must never crash the daemon.
    sock.on('error', () => undefined);
    let peer;
    try {
      peer = peerCredOfSocket(sock);
    } catch {
      // Say why rather than just closing: the CLI would report "not reachable".
      sock.end(
        encodeFrame({
          id: 0,
          ok: false,
          error: {
            code: 'unidentified_peer',
            message:
              'the daemon could not identify this process (another pid namespace?); run the CLI where the daemon runs',
          },
        }),
      );
      return;
    }
    if (peer.uid !== ownUid) {
      log.warn(
        { event: 'admin_peer_refused', peer_uid: peer.uid, peer_pid: peer.pid },
        'admin connection from another uid refused',
      );
      sock.end(
        encodeFrame({
          id: 0,
          ok: false,
          error: {
            code: 'denied_peer',
            message: `admin.sock serves only uid ${ownUid}; run the CLI as the daemon's user`,
          },
        }),
      );
      return;
    }
    const decoder = new FrameDecoder();
    const conn: Conn = { id: randomBytes(4).toString('hex'), attached: false, sock };
    sock.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = decoder.push(chunk);
      } catch (e) {
        reply(sock, 0, e);
        sock.end();
        return;
      }
      for (const f of frames) void handle(controller, f, conn, log);
    });
    sock.on('close', () => {
      decoder.wipe();
      if (conn.attached) detachApprover(controller, conn.id);
    });
  });
}

async function handle(controller: AdminContext, frame: Frame, conn: Conn, log: Logger): Promise<void> {
  const sock = conn.sock;
  const id = typeof frame.json['id'] === 'number' ? frame.json['id'] : 0;
  const op = frame.json['op'];
  try {
    if (!isAdminOp(op))
      throw new Refusal(
        'bad_request',
        `unknown admin operation ${JSON.stringify(op)}; use a postern CLI of the same version as the daemon`,
      );
    const args = (
      typeof frame.json['args'] === 'object' && frame.json['args'] !== null ? frame.json['args'] : {}
    ) as Record<string, unknown>;
    if (frame.attachments.length > ADMIN_OPS[op].length)
      throw new Refusal('bad_request', `too many attachments for ${op}`);
    const result = await HANDLERS[op](controller, args, frame.attachments, conn);
    if (!sock.destroyed) sock.write(encodeFrame({ id, ok: true, result }));
  } catch (e) {
    // Only the error's class and code: a library message could quote input.
    if (!(e instanceof Refusal))
      log.error(
        { event: 'admin_error', op: String(op), err: (e as Error)?.name, errno: (e as NodeJS.ErrnoException)?.code },
        'admin operation failed',
      );
    reply(sock, id, e);
  } finally {
    for (const a of frame.attachments) a.fill(0);
  }
}

function reply(sock: net.Socket, id: number, e: unknown): void {
  const error =
    e instanceof Refusal
      ? e.toJSON()
      : { code: 'internal_error', message: 'the daemon hit an unexpected error; see its log' };
  if (!sock.destroyed) sock.write(encodeFrame({ id, ok: false, error }));
}
