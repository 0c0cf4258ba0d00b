// A minimal ssh-agent made of the front door's codec and key modules alone
// (no policy), so that the real OpenSSH tools (ssh-add, ssh) can be pointed
// at them: it holds stored keys, answers identity lists and signs whatever
// is asked for a key it holds, accepts session-bind, and records every
// message body it received, in order, per connection.
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FrameSplitter } from '../../daemon/ssh-agent/wire';
import {
  FAILURE,
  MSG,
  SESSION_BIND,
  SUCCESS,
  identitiesAnswer,
  parseExtension,
  parseSessionBind,
  parseSignRequest,
  signResponse,
} from '../../daemon/ssh-agent/messages';
import { publicBlobOf, signAsAgent } from '../../daemon/ssh-agent/agent-keys';

export interface CodecAgent {
  socket: string; // the path for SSH_AUTH_SOCK / IdentityAgent
  connections: Buffer[][]; // the bodies received, one list per connection
  close(): Promise<void>;
}

export async function startCodecAgent(keys: { text: Buffer; comment: string }[]): Promise<CodecAgent> {
  const dir = mkdtempSync(join(tmpdir(), 'postern-codec-agent-'));
  const socket = join(dir, 'agent.sock');
  const held = keys.map((k) => ({ ...k, blob: publicBlobOf(k.text) }));
  const connections: Buffer[][] = [];
  const open = new Set<net.Socket>();

  const answer = (body: Buffer): Buffer => {
    switch (body[0]) {
      case MSG.REQUEST_IDENTITIES:
        return identitiesAnswer(held.map((k) => ({ blob: k.blob, comment: k.comment })));
      case MSG.SIGN_REQUEST: {
        const req = parseSignRequest(body);
        const key = held.find((k) => k.blob.equals(req.keyBlob));
        return key ? signResponse(signAsAgent(key.text, req.data, req.flags)) : FAILURE;
      }
      case MSG.EXTENSION: {
        const ext = parseExtension(body);
        if (ext.name !== SESSION_BIND) return FAILURE;
        parseSessionBind(ext.contents);
        return SUCCESS;
      }
      default:
        return FAILURE;
    }
  };

  const server = net.createServer((conn) => {
    open.add(conn);
    conn.on('close', () => open.delete(conn));
    const received: Buffer[] = [];
    connections.push(received);
    const frames = new FrameSplitter();
    conn.on('data', (chunk) => {
      try {
        for (const body of frames.push(chunk)) {
          received.push(body);
          let reply: Buffer;
          try {
            reply = answer(body);
          } catch {
            reply = FAILURE;
          }
          conn.write(reply);
        }
      } catch {
        conn.destroy();
      }
    });
    conn.on('error', () => conn.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, () => resolve());
  });
  return {
    socket,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of open) c.destroy();
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
