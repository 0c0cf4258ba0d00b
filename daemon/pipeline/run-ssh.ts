// An SSH command through the steps of SPEC §6.1 as they apply to SSH
// (§6.6), in order (the request arrives validated): the credential exists, policy (the command rules and
// stdin), one resolution with every address classified, approval, audit
// intent, connect to the checked address with the host key checked before
// authentication (or reuse a connection made so), exec, read within limits,
// redact, audit outcome, reply. The secret is opened only to connect.
import { refuseIfRequesterLeft } from './requester-gone';
import { Refusal } from '../../shared/errors';
import { SshCredentialDef, sshPrivateParts } from '../../shared/credential';
import { credentialOfKind } from './credential';
import { commandAllowed } from '../../shared/command-rule';
import type { Scalar, SshRequestFacts } from '../../shared/events';
import type { SecretBytes } from '../../shared/secret-bytes';
import type { SshReply } from '../../shared/protocol';
import type { SshRequest } from './validate';
import { dnsServers, resolveTarget, HostKind } from './resolve';
import { assertAllAllowed } from './classify';
import { buildRedactor, joinRedactors, redact, Redactor } from './redact';
import type { SshTarget } from '../stores/ssh-connections';
import { connectSsh } from './connect-ssh';
import { execOn, ExecResult, ChannelOpenFailed } from './execute-ssh';
import { approve } from './approve';
import type { PipelineServices, RequestContext } from './context';
import { Evidence, resolutionFacts, sha256, sshIntent, sshRequestFacts, who } from './evidence';
import { lockedMeanwhile, outcomeNotJournaled, refuseAfterIntent, refuseSsh } from './refuse';
import { mostlyControl } from './response';
import { isIP } from 'node:net';

// The longest connecting may take (TCP, key exchange with every host key
// type tried, login), also when timeout_ms is longer.
const CONNECT_LIMIT_MS = 20_000;

// Step 3: the command and stdin against the credential.
export function checkSshPolicy(def: SshCredentialDef, req: SshRequest): void {
  if (!commandAllowed(def.commands, req.command)) {
    throw new Refusal(
      'denied_policy',
      `credential "${def.name}" does not allow this command; the allowed commands are: ${def.commands.map((c) => JSON.stringify(c)).join(', ')} (a rule ending in * admits further plain words only: no ;, |, $, quotes, redirections or options)`,
    );
  }
  if (req.stdin && !def.stdin) {
    throw new Refusal('denied_policy', `credential "${def.name}" allows no stdin; send the request without stdin`);
  }
}

// What an output could show of the secret: for a password, the password;
// for a key, the stored key text, each of its base64 lines, and the private
// components themselves (found in any key format, at any alignment of
// base64, in hex).
function needlesOf(def: SshCredentialDef, opened: SecretBytes): Buffer[] {
  const secret = opened.bytes;
  if (def.auth === 'password') return [Buffer.from(secret)];
  const needles = [Buffer.from(secret), ...sshPrivateParts(secret)];
  for (const line of secret.toString('latin1').split('\n')) {
    const l = line.trim();
    if (l.length >= 16 && !l.startsWith('-----')) needles.push(Buffer.from(l, 'latin1'));
  }
  return needles;
}

function redactorOf(def: SshCredentialDef, secret: SecretBytes): Redactor | null {
  const needles = needlesOf(def, secret);
  try {
    return buildRedactor(needles, def.name);
  } finally {
    for (const n of needles) n.fill(0);
  }
}

// The request's redactor joined with those of the former versions for the
// same host (a password or key a `cred update` or `cred rm` replaced, which
// the host may still print: stores/former-values.ts), each occurrence
// marked with the name of the credential whose value it is. Built for the
// request; wipe() wipes every part.
async function withFormer(s: PipelineServices, def: SshCredentialDef, own: Redactor | null): Promise<Redactor | null> {
  const parts: Redactor[] = own ? [own] : [];
  try {
    for (const v of s.stores.former.versions()) {
      const former = v.definition;
      if (former.kind !== 'ssh' || former.host !== def.host) continue;
      const r = await s.vault().withReplacedSecret(v.secret, async (secret) => redactorOf(former, secret));
      if (r) parts.push(r);
    }
  } catch (e) {
    for (const p of parts) p.wipe();
    throw e;
  }
  if (parts.length < 2) return parts[0] ?? null;
  const joined = joinRedactors(parts, def.name, null, true);
  return {
    ...joined,
    wipe() {
      joined.wipe();
      for (const p of parts) p.wipe();
    },
  };
}

