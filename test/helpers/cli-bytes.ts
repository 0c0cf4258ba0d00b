// The real CLI as a child whose stdout is kept as raw bytes (a body, a
// remote command's binary output), optionally piped into a reader that may
// close early: `pipeTo` runs it as `postern … | <pipeTo>` under bash, and
// the result is postern's own exit status.
import { spawn } from 'node:child_process';
import { CLI } from './postern';

export interface BytesResult {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

export function cliBytes(env: NodeJS.ProcessEnv, args: string[], pipeTo?: string): Promise<BytesResult> {
  const argv =
    pipeTo === undefined
      ? ['/usr/bin/env', '-u', 'NODE_OPTIONS', process.execPath, CLI, ...args]
      : [
          '/bin/bash',
          '-c',
          `/usr/bin/env -u NODE_OPTIONS "$@" | ${pipeTo}; exit \${PIPESTATUS[0]}`,
          'bash',
          process.execPath,
          CLI,
          ...args,
        ];
  return new Promise((resolve) => {
    const p = spawn(argv[0]!, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => out.push(d));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr }));
  });
}
