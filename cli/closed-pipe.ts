// A reader that goes away (`postern … | head`) ends the command quietly
// (SPEC §5). Node ignores SIGPIPE, so a write to a closed stdout or stderr
// fails with EPIPE, and an unhandled stream error would end the process
// with a stack trace. Imported first by cli/main.ts, for every command.
//
// A closed pipe ends the process at once with the exit code decided so far
// (process.exitCode: 0 unless the command already set one, e.g. `request
// ssh` the remote command's status). Any other write failure (a full disk
// under `> file`) is one line on stderr and exit 1.
function ended(stream: 'stdout' | 'stderr'): (e: NodeJS.ErrnoException) => void {
  return (e) => {
    if (e.code === 'EPIPE' || e.code === 'ERR_STREAM_DESTROYED') process.exit();
    // A command that watches its own output (`audit show`) says it better.
    if (process[stream].listenerCount('error') > 1) return;
    // Said on stderr unless stderr is what failed; either way, no stack.
    if (stream === 'stdout') {
      try {
        process.stderr.write(`postern: cannot write to stdout (${e.code ?? e.message}); check where the output goes\n`);
      } catch {
        // stderr is gone too; the exit code says it.
      }
    }
    process.exit(1);
  };
}

process.stdout.on('error', ended('stdout'));
process.stderr.on('error', ended('stderr'));