function hostKind(host: string): HostKind {
  const v = isIP(host);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : 'name';
}

// Text when every part is UTF-8 and not mostly control characters (each
// would take six bytes in the JSON reply; see response.ts).
function allUtf8(...parts: Buffer[]): boolean {
  try {
    const d = new TextDecoder('utf-8', { fatal: true });
    for (const p of parts) if (mostlyControl(d.decode(p))) return false;
    return true;
  } catch {
    return false;
  }
}

// Reuses a connection or opens one (the secret open only while connecting),
// and runs the command. A kept connection that cannot open a channel is
// dropped and one fresh connection made: the command had not started.
async function run(
  ctx: RequestContext,
  t: SshTarget,
  req: SshRequest,
  o: { timeoutMs: number; readLimit: number; keepLimit: number },
): Promise<ExecResult> {
  const vault = ctx.services.vault();
  // Connecting has its own limit; timeout_ms counts from its end (or from
  // taking a kept connection), for opening the channel and the command.
  const open = (preferred?: string) =>
    vault.withCredentialSecret(t.def, (secret) =>
      connectSsh(t, secret, Math.min(o.timeoutMs, CONNECT_LIMIT_MS), preferred),
    );
  for (let attempt = 0; ; attempt++) {
    const lease = await ctx.services.stores.ssh.lease(t, open);
    try {
      const r = await execOn(lease.client, t.def.host, {
        command: req.command,
        stdin: req.stdin,
        timeoutMs: o.timeoutMs,
        readLimit: o.readLimit,
        keepLimit: o.keepLimit,
      });
      lease.release();
      return r;
    } catch (e) {
      lease.discard();
      if (!(e instanceof ChannelOpenFailed)) throw e;
      if (lease.reused && attempt === 0) continue;
      throw new Refusal('upstream_error', `${t.def.host} would not open an exec channel; the command was not started`);
    }
  }
}

// What of one stream may be returned: what arrived before the total reached
// the cap, and, when output was dropped, nothing in the last occurrence
// length of what was kept (an occurrence there could be cut short).
function keptPart(r: Redactor | null, data: Buffer, keep: number, complete: boolean): ReturnType<typeof redact> {
  const margin = r?.maxMatchLength ?? 0;
  const cut = complete ? keep : Math.min(keep, Math.max(0, data.length - margin));
  return redact(r, data, cut);
}

