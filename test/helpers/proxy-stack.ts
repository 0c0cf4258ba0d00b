// A real daemon behind the proxy front door, for unmodified clients: a
// local HTTPS API (api.example.test by default, resolving to 127.0.0.1
// through a real DNS server, its CA trusted through http.ca_file), one HTTP
// credential for it whose `env` names GH_TOKEN, an approver that grants a
// session, and `postern run --credential NAME -- CMD…` as a real child whose
// every output byte is kept. `exposed` searches everything postern and the
// clients emitted for any form of the secret.
import { cliBytes, BytesResult } from './cli-bytes';
import { journalText, makeCanary } from './canary';
import { exposures } from './exposure';
import { startStack, Stack, StackOptions } from './stack';

export interface ProxyStack extends Stack {
  secret: string;
  credential: string;
  // Runs CMD under `postern run --credential <credential>`; extra env is
  // added to the user's environment postern run starts from.
  run(cmd: string[], env?: Record<string, string>): Promise<BytesResult>;
  // Where the secret was found: every run's output, the daemon's log, the
  // decrypted journal. Empty when nowhere.
  exposed(): Promise<string[]>;
}

export interface ProxyStackOptions extends StackOptions {
  credential?: string; // default "github"
  // The credential's [inject] table body; default a Bearer Authorization.
  inject?: string;
  paths?: string[]; // allowed paths, default ["/*"]
  methods?: string[]; // default GET, POST
  host?: string; // default the first certificate name
  secret?: string; // default a fresh canary (given when the upstream must know it)
}

export async function startProxyStack(o: ProxyStackOptions = {}): Promise<ProxyStack> {
  const s = await startStack(o);
  const secret = o.secret ?? makeCanary('GHSECRET');
  const credential = o.credential ?? 'github';
  const host = o.host ?? o.names?.[0] ?? 'api.example.test';
  const inject = o.inject ?? 'header = "Authorization"\ntemplate = "Bearer {secret}"';
  const list = (xs: string[]): string => xs.map((x) => JSON.stringify(x)).join(', ');
  s.addCredential(
    credential,
    `name = "${credential}"\nkind = "http"\nenv = ["GH_TOKEN"]\nallow_addresses = ["127.0.0.1/32"]\n[inject]\n${inject}\n[[allow]]\nhost = "${host}"\nports = [${s.up.port}]\nmethods = [${list(o.methods ?? ['GET', 'POST'])}]\npaths = [${list(o.paths ?? ['/*'])}]\n`,
    secret,
  );
  await s.approver();
  const outputs: Buffer[] = [];
  return {
    ...s,
    secret,
    credential,
    async run(cmd, env = {}) {
      const r = await cliBytes({ ...s.h.env, ...env }, ['run', '--credential', credential, '--', ...cmd]);
      outputs.push(r.stdout, Buffer.from(r.stderr));
      return r;
    },
    async exposed() {
      const where: string[] = [];
      const look = (name: string, bytes: string | Buffer): void => {
        for (const e of exposures(bytes, secret)) where.push(`${e} (${name})`);
      };
      outputs.forEach((b, i) => look(`run output ${i}`, b));
      look('daemon log', s.d.logs());
      look('journal', await journalText(s.h));
      return where;
    },
  };
}

// A shell command's arguments for `run`: `sh -c SCRIPT`.
export function sh(script: string): string[] {
  return ['sh', '-c', script];
}
