// cred add / update / list / show / rm. The definition is validated and
// printed in its normalised form before the passphrase is asked, because an
// agent may have written the file the human is about to authorise.
import { Command } from 'commander';
import { Context } from '../context';
import { withAdmin, AdminClient } from '../admin-client';
import { getPassphrase, getSecret, readInputFile, stripNewline, askHidden, askPrivateKey } from '../prompt';
import { Refusal } from '../../shared/errors';
import type { CredentialDef, SshCredentialDef } from '../../shared/credential';

// The credential module (zod schemas, ssh2 key parsing) is loaded on demand,
// so commands that do not need it start faster.
const credential = (): typeof import('../../shared/credential') =>
  require('../../shared/credential') as typeof import('../../shared/credential');

type Ctx = () => Context;

interface SecretOptions {
  secretFile?: string;
  keyPassphraseFile?: string;
  passphraseFile?: string;
}

// A regular file or a pipe (`-` for stdin), at most 256 KiB, as the secret
// files are read: a device (/dev/zero) or a directory is refused at once;
// bytes that are not UTF-8 are refused, not replaced.
function readDefinition(file: string): CredentialDef {
  const bytes = readInputFile(file, 'definition');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new Refusal('bad_request', `the definition file ${file} is not valid UTF-8; save it as UTF-8 text`);
  }
  return credential().parseDefinitionToml(text, file);
}

// Read the secret and check it locally (the daemon checks again). An
// encrypted SSH key is decrypted here, with its passphrase asked like a
// secret, and only the decrypted key is sent to the daemon's vault.
async function readCheckedSecret(def: CredentialDef, o: SecretOptions): Promise<Buffer> {
  if (def.kind === 'ssh' && def.auth === 'key') return readCheckedKey(def, o);
  const secret = await getSecret(o, def.kind === 'ssh' ? 'Password: ' : 'Secret: ');
  try {
    if (def.kind === 'http') credential().checkHttpSecret(secret, def.inject);
    else credential().prepareSshSecret(def, secret);
  } catch (e) {
    secret.fill(0);
    throw e;
  }
  return secret;
}

// A private key: from the file, else pasted at the terminal. What was read
// is wiped once the key (decrypted, re-encoded) has been prepared from it.
async function readCheckedKey(def: SshCredentialDef, o: SecretOptions): Promise<Buffer> {
  const secret = o.secretFile ? await getSecret(o) : await askPrivateKey();
  try {
    try {
      return credential().prepareSshSecret(def, secret);
    } catch (e) {
      if (!(e instanceof Refusal) || e.detail?.['needs_key_passphrase'] !== true) throw e;
    }
    const keyPass = o.keyPassphraseFile
      ? stripNewline(readInputFile(o.keyPassphraseFile, 'key passphrase'))
      : await askHidden('Passphrase of the private key: ');
    try {
      return credential().prepareSshSecret(def, secret, keyPass);
    } finally {
      keyPass.fill(0);
    }
  } finally {
    secret.fill(0);
  }
}

function secretOptions(cmd: Command): Command {
  return cmd
    .option('--secret-file <file>', 'read the secret from a file (- for stdin); one trailing newline is removed')
    .option('--key-passphrase-file <file>', 'passphrase of an encrypted SSH private key (- for stdin)')
    .option('--passphrase-file <file>', 'read the vault passphrase from a file (- for stdin)');
}

async function withPassphrase<T>(o: SecretOptions, fn: (pass: Buffer) => Promise<T>): Promise<T> {
  const pass = await getPassphrase(o);
  try {
    return await fn(pass);
  } finally {
    pass.fill(0);
  }
}

// Each on its own paragraph after the definition, before the passphrase.
function notesText(def: CredentialDef): string {
  return credential()
    .wideningNotes(def)
    .map((n) => `\nNote: ${n}\n`)
    .join('');
}

async function showCurrent(a: AdminClient, name: string): Promise<CredentialDef> {
  const r = await a.request('cred.show', { name });
  return r['definition'] as CredentialDef;
}

export function register(program: Command, ctx: Ctx): void {
  const cred = program
    .command('cred')
    .description('manage credentials (definitions and secrets live only in the vault)');

  secretOptions(
    cred
      .command('add')
      .description('add a credential')
      .requiredOption('--file <def.toml>', 'the credential definition (TOML)'),
  ).action(async (o: SecretOptions & { file: string }) => {
    const c = ctx();
    c.harden('cred');
    const def = readDefinition(o.file);
    await withAdmin(c.config(), async (a) => {
      await a.request('cred.list');
      c.info(`Credential to add:\n\n${credential().definitionToToml(def)}${notesText(def)}`);
      const secret = await readCheckedSecret(def, o);
      try {
        const r = await withPassphrase(o, (pass) => a.request('cred.add', { definition: def }, [pass, secret]));
        c.out({ ...r, definition: def }, `added credential "${def.name}" (${String(r['definition_hash'])})`);
      } finally {
        secret.fill(0);
      }
    });
  });

  secretOptions(
    cred
      .command('update')
      .description("replace a credential's definition; the secret is kept unless --secret-file is given")
      .argument('<name>')
      .requiredOption('--file <def.toml>', 'the new definition (TOML)'),
  ).action(async (name: string, o: SecretOptions & { file: string }) => {
    const c = ctx();
    c.harden('cred');
    const def = readDefinition(o.file);
    await withAdmin(c.config(), async (a) => {
      const before = await showCurrent(a, name);
      const changes = credential().diffDefinitions(before, def);
      c.info(
        `New definition of "${name}":\n\n${credential().definitionToToml(def)}${notesText(def)}\nChanges:\n${changes.length ? changes.join('\n') : '  (none)'}\n`,
      );
      const secret = o.secretFile ? await readCheckedSecret(def, o) : undefined;
      try {
        const r = await withPassphrase(o, (pass) =>
          a.request('cred.update', { name, definition: def }, secret ? [pass, secret] : [pass]),
        );
        c.out(
          { ...r, definition: def },
          `updated credential "${name}"${r['secret_replaced'] ? ' and its secret' : ''}`,
        );
      } finally {
        secret?.fill(0);
      }
    });
  });

  cred
    .command('list')
    .description('list credentials (never secrets)')
    .action(async () => {
      const c = ctx();
      const r = await withAdmin(c.config(), (a) => a.request('cred.list'));
      const list = r['credentials'] as Record<string, unknown>[];
      c.out(
        r,
        list.length
          ? list.map((x) => `${String(x['name'])}\t${String(x['kind'])}\t${String(x['description'] ?? '')}`)
          : '(no credentials)',
      );
    });

  cred
    .command('show')
    .description('show one definition (never the secret)')
    .argument('<name>')
    .action(async (name: string) => {
      const c = ctx();
      const r = await withAdmin(c.config(), (a) => a.request('cred.show', { name }));
      c.out(r, credential().definitionToToml(r['definition'] as CredentialDef));
    });

  cred
    .command('rm')
    .description('remove a credential and destroy its secret')
    .argument('<name>')
    .option('--passphrase-file <file>', 'read the vault passphrase from a file (- for stdin)')
    .action(async (name: string, o: { passphraseFile?: string }) => {
      const c = ctx();
      c.harden('cred');
      await withAdmin(c.config(), async (a) => {
        await showCurrent(a, name);
        const r = await withPassphrase(o, (pass) => a.request('cred.rm', { name }, [pass]));
        c.out(r, `removed credential "${name}"`);
      });
    });
}
