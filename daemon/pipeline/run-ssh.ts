// POST /v1/ssh: the steps of SPEC §6.1 as they apply to SSH (§6.6), in
// order: validate, the credential exists, policy (the command rules and
// stdin), one resolution with every address classified, approval, audit
// intent, connect to the checked address with the host key checked before
// authentication (or reuse a connection made so), exec, read within limits,
// redact, audit outcome, reply. The secret is opened only to connect.
import { Refusal } from '../../shared/errors';
import { SshCredentialDef, sshPrivateParts } from '../../shared/credential';
import { usableDefinition } from '../vault/unlocked-vault';
import { commandAllowed } from '../../shared/command-rule';
import type { Controller } from '../controller';
import type { Identity } from '../identity/identify';
import { validateSshRequest, parseJsonBody, SshRequest } from './validate';
import { resolveTarget, HostKind } from './resolve';
import { assertAllAllowed } from './classify';
import { buildRedactor, redact, Redactor } from './redact';
import { SshConnections, connectSsh, SshTarget } from '../stores/ssh-connections';
import { execOn, ExecResult, ChannelOpenFailed } from './execute-ssh';
import type { Slot } from '../stores/budgets';
import { who, sha256, refuse, dnsServers, approve } from './steps';
import type { RequestContext } from './steps';
import { isIP } from 'node:net';

// The longest connecting may take (TCP, key exchange with every host key
// type tried, login), also when timeout_ms is longer.
const CONNECT_LIMIT_MS = 20_000;

export interface SshContext {
  controller: Controller;
  ssh: SshConnections;
  identity: Identity;
  signal: AbortSignal;
  slot?: Slot;
  onWaiting?: RequestContext['onWaiting'];
}

function requestFacts(
  req: SshRequest,
  stdinHash: string | null,
  def: SshCredentialDef | null,
): Record<string, unknown> {
  return {
    credential: req.credential,
    command: req.command,
    stdin_bytes: req.stdin?.length ?? 0,
    stdin_sha256: stdinHash,
    ...(def ? { host: def.host, port: def.port, user: def.user, host_key: def.host_key } : {}),
    ...(req.reason !== null ? { reason: req.reason } : {}),
  };
}

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
function needlesOf(def: SshCredentialDef, secret: Buffer): Buffer[] {
  if (def.auth === 'password') return [Buffer.from(secret)];
  const needles = [Buffer.from(secret), ...sshPrivateParts(secret)];
  for (const line of secret.toString('latin1').split('\n')) {
    const l = line.trim();
    if (l.length >= 16 && !l.startsWith('-----')) needles.push(Buffer.from(l, 'latin1'));
  }
  return needles;
}

function hostKind(host: string): HostKind {
  const v = isIP(host);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : 'name';
}

function allUtf8(...parts: Buffer[]): boolean {
  try {
    const d = new TextDecoder('utf-8', { fatal: true });
    for (const p of parts) d.decode(p);
    return true;
  } catch {
    return false;
  }
}

