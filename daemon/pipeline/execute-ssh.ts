// Run one command over an exec channel (SPEC §6.6): no pty, no
// environment; stdin written and closed; stdout and stderr read together up
// to a limit (what arrives beyond it is drained and dropped, so the command
// can finish and report its exit status); on timeout (counted from the
// request for the channel) the remote command is signalled (TERM, then
// KILL) and the channel closed.
import type { Client, ClientChannel } from 'ssh2';
import { Refusal } from '../../shared/errors';

export interface ExecOptions {
  command: string;
  stdin: Buffer | null;
  timeoutMs: number; // for opening the channel and running the command
  readLimit: number; // stdout + stderr bytes kept
  keepLimit: number; // of which the first `keepLimit` bytes, in arrival order, may be returned
}

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  // How much of each stream arrived before the total reached keepLimit.
  stdoutKeep: number;
  stderrKeep: number;
  complete: boolean; // false when output beyond readLimit was dropped
  bytes: number; // all output, kept or not
}

// Time the command has to exit after TERM before it gets KILL.
const KILL_AFTER_MS = 1_000;
// Time the channel has to close after KILL before postern gives up on it.
const CLOSE_AFTER_MS = 1_000;

// Listeners go on in the exec callback itself: ssh2 may emit 'exit' while
// parsing the very packet that carried the exec reply, before an awaiting
// caller would run.
function openChannel(
  client: Client,
  command: string,
  attach: (channel: ClientChannel) => void,
): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    try {
      client.exec(command, { pty: false }, (err, stream) => {
        if (err) return reject(err);
        attach(stream);
        resolve(stream);
      });
    } catch (e) {
      reject(e);
    }
  });
}

export class ChannelOpenFailed extends Error {}

// The server had not confirmed the exec request in time. The request may
// have reached it, so the command may run; the connection must go (closing
// it is what stops a late channel), which the caller does by discarding it.
function openWithin(
  client: Client,
  command: string,
  attach: (channel: ClientChannel) => void,
  ms: number,
  host: string,
): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(
        new Refusal(
          'upstream_timeout',
          `${host} did not start the command in time (its exec channel was not confirmed); it may yet run — check before retrying`,
          { maybe_executed: true },
        ),
      );
    }, ms);
    openChannel(client, command, (channel) => {
      if (late) {
        signalChannel(channel, 'TERM');
        channel.close();
        return;
      }
      attach(channel);
    }).then(
      (channel) => {
        clearTimeout(timer);
        if (!late) resolve(channel);
      },
      () => {
        clearTimeout(timer);
        if (!late) reject(new ChannelOpenFailed(`could not open an exec channel on ${host}`));
      },
    );
  });
}

// The signal names of RFC 4254 §6.10, as ssh2 reports them ("SIG" + the
// name the server sent). The name is the server's text, and a hostile
// server may send anything there, a secret it learned at login included:
// only a name from this table is returned and journaled; any other is
// "SIGUNKNOWN" (the command still ended by a signal).
const SIGNAL_NAMES = new Set(
  ['ABRT', 'ALRM', 'FPE', 'HUP', 'ILL', 'INT', 'KILL', 'PIPE', 'QUIT', 'SEGV', 'TERM', 'USR1', 'USR2'].map(
    (n) => `SIG${n}`,
  ),
);

export function signalName(reported: string): string {
  return SIGNAL_NAMES.has(reported) ? reported : 'SIGUNKNOWN';
}

// ssh2 sends a signal request only while our side of the channel is still
// writable, but stdin has been closed (EOF) by then, as any SSH client does.
// The request is still valid in SSH after EOF (RFC 4254 §6.9 needs only an
// open channel), so it is sent through ssh2's protocol object, checked to
// be there; if it is not, ssh2's own method is the fallback.
interface ChannelInternals {
  outgoing?: { id?: unknown; state?: unknown };
  _client?: { _protocol?: { signal?: unknown } };
}

export function signalChannel(channel: ClientChannel, name: 'TERM' | 'KILL'): void {
  const inner = channel as unknown as ChannelInternals;
  const proto = inner._client?._protocol as { signal?: (id: number, name: string) => void } | undefined;
  const id = inner.outgoing?.id;
  const state = inner.outgoing?.state;
  if (typeof proto?.signal === 'function' && typeof id === 'number' && (state === 'open' || state === 'eof')) {
    proto.signal(id, name);
    return;
  }
  channel.signal(name);
}

export async function execOn(client: Client, host: string, o: ExecOptions): Promise<ExecResult> {
  const started = Date.now();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let kept = 0;
  let total = 0;
  let stdoutKeep = 0;
  let stderrKeep = 0;
  let complete = true;
  let exitCode: number | null = null;
  let signal: string | null = null;
  let timedOut = false;
  let settled = false;
  let closed = false;
  let failed = false;
  let wake: () => void = () => undefined;
  const take = (into: Buffer[], isOut: boolean) => (chunk: Buffer) => {
    total += chunk.length;
    const room = o.readLimit - kept;
    if (room <= 0) {
      complete = false;
      return;
    }
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (part.length < chunk.length) complete = false;
    const beforeCap = Math.max(0, Math.min(part.length, o.keepLimit - kept));
    if (isOut) stdoutKeep += beforeCap;
    else stderrKeep += beforeCap;
    kept += part.length;
    into.push(Buffer.from(part));
  };
  const attach = (channel: ClientChannel): void => {
    channel.on('data', take(out, true));
    channel.stderr.on('data', take(err, false));
    const onExit = (code: unknown, sig: unknown): void => {
      if (typeof code === 'number') exitCode = code;
      if (typeof sig === 'string') signal = signalName(sig);
    };
    channel.on('exit', onExit);
    channel.on('close', (code: unknown, sig: unknown) => {
      // 'close' repeats the exit status: a second source for it.
      if (exitCode === null && signal === null) onExit(code, sig);
      closed = true;
      wake();
    });
    channel.on('error', () => {
      failed = true;
      wake();
    });
  };
  // A refused channel (ChannelOpenFailed): the command was not started, and
  // the caller may try a fresh connection.
  const channel = await openWithin(client, o.command, attach, o.timeoutMs, host);
  return new Promise((resolve, reject) => {
    const timers: NodeJS.Timeout[] = [];
    const finish = (): void => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      if ((failed && !closed) || (!timedOut && exitCode === null && signal === null)) {
        reject(
          new Refusal(
            'upstream_error',
            `the SSH channel to ${host} failed while the command ran; it may have had effects — check before retrying`,
            { maybe_executed: true },
          ),
        );
        return;
      }
      if (timedOut) {
        reject(
          new Refusal(
            'upstream_timeout',
            `the command on ${host} did not finish in time; it was signalled (TERM, then KILL) and its channel closed — it may have had effects, check before retrying`,
            { maybe_executed: true },
          ),
        );
        return;
      }
      resolve({
        exitCode,
        signal,
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
        stdoutKeep,
        stderrKeep,
        complete,
        bytes: total,
      });
    };
    wake = finish;
    if (closed || failed) {
      finish();
      return;
    }
    timers.push(
      setTimeout(
        () => {
          timedOut = true;
          signalChannel(channel, 'TERM');
          timers.push(
            setTimeout(() => {
              signalChannel(channel, 'KILL');
              channel.close();
              timers.push(setTimeout(finish, CLOSE_AFTER_MS));
            }, KILL_AFTER_MS),
          );
        },
        Math.max(0, o.timeoutMs - (Date.now() - started)),
      ),
    );
    if (o.stdin) channel.end(o.stdin);
    else channel.end();
  });
}
