// ca: print the proxy front door's CA certificate (SPEC §5, §11) and its
// fingerprint, read from ca.pem (public; no daemon, no passphrase), for the
// clients that must trust it and for comparing it with the journal's
// proxy_ca_created entry.
import { Command } from 'commander';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Context } from '../context';
import { Refusal } from '../../shared/errors';

type Ctx = () => Context;

function readCaPem(path: string): { pem: string; cert: X509Certificate } {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      throw new Refusal(
        'not_found',
        `there is no ${path}: the proxy CA is made at \`postern init\`, or when an unlocked daemon first needs it (a vault made before postern had one)`,
      );
    throw new Refusal('bad_environment', `cannot read ${path} (${code ?? (e as Error).message}); check the file`);
  }
  try {
    return { pem, cert: new X509Certificate(pem) };
  } catch {
    throw new Refusal(
      'bad_environment',
      `${path} is not a PEM certificate; remove it and run \`postern unlock\`, which writes it again from the vault`,
    );
  }
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('ca')
    .description("print the proxy front door's CA certificate (PEM) and its SHA-256 fingerprint")
    .action(() => {
      const c = ctx();
      const path = c.config(true).paths.caPem;
      const { pem, cert } = readCaPem(path);
      const fingerprint = cert.fingerprint256;
      c.out(
        {
          path,
          subject: cert.subject,
          not_after: new Date(cert.validTo).toISOString(),
          fingerprint_sha256: fingerprint.replace(/:/g, '').toLowerCase(),
          pem,
        },
        [pem.trimEnd(), `SHA-256 fingerprint: ${fingerprint}`],
      );
    });
}
