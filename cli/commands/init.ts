// init: create the home, the config (unless one exists), the vault with its
// audit keys, and approve the config. No daemon involved.
import { Command } from 'commander';
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { Context } from '../context';
import { getNewPassphrase } from '../prompt';
import { Refusal } from '../../shared/errors';
import { initialConfigText, loadConfig } from '../../shared/config';
import { writeFileDurable } from '../../shared/durable-write';
import { KDF_PRESETS } from '../../shared/kdf';
import type { VaultMeta } from '../../shared/vault-meta';
import { formatHead } from '../../shared/audit-format';
import { checkHome } from '../../daemon/home-check';
import { UsageError } from '../errors';

type Ctx = () => Context;

// Files a fresh home may already hold: nothing, or the config the user wrote.
const ALLOWED_IN_NEW_HOME = new Set(['config.toml']);

function prepareHome(home: string): void {
  if (!existsSync(home)) {
    mkdirSync(home, { mode: 0o700 });
    return;
  }
  if (lstatSync(home).isSymbolicLink())
    throw new Refusal('bad_config', `the postern home ${home} is a symlink; use a real directory`);
  checkHome(home);
  const extra = readdirSync(home).filter((f) => !ALLOWED_IN_NEW_HOME.has(f));
  if (extra.length > 0) {
    throw new Refusal(
      'conflict',
      `the postern home ${home} is not empty (${extra.slice(0, 5).join(', ')}); use an empty directory or another home`,
    );
  }
}

export function register(program: Command, ctx: Ctx): void {
  program
    .command('init')
    .description('create the home, config, vault, audit keys and proxy CA; approve the config')
    .option(
      '--kdf <level>',
      'Argon2id limits: moderate (default), interactive (weaker; for tests), sensitive',
      'moderate',
    )
    .option('--passphrase-file <file>', 'read the new passphrase from a file (- for stdin)')
    .action(async (o: { kdf: string; passphraseFile?: string }) => {
      const c = ctx();
      c.harden('init');
      const preset = (KDF_PRESETS as Record<string, { opslimit: number; memlimit: number }>)[o.kdf];
      if (!Object.prototype.hasOwnProperty.call(KDF_PRESETS, o.kdf) || !preset)
        throw new UsageError(`--kdf must be one of ${Object.keys(KDF_PRESETS).join(', ')}`);
      const first = c.config(true);
      if (existsSync(first.paths.vault))
        throw new Refusal(
          'conflict',
          `a vault already exists at ${first.paths.vault}; postern init never overwrites one (use \`postern passwd\` to change the passphrase)`,
        );
      process.umask(0o077);
      prepareHome(first.home);
      if (!first.exists) writeFileDurable(first.configPath, Buffer.from(initialConfigText(), 'utf8'), 0o600);
      const config = loadConfig({ configFlag: c.opts.config, env: c.env });
      const pass = await getNewPassphrase(o.passphraseFile);
      // Crypto modules load on demand (libsodium's wasm takes a moment).
      const { createVaultFile } = require('../../shared/vault-format') as typeof import('../../shared/vault-format');
      const { ed25519Keypair, sodiumReady, wipe, x25519Keypair } =
        require('../../shared/crypto') as typeof import('../../shared/crypto');
      await sodiumReady();
      const sign = ed25519Keypair();
      const box = x25519Keypair();
      const audit = {
        sign_public: sign.publicKey.toString('base64'),
        box_public: box.publicKey.toString('base64'),
        sign_secret: 0,
        box_secret: 1,
      };
      // The proxy front door's CA (SPEC §11): its key goes into the vault,
      // its certificate into ca.pem for the clients that must trust it.
      const { createLocalCa, writeCaPem } =
        require('../../daemon/proxy/local-ca') as typeof import('../../daemon/proxy/local-ca');
      const ca = await createLocalCa();
      // The journal first: the vault records which journal it belongs to and
      // the journal's head (its genesis entry).
      const { createJournal } = require('../../daemon/audit/journal') as typeof import('../../daemon/audit/journal');
      const journal = await createJournal(config.paths.auditLog, {
        signPublic: audit.sign_public,
        boxPublic: audit.box_public,
      });
      const meta: VaultMeta = {
        format: 1,
        created_at: new Date().toISOString(),
        audit,
        credentials: [],
        journal_id: journal.journalId,
        journal_head: formatHead(journal.head.seq, journal.head.hash),
        proxy_ca: { cert_pem: ca.certPem, key: 2 },
      };
      try {
        writeCaPem(config.paths.caPem, ca.certPem);
        const { key } = await createVaultFile(config.paths.vault, pass, preset, config.canonical, {
          meta,
          blobs: [Buffer.from(sign.privateKey), Buffer.from(box.privateKey), Buffer.from(ca.key)],
        });
        wipe(key);
      } catch (e) {
        // Leave no journal or ca.pem without its vault, so init can simply be re-run.
        rmSync(config.paths.auditLog, { force: true });
        rmSync(config.paths.caPem, { force: true });
        throw e;
      } finally {
        pass.fill(0);
        wipe(sign.privateKey);
        wipe(box.privateKey);
        wipe(ca.key);
      }
      c.out(
        {
          home: config.home,
          config: config.configPath,
          vault: config.paths.vault,
          audit_log: config.paths.auditLog,
          kdf: o.kdf,
          config_hash: config.hash,
          audit_public_key: meta.audit.sign_public,
          ca_pem: config.paths.caPem,
          ca_fingerprint: ca.fingerprint,
        },
        [
          `created ${config.paths.vault} (kdf ${o.kdf})`,
          `config ${config.configPath} approved (${config.hash})`,
          `audit public key: ${meta.audit.sign_public}`,
          `proxy CA certificate ${config.paths.caPem} (\`postern ca\` prints it)`,
          'keep the audit public key somewhere an agent cannot write; next: `postern daemon`, then `postern unlock`',
        ],
      );
    });
}