// Reuses a connection or opens one (the secret open only while connecting),
// and runs the command. A kept connection that cannot open a channel is
// dropped and one fresh connection made: the command had not started.
async function run(
  ctx: SshContext,
  t: SshTarget,
  req: SshRequest,
  o: { timeoutMs: number; readLimit: number; keepLimit: number },
): Promise<ExecResult> {
  const vault = ctx.controller.requireUnlocked();
  // Connecting has its own limit; timeout_ms counts from its end (or from
  // taking a kept connection), for opening the channel and the command.
  const open = (preferred?: string) =>
    vault.withCredentialSecret(t.def.name, (secret) =>
      connectSsh(t, secret, Math.min(o.timeoutMs, CONNECT_LIMIT_MS), preferred),
    );
  for (let attempt = 0; ; attempt++) {
    const lease = await ctx.ssh.lease(t, open);
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

export async function runSsh(ctx: SshContext, body: Buffer): Promise<Record<string, unknown>> {
  const c = ctx.controller;
  const vault = c.requireUnlocked();
  const cfg = c.config.config;
  let facts: Record<string, unknown> = { ...who(ctx.identity) };
  try {
    // 1. validate
    const req = validateSshRequest(parseJsonBody(body), {
      maxRequestBody: cfg.http.max_request_body,
      maxTimeout: cfg.http.max_timeout,
    });
    const stdinHash = req.stdin ? sha256(req.stdin) : null;
    facts = { ...facts, ...requestFacts(req, stdinHash, null) };
    // 2. the credential exists
    const stored = vault.credential(req.credential);
    if (!stored)
      throw new Refusal('unknown_credential', `${vault.noSuchCredential(req.credential)}; see GET /v1/credentials`);
    if (stored.entry.kind !== 'ssh')
      throw new Refusal(
        'bad_request',
        `credential "${req.credential}" is an ${stored.entry.kind} credential; use POST /v1/http`,
      );
    const def = usableDefinition(stored);
    if (def.kind !== 'ssh')
      throw new Refusal(
        'internal_error',
        `the stored definition of credential "${req.credential}" is not of its kind; a human must fix it with \`postern cred update ${req.credential}\``,
      );
    facts = { ...facts, ...requestFacts(req, stdinHash, def) };
    // 3. policy: the command rules and stdin, before anything is resolved
    checkSshPolicy(def, req);
    // 4. one resolution; every address classified
    const resolution = await resolveTarget(def.host, hostKind(def.host), {
      dnsServers: dnsServers(cfg.http.dns_servers),
      timeoutMs: Math.min(cfg.ssh.timeout, 10_000),
      nameSource: `the host of credential "${def.name}" (a human can change it with \`postern cred update\`)`,
    });
    assertAllAllowed(
      def.host,
      resolution.addresses.map((a) => a.address),
      def.allow_addresses,
    );
    const pinned = resolution.addresses[0]!;
    facts = { ...facts, address: pinned.address, addresses: resolution.addresses.map((a) => a.address) };
    // 5. approval
    const approval = await approve(ctx, def.name, def.approve, {
      kind: 'ssh',
      host: def.host,
      address: pinned.address,
      port: def.port,
      user: def.user,
      command: req.command,
      stdin_size: req.stdin?.length ?? 0,
      stdin_sha256: stdinHash,
      ...(req.reason !== null ? { reason: req.reason } : {}),
    });
    facts = { ...facts, approval };
    // 7. intent, durable before anything leaves the machine
    const intent = await c.record({ kind: 'ssh_intent', ...facts });
    // 8–9. connect (host key checked first) or reuse, exec, read
    const started = Date.now();
    const cap = cfg.ssh.max_output;
    const redactor = await vault.withCredentialSecret(def.name, async (secret) => {
      const needles = needlesOf(def, secret);
      try {
        return buildRedactor(needles, def.name);
      } finally {
        for (const n of needles) n.fill(0);
      }
    });
    const readLimit = cap + (redactor?.maxMatchLength ?? 0);
    let result: ExecResult;
    try {
      result = await run(ctx, { def, address: pinned.address }, req, {
        timeoutMs: req.timeoutMs ?? cfg.ssh.timeout,
        readLimit,
        keepLimit: cap,
      });
    } catch (e) {
      redactor?.wipe();
      const r = e instanceof Refusal ? e : new Refusal('upstream_error', 'the SSH command failed; see the daemon log');
      // The host keys shown are public: they tell a human what changed.
      const offered =
        r.code === 'host_key_mismatch' ? { offered_host_keys: r.detail?.['offered_host_keys'] ?? [] } : {};
      const out = await c
        .record({
          kind: 'ssh_outcome',
          intent_seq: intent.seq,
          error: r.code,
          maybe_executed: r.maybeExecuted,
          ...offered,
          duration_ms: Date.now() - started,
        })
        .catch(() => null);
      throw new Refusal(r.code, r.message, { ...(r.detail ?? {}), audit_seq: out?.seq ?? intent.seq });
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
    const outcome = await c.recordOutcome({
      kind: 'ssh_outcome',
      intent_seq: intent.seq,
      exit_code: result.exitCode,
      signal: result.signal,
      bytes: result.bytes,
      truncated,
      redactions: stdout.count + stderr.count,
      output_sha256: outputHash,
      duration_ms: Date.now() - started,
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
    return refuse(c, 'ssh', e, facts);
  }
}
