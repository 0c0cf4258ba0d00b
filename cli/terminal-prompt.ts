// A hidden question on the controlling terminal. The answer is read in raw
// mode (no echo). Afterwards, whatever is still arriving (the rest of a
// paste, extra lines) is read and dropped until the terminal has been quiet
// for a moment, and only then is the terminal put back: nothing typed or
// pasted at the prompt is left for the shell to read after postern exits.
// The mode is restored on every path: answer, Ctrl-C, error, signal, exit.
import { constants, openSync, readSync, writeSync, closeSync } from 'node:fs';
import { ReadStream } from 'node:tty';
import { UsageError } from './errors';
import type { SecretCollector } from './secret-collector';

// A paste reaches the terminal in bursts a few milliseconds apart, over a
// slow link perhaps a hundred; a quarter of a second of silence ends it.
export const QUIET_MS = 250;
// Input that never pauses is dropped for this long at most.
export const DRAIN_LIMIT_MS = 5000;
// A key past the size limit is dropped up to its END line; when none comes,
// this much silence ends it.
export const STALL_MS = 2000;

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

// The terminal's descriptor is non-blocking while the stream exists: a
// full output buffer (a stopped terminal) is waited out briefly.
function say(fd: number, text: string): void {
  let rest = Buffer.from(text);
  for (let attempt = 0; rest.length > 0 && attempt < 1000; attempt++) {
    try {
      rest = rest.subarray(writeSync(fd, rest));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') return; // the terminal is gone
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
    }
  }
}

export async function askOnTerminal(prompt: string, what: string, collector: SecretCollector): Promise<Buffer> {
  let fd: number;
  try {
    fd = openSync('/dev/tty', 'r+');
  } catch {
    collector.wipe();
    throw new UsageError(`no terminal to ask for the ${what}; pass it with a --*-file option (see --help)`);
  }
  let input: ReadStream;
  try {
    input = new ReadStream(fd);
  } catch {
    closeSync(fd);
    collector.wipe();
    throw new UsageError(`the terminal cannot be read for the ${what}; pass it with a --*-file option (see --help)`);
  }
  return new Promise((resolve, reject) => {
    let raw = false;
    let failure: unknown = null;
    let draining = false;
    let settled = false;
    let quiet: NodeJS.Timeout | undefined;
    let limit: NodeJS.Timeout | undefined;
    let stall: NodeJS.Timeout | undefined;

    const restore = (): void => {
      if (!raw) return;
      raw = false;
      try {
        input.setRawMode(false);
      } catch {
        // the terminal is gone (hang-up): there is no mode to restore
      }
    };
    const onExit = (): void => restore();
    const onSignal = (signal: NodeJS.Signals): void => {
      finish();
      process.kill(process.pid, signal);
    };
    const guard = (on: boolean): void => {
      if (on) process.on('exit', onExit);
      else process.removeListener('exit', onExit);
      for (const s of SIGNALS) {
        if (on) process.on(s, onSignal);
        else process.removeListener(s, onSignal);
      }
    };

    // Drops what the kernel still holds, right before the mode is restored,
    // so nothing can slip in between. A descriptor of its own, opened
    // non-blocking, so an empty queue ends the loop instead of waiting.
    const dropPending = (): void => {
      let nb: number;
      try {
        nb = openSync('/dev/tty', constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
      } catch {
        return;
      }
      const scratch = Buffer.alloc(4096);
      try {
        for (let i = 0; i < 1024; i++) {
          if (readSync(nb, scratch, 0, scratch.length, null) <= 0) break;
        }
      } catch {
        // EAGAIN: nothing more
      } finally {
        scratch.fill(0);
        closeSync(nb);
      }
    };

    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(quiet);
      clearTimeout(limit);
      clearTimeout(stall);
      input.removeAllListeners('data');
      input.pause();
      if (raw) dropPending();
      restore();
      guard(false);
      say(fd, '\n');
      input.destroy();
      try {
        closeSync(fd);
      } catch {
        // the stream closed it itself (it could not reopen the terminal)
      }
    };

    const settle = (): void => {
      finish();
      if (failure !== null) {
        collector.wipe();
        reject(failure);
      } else {
        resolve(collector.answer());
      }
    };

    const startDraining = (): void => {
      draining = true;
      clearTimeout(stall);
      quiet = setTimeout(settle, QUIET_MS);
      limit = setTimeout(settle, DRAIN_LIMIT_MS);
    };

    input.on('data', (chunk: Buffer) => {
      if (draining) {
        chunk.fill(0);
        clearTimeout(quiet);
        quiet = setTimeout(settle, QUIET_MS);
        return;
      }
      try {
        if (collector.feed(chunk)) startDraining();
        else if (collector.overflowed) {
          clearTimeout(stall);
          stall = setTimeout(() => {
            failure = collector.tooLongError();
            collector.wipe();
            startDraining();
          }, STALL_MS);
        }
      } catch (e) {
        failure = e;
        collector.wipe();
        startDraining();
      }
    });
    input.on('error', (e) => {
      if (draining || settled) return;
      failure = new UsageError(
        `the terminal could not be read for the ${what} (${(e as NodeJS.ErrnoException).code ?? e.message})`,
      );
      settle();
    });
    input.on('end', () => {
      if (draining || settled) return;
      // The terminal hung up: no more input will come.
      if (collector.done) settle();
      else {
        failure = new UsageError('cancelled');
        settle();
      }
    });

    guard(true);
    try {
      input.setRawMode(true);
      raw = true;
    } catch {
      failure = new UsageError(
        `the terminal cannot hide the ${what} (echo cannot be turned off); pass it with a --*-file option (see --help)`,
      );
      settle();
      return;
    }
    // Shown only once echo is off, so nothing typed in answer is echoed.
    say(fd, prompt);
    input.resume();
  });
}
