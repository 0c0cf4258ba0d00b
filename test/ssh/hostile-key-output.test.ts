// POST /v1/ssh with a key credential: a command (here a hostile server)
// prints the credential's own private key in the formats real tools print
// it in: PKCS#8 and PKCS#1 PEM, DER in hex, JWK, and `openssl pkey -text`
// (colon-separated hex of each private component, from the real openssl).
// docs/ssh.md "Output": the stored key text, its base64 lines and the
// private components themselves are redacted "so a key echoed in another
// format is caught too"; SPEC §6.6: key material redacted from output like
// §6.4.
import t from 'tap';
import { generateKeyPairSync, KeyObject } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { startStack } from '../helpers/stack';
import { agentRequest } from '../helpers/postern';
import { addSshCredential, SshReply } from '../helpers/ssh-credential';
import { exposures } from '../helpers/exposure';
import { startHostile } from '../helpers/ssh-hostile-server';

const b64u = (s: string | undefined): Buffer => Buffer.from(s ?? '', 'base64url');
const colonHex = (b: Buffer): string => [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');

interface KeyCase {
  name: string;
  key: KeyObject;
  importPem: string;
  parts: Record<string, Buffer>;
}

function cases(): KeyCase[] {
  const ed = generateKeyPairSync('ed25519').privateKey;
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const edJwk = ed.export({ format: 'jwk' });
  const rsaJwk = rsa.export({ format: 'jwk' });
  return [
    {
      name: 'ed25519',
      key: ed,
      importPem: ed.export({ format: 'pem', type: 'pkcs8' }) as string,
      parts: { seed: b64u(edJwk.d) },
    },
    {
      name: 'rsa',
      key: rsa,
      importPem: rsa.export({ format: 'pem', type: 'pkcs1' }) as string,
      parts: { d: b64u(rsaJwk.d), p: b64u(rsaJwk.p), q: b64u(rsaJwk.q) },
    },
  ];
}

function printed(c: KeyCase): Record<string, string> {
  const pkcs8 = c.key.export({ format: 'pem', type: 'pkcs8' }) as string;
  const text = execFileSync('openssl', ['pkey', '-text', '-noout'], { input: pkcs8 }).toString();
  return {
    pkcs8,
    der_hex: (c.key.export({ format: 'der', type: 'pkcs8' }) as Buffer).toString('hex'),
    jwk: JSON.stringify(c.key.export({ format: 'jwk' })),
    ...(c.name === 'rsa' ? { pkcs1: c.key.export({ format: 'pem', type: 'pkcs1' }) as string } : {}),
    openssl_text: text,
  };
}

t.test('the private key printed back in other formats', async (t) => {
  const keys = cases();
  const outputs = new Map<string, string>();
  for (const c of keys) for (const [f, v] of Object.entries(printed(c))) outputs.set(`${c.name}/${f}`, v);
  const [srv, s] = await Promise.all([
    startHostile({
      onExec: (e) => {
        e.stream.write(outputs.get(e.command.replace(/^print /, '').replace(' ', '/')) ?? 'nothing\n');
        e.stream.exit(0);
        e.stream.end();
      },
    }),
    startStack(),
  ]);
  t.teardown(() => srv.close());
  t.teardown(() => s.close());
  await s.approver();
  for (const c of keys) {
    const r = addSshCredential(
      s.h,
      {
        name: `key-${c.name}`,
        port: srv.port,
        user: 'deploy',
        auth: 'key',
        hostKey: srv.fingerprint,
        commands: ['print *'],
      },
      s.h.file(`${c.name}.key`, c.importPem),
    );
    if (r.code !== 0) throw new Error(`cred add ${c.name}: ${r.stderr}`);
  }
  for (const c of keys) {
    for (const format of Object.keys(printed(c))) {
      await t.test(`${c.name} key printed as ${format}: no private component visible`, async (t) => {
        const x = await agentRequest(s.sock, 'POST', '/v1/ssh', {
          credential: `key-${c.name}`,
          command: `print ${c.name} ${format}`,
        });
        t.equal(x.status, 200, x.text.slice(0, 200));
        const out = (x.json as SshReply).stdout;
        t.not(out, 'nothing\n', 'the server printed the key');
        for (const [part, bytes] of Object.entries(c.parts)) {
          t.same(exposures(x.text, bytes), [], `${part}: no form of it in the reply`);
          // openssl wraps the colon-separated hex at 15 bytes a line: join
          // the lines and drop the colons before looking.
          const hex = bytes.subarray(0, 16).toString('hex');
          const joined = out.replace(/[:\s]/g, '');
          t.notOk(
            joined.includes(hex),
            `${part}: not as openssl's colon-separated hex either (${colonHex(bytes.subarray(0, 6))}…)`,
          );
        }
        t.ok((x.json as SshReply).redactions > 0, `redactions ${(x.json as SshReply).redactions}`);
      });
    }
  }
});