export async function runSsh(ctx: RequestContext, req: SshRequest): Promise<SshReply> {
  const s = ctx.services;
  const vault = s.vault();
  const cfg = s.config();
  const ev: Evidence<SshRequestFacts> = { requester: who(ctx.identity) };
  try {
    const stdinHash = req.stdin ? sha256(req.stdin) : null;
    ev.request = sshRequestFacts(req, stdinHash, null);
    // 2. the credential exists
    const def = credentialOfKind(s, req.credential, 'ssh');
    const request = (ev.request = sshRequestFacts(req, stdinHash, def));
    // 3. policy: the command rules and stdin, before anything is resolved
    checkSshPolicy(def, req);
    // 4. one resolution; every address classified
    const resolution = await s.untilLocked(
      resolveTarget(def.host, hostKind(def.host), {
        dnsServers: dnsServers(cfg.http.dns_servers),
        timeoutMs: Math.min(cfg.ssh.timeout, 10_000),
        nameSource: `the host of credential "${def.name}" (a human can change it with \`postern cred update\`)`,
      }),
    );
    assertAllAllowed(
      def.host,
      resolution.addresses.map((a) => a.address),
      def.allow_addresses,
    );
    const pinned = resolution.addresses[0]!;
    const resolved = (ev.resolution = resolutionFacts(resolution.addresses));
    // 5. approval
    const approval = (ev.approval = await approve(ctx, def, def.approve, {
      kind: 'ssh',
      host: def.host,
      address: pinned.address,
      port: def.port,
      user: def.user,
      command: req.command,
      stdin_size: req.stdin?.length ?? 0,
      stdin_sha256: stdinHash,
      ...(req.reason !== null ? { reason: req.reason } : {}),
    }));
    refuseIfRequesterLeft(ctx);
    // 7. intent, durable before anything leaves the machine
    const intent = await s.journal.record(
      sshIntent({ requester: ev.requester, request, resolution: resolved, approval }),
    );
    // 8–9. connect (host key checked first) or reuse, exec, read
    const started = Date.now();
    const cap = cfg.ssh.max_output;
    let redactor: Redactor | null = null;
    let result: ExecResult;
    try {
      // Past the intent, every failure is its outcome: the credential
      // removed or changed, or the vault locked, since the intent too.
      redactor = await withFormer(
        s,
        def,
        await vault.withCredentialSecret(def, async (secret) => redactorOf(def, secret)),
      );
      const readLimit = cap + (redactor?.maxMatchLength ?? 0);
      result = await run(ctx, { def, address: pinned.address }, req, {
        timeoutMs: req.timeoutMs ?? cfg.ssh.timeout,
        readLimit,
        keepLimit: cap,
      });
    } catch (e) {
      redactor?.wipe();
      const r = lockedMeanwhile(
        s,
        e instanceof Refusal ? e : new Refusal('upstream_error', 'the SSH command failed; see the daemon log'),
      );
      // The host keys shown are public: they tell a human what changed.
      const offered =
        r.code === 'host_key_mismatch' ? { offered_host_keys: offeredHostKeys(r.detail?.['offered_host_keys']) } : {};
      throw await refuseAfterIntent(s, intent, r, {
        kind: 'ssh_outcome',
        intent_seq: intent.seq,
        error: r.code,
        maybe_executed: r.maybeExecuted,
        ...offered,
        duration_ms: Date.now() - started,
      });
    }
    // Redact each stream; keep, in arrival order, at most max_output bytes.
    const stdout = keptPart(redactor, result.stdout, result.stdoutKeep, result.complete);
    const stderr = keptPart(redactor, result.stderr, result.stderrKeep, result.complete);
    redactor?.wipe();
    const truncated = !result.complete || result.bytes > cap || stdout.cut || stderr.cut;
    const text = allUtf8(stdout.data, stderr.data);
    // Of what is returned, after redaction: a hash of the raw output would
    // let the journal confirm a guess of the secret the command printed.
    const outputHash = sha256(Buffer.concat([stdout.data, stderr.data]));
    // 10. outcome
    const outcome = await s.journal
      .recordOutcome({
        kind: 'ssh_outcome',
        intent_seq: intent.seq,
        exit_code: result.exitCode,
        signal: result.signal,
        bytes: result.bytes,
        truncated,
        redactions: stdout.count + stderr.count,
        output_sha256: outputHash,
        duration_ms: Date.now() - started,
      })
      .catch((e: unknown) => {
        throw outcomeNotJournaled(
          intent,
          e,
          `the command ended with ${result.signal ?? `exit code ${result.exitCode}`}`,
        );
      });
    // 11. reply
    return {
      exit_code: result.exitCode,
      signal: result.signal,
      stdout: text ? stdout.data.toString('utf8') : stdout.data.toString('base64'),
      stderr: text ? stderr.data.toString('utf8') : stderr.data.toString('base64'),
      encoding: text ? 'utf8' : 'base64',
      truncated,
      redactions: stdout.count + stderr.count,
      target: { host: def.host, address: pinned.address, port: def.port },
      audit_seq: outcome.seq,
    };
  } catch (e) {
    if (e instanceof Refusal && e.auditSeq !== undefined) throw e;
    return refuseSsh(s, e, ev);
  }
}

// The host keys a server offered, as its refusal carries them: public keys
// (type, fingerprint, key), each a flat record of text.
function offeredHostKeys(v: unknown): Record<string, Scalar>[] {
  if (!Array.isArray(v)) return [];
  return v.filter(
    (k): k is Record<string, Scalar> =>
      typeof k === 'object' && k !== null && Object.values(k).every((x) => x === null || typeof x !== 'object'),
  );
}
