// A child process for test/hardening: calls harden(), then stays alive and
// answers over stdio so a test can signal it and check it still works.
//   exit 3 + "REFUSED <code>: <message>" on stderr when harden() refuses
//   "ready <pid>" on stdout once hardened; "ping" -> "pong"; "exit" -> exit 0
// It installs no SIGUSR1 listener of its own: one would stop the inspector by
// itself and hide whether harden() did.
// With the argument "doctor" it prints doctorEnvironmentFindings() as JSON instead.
import * as readline from 'node:readline';
import { doctorEnvironmentFindings, harden } from '../../shared/hardening';
import { isRefusal } from '../../shared/errors';

if (process.argv[2] === 'doctor') {
  process.stdout.write(JSON.stringify(doctorEnvironmentFindings()));
  process.exit(0);
}

try {
  harden(process.argv[2] ?? 'probe');
} catch (e) {
  if (!isRefusal(e)) throw e;
  process.stderr.write(`REFUSED ${e.code}: ${e.message}\n`);
  process.exit(3);
}

process.stdout.write(`ready ${process.pid}\n`);
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'ping') process.stdout.write('pong\n');
  if (line === 'exit') process.exit(0);
});
