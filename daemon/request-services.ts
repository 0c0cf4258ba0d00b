// What the daemon lends the request pipeline (daemon/pipeline/context.ts),
// built once from the controller: live views of the config and the lock,
// the journal, sessions and approvals, and the stores that outlive a
// request. Every front door serves its requests with this one object. The
// stores are emptied or retired when the authority behind them goes: at
// lock, when a session ends, when a credential changes, and when the CA
// list or the DNS servers change.
import type { SealedSecret } from './vault/sealed-secrets';
import type { Controller } from './controller';
import { Refusal } from '../shared/errors';
import type { HttpReply } from '../shared/protocol';
import type { PipelineServices, RequestStores } from './pipeline/context';
import { RefusalSummaries } from './audit/refusal-summary';
import { PinnedPools } from './stores/pinned-pools';
import { SshConnections } from './stores/ssh-connections';
import { IdempotencyStore } from './stores/idempotency';
import { InFlight, RateBudgets } from './stores/budgets';
import { Runs } from './stores/runs';
import { TokenCache } from './pipeline/computed/github-app';
import { RedactorCache } from './stores/redactors';
import { FormerValues } from './stores/former-values';
import { buildRedactor, joinRedactors } from './pipeline/redact';
import { LeafCertificates, storeCaAtFirstUse } from './proxy/leaf-certs';

export function createPipelineServices(controller: Controller): PipelineServices & { leaves: LeafCertificates } {
  const stores: RequestStores = {
    pools: new PinnedPools(() => controller.config.caFileContents),
    ssh: new SshConnections(() => controller.config.config.ssh.connection_idle),
    idempotency: new IdempotencyStore<HttpReply>(),
    budgets: new RateBudgets(),
    inFlight: new InFlight(() => controller.config.config.http.max_concurrent),
    runs: new Runs((run, reason) => controller.recorder.bestEffort({ kind: 'run_end', run: run.id, reason })),
    tokens: new TokenCache(),
    redactors: new RedactorCache(buildRedactor, (parts, label) => joinRedactors(parts, label, null, true)),
    former: new FormerValues(),
  };
  const journal = {
    record: controller.record.bind(controller),
    recordOutcome: controller.recordOutcome.bind(controller),
  };
  const refusals = new RefusalSummaries(
    (e) => journal.record(e),
    () => controller.config.config.audit.refusal_burst,
  );
  // The proxy front door's leaf certificates, signed by the vault's CA.
  const leaves = new LeafCertificates({
    vault: () => controller.requireUnlocked(),
    lockEpoch: () => controller.lockEpoch,
    leafValidity: () => controller.config.config.proxy.leaf_validity,
    storeCa: (vault, ca) => storeCaAtFirstUse(controller.writes, controller.config.paths.caPem, vault, ca),
  });
  // Waits the lock ends (untilLocked), told at the lock with its refusal.
  const lockWaiters = new Set<(refusal: unknown) => void>();
  // Nothing a request left behind outlives the authority that allowed it;
  // summaries still counting are journaled at the lock.
  controller.onLock(() => {
    for (const told of [...lockWaiters]) told(controller.lockRefusal);
    lockWaiters.clear();
    leaves.purge();
    void refusals.flushAll();
    void stores.pools.closeAll();
    stores.ssh.closeAll();
    stores.idempotency.purgeAll();
    stores.runs.endAll('locked');
    stores.tokens.clear();
    stores.former.clear();
    stores.redactors.clear();
  });
  controller.onTrustChange(({ dns }) => {
    stores.pools.retireAll();
    if (dns) stores.ssh.retireAll();
  });
  controller.onSessionEnd((s) => stores.idempotency.purgeScope(`session:${s.id}`));
  controller.onCredentialChange(({ name, former }) => {
    // The replaced version is kept for redaction until the lock (see
    // stores/former-values.ts); the redactors of those that no longer fit go.
    if (former.definition)
      for (const key of stores.former.keep(former.definition, former.secret)) stores.redactors.forget(key);
    stores.pools.retireCredential(name);
    stores.ssh.retireCredential(name);
    stores.budgets.forget(name);
    stores.tokens.forget(name);
    stores.redactors.forget(name);
    // Removed (not updated): its placeholders stop resolving, and its
    // idempotency records go (a credential added again under the name is
    // another). An update keeps them: SPEC §6.5 purges on lock, revoke and
    // session end only, and a retry of a request sent before the change
    // (which completes) must not run it a second time; a definition that no
    // longer allows the request refuses it before the lookup.
    if (!controller.locked && !controller.requireUnlocked().credential(name)) {
      stores.runs.forgetCredential(name);
      stores.idempotency.purgeCredential(name);
    }
  });
  // The vault write bracket (journal, vault, journal), as for admin writes;
  // the stores keep what they hold: the definition did not change. The
  // refresh token replaced is not kept as a former value: rotation spends
  // it (the server refuses it from then on), and keeping it would push the
  // versions a human replaced out of the store.
  const secrets = {
    replace: async (credential: string, secret: Buffer, spent: SealedSecret): Promise<void> => {
      const vault = controller.requireUnlocked();
      const sealed = vault.sealSecret(secret);
      // Read at the write, after any write queued before it.
      await controller.writes.write(vault, { kind: 'oauth_refresh_rotated', credential }, (m) => {
        const current = m.get(credential);
        if (!current) throw new Refusal('unknown_credential', `credential "${credential}" was removed meanwhile`);
        // A human stored another secret while the token was obtained: theirs
        // stays (the rotated token belongs to the one they replaced).
        if (current.secret !== spent)
          throw new Refusal(
            'busy',
            `credential "${credential}" was changed while its access token was being obtained; the request was not sent — retry it`,
          );
        m.set(credential, {
          ...current,
          entry: { ...current.entry, updated_at: new Date().toISOString() },
          secret: sealed,
        });
      });
    },
  };
  return {
    config: () => controller.config.config,
    vault: () => controller.requireUnlocked(),
    lockEpoch: () => controller.lockEpoch,
    untilLocked: <T>(p: Promise<T>): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        lockWaiters.add(reject);
        const done = (): boolean => lockWaiters.delete(reject);
        p.then(
          (v) => void (done() && resolve(v)),
          (e: unknown) => void (done() && reject(e)),
        );
      }),
    journal,
    refusals,
    sessions: controller.sessions,
    approvals: controller.approvals,
    stores,
    secrets,
    leaves,
  };
}
