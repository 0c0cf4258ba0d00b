// Secrets typed or pasted at `postern cred add`'s hidden prompts, in a real
// terminal (tmux), against the real daemon and Debian's real sshd: private
// keys (OpenSSH ed25519, PEM RSA, PKCS#8 RSA, an encrypted key and then its
// passphrase) pasted in one write and in several writes with pauses longer
// than the prompt's quiet window, each stored so that sshd accepts exactly
// that key; Ctrl-D ending a key; a password pasted with extra lines; a
// paste over the size limit; Ctrl-C in the middle of a paste; SIGTERM at the
// key's passphrase prompt. Each time, after postern exits, a reader
// started in the same terminal finds nothing left to read, the terminal is
// back in its normal mode (echo, canonical), and no line of the key body
// (nor a passphrase or password) was ever shown on the screen.
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { CLI, agentRequest, cliAsync, eventually } from '../helpers/postern';
import { startStack } from '../helpers/stack';
import { startSshd, ClientKeyName } from '../helpers/sshd';
import { sshDefinition } from '../helpers/ssh-credential';
import { Tmux } from '../helpers/tmux';

const PROMPT = /^Private key \(paste it; it ends at its END line, or press Ctrl-D\):$/m;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// Lines of a key file's body: the base64 that must never reach the screen
// or the shell.
function bodyLines(pem: string): string[] {
  return pem.split('\n').filter((l) => l.length >= 32 && !l.startsWith('-----') && !l.includes(':'));
}

// Pieces of the secrets found in `where` (24 characters from each end of
// every secret line, so a line cut by the screen's width still counts).
function shown(where: string, secrets: string[]): string[] {
  const flat = where.replace(/\n/g, '');
  return secrets
    .flatMap((s) => [s.slice(0, 24), s.slice(-24)])
    .filter((piece) => where.includes(piece) || flat.includes(piece));
}

interface Scenario {
  title: string;
  name: string; // the credential
  auth: 'key' | 'password';
  prompt: RegExp;
  // Types or pastes at the prompt; returns checks made meanwhile.
  drive(tm: Tmux): Promise<[string, boolean][]>;
  rc: number;
  outcome: RegExp; // a line of the screen
  secrets: string[]; // never on the screen
  login?: RegExp; // sshd's log line once the credential is used
}

interface Outcome {
  screen: string;
  left: string;
  stty: string[];
  checks: [string, boolean][];
}

t.test('secrets pasted at the hidden prompts of cred add', async (t) => {
  const [sshd, s] = await Promise.all([startSshd({ passwordUser: true }), startStack({ sshConfig: '' })]);
  t.teardown(() => sshd.close());
  t.teardown(() => s.close());
  await s.approver();
  const scratch = mkdtempSync(join(tmpdir(), 'pt-prompt-'));
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = { ...s.h.env };
  delete env['TMUX'];
  let serial = 0;
  const terminals: Tmux[] = [];
  t.teardown(() => terminals.forEach((tm) => tm.kill()));

  const tmux = (tm: Tmux, args: string[], input?: string): string => {
    const r = spawnSync('tmux', ['-L', tm.name, ...args], { env, input, encoding: 'utf8', timeout: 10_000 });
    if (r.status !== 0) throw new Error(`tmux ${args[0]} failed: ${r.stderr}`);
    return r.stdout;
  };
  // As a terminal pastes: each part in one write, line ends sent as CR;
  // tmux itself waits `gap` seconds between parts, so the pauses do not
  // depend on how busy this process is.
  const paste = (tm: Tmux, parts: string[], gap = 0): Promise<void> => {
    const names = parts.map((part) => {
      const buffer = `b${serial++}`;
      tmux(tm, ['load-buffer', '-b', buffer, '-'], part);
      return buffer;
    });
    const args = names.flatMap((b, i) => [
      ...(i > 0 ? [';', 'run-shell', `sleep ${gap}`, ';'] : []),
      'paste-buffer',
      '-d',
      '-b',
      b,
      '-t',
      tm.name,
    ]);
    return new Promise((resolve, reject) => {
      const p = spawn('tmux', ['-L', tm.name, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tmux paste-buffer failed: ${err}`))));
    });
  };
  // The whole scrollback, wrapped lines joined.
  const everything = (tm: Tmux): string =>
    tmux(tm, ['capture-pane', '-p', '-J', '-S', '-', '-t', tm.name]).replace(/[ \t]+$/gm, '');
  const pieces = (text: string, count: number): string[] =>
    Array.from({ length: count }, (_, i) =>
      text.slice(Math.floor((text.length * i) / count), Math.floor((text.length * (i + 1)) / count)),
    );
  // The postern process running in a terminal, found from the pane's shell.
  const posternPid = (tm: Tmux): number => {
    const children = (pid: number): number[] => {
      try {
        return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
      } catch {
        return [];
      }
    };
    const todo = [Number(tmux(tm, ['display-message', '-p', '-t', tm.name, '#{pane_pid}']).trim())];
    for (let pid = todo.shift(); pid !== undefined; pid = todo.shift()) {
      let argv: string[] = [];
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      } catch {
        // gone meanwhile
      }
      if (argv[0] === process.execPath && argv[1] === CLI) return pid;
      todo.push(...children(pid));
    }
    throw new Error('postern is not running in the terminal');
  };
  const credNames = async (): Promise<string[]> => {
    const r = await cliAsync(s.h, ['cred', 'list', '--json']);
    return (JSON.parse(r.stdout) as { credentials: { name: string; kind: string }[] }).credentials
      .filter((c) => c.kind === 'ssh')
      .map((c) => c.name)
      .sort();
  };

  // `cred add` in a terminal of its own; once it exits, the terminal's
  // settings are saved and everything that can still be read there is read
  // (raw, so a partial line counts too; until a second of silence) into a
  // file, as the shell would get it.
  const play = async (sc: Scenario): Promise<Outcome> => {
    const n = serial++;
    const stty = join(scratch, `stty-${n}`);
    const left = join(scratch, `left-${n}`);
    const done = join(scratch, `done-${n}`);
    const def = s.h.file(
      `${sc.name}.toml`,
      sshDefinition({
        name: sc.name,
        port: sshd.port,
        user: sshd.user,
        auth: sc.auth,
        hostKey: sshd.hostKeyFingerprint,
        commands: ['id -un'],
      }),
    );
    const script =
      '"$0" "$1" cred add --file "$2" --passphrase-file "$3"; echo "rc=$?"; stty -a > "$4"; stty -icanon min 0 time 10; cat -v > "$5"; stty sane; echo READER-DONE; : > "$6"';
    const tm = Tmux.start(['/bin/sh', '-c', script, process.execPath, CLI, def, s.h.passFile, stty, left, done], {
      env,
      width: 200,
      height: 50,
    });
    terminals.push(tm);
    await tm.waitFor(sc.prompt, 30_000);
    const checks = await sc.drive(tm);
    if (!(await eventually(() => existsSync(done), 60_000)))
      throw new Error(`the reader did not finish; the screen shows:\n${everything(tm)}`);
    return {
      screen: everything(tm),
      left: readFileSync(left, 'utf8'),
      stty: readFileSync(stty, 'utf8').split(/[\s;]+/),
      checks,
    };
  };

  const key = (k: ClientKeyName, writes: number): Scenario => {
    const material = sshd.keys[k];
    const name = `k-${k.toLowerCase()}-${writes}`;
    return {
      title: `${k} key (${material.privateKey.split('\n')[0]}) pasted in ${writes === 1 ? 'one write' : `${writes} writes with pauses`}`,
      name,
      auth: 'key',
      prompt: PROMPT,
      async drive(tm) {
        // Pauses longer than the quiet window: a key is read to its END line.
        await paste(tm, pieces(material.privateKey, writes), 0.4);
        if (material.passphrase) {
          await tm.waitFor(/^Passphrase of the private key:$/m, 30_000);
          tm.type(material.passphrase);
          tm.send('Enter');
        }
        return [];
      },
      rc: 0,
      outcome: new RegExp(`^added credential "${name}" \\(sha256:[0-9a-f]{64}\\)$`, 'm'),
      secrets: [...bodyLines(material.privateKey), ...(material.passphrase ? [material.passphrase] : [])],
      login: new RegExp(
        `Accepted publickey for ${sshd.user} from 127\\.0\\.0\\.1 port \\d+ ssh2: [A-Z0-9-]+ ${material.fingerprint.replace(/[+/]/g, '\\$&')}`,
      ),
    };
  };

  const bigLines = Array.from({ length: 1000 }, () => randomBytes(52).toString('base64').slice(0, 70));
  const big = `-----BEGIN OPENSSH PRIVATE KEY-----\n${bigLines.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`;
  const password = sshd.password!.password;
  const scenarios: Scenario[] = [
    key('ed25519', 1),
    key('ed25519', 4),
    key('rsaPem', 1),
    key('rsaPem', 4),
    key('encrypted', 1),
    key('encrypted', 4),
    key('rsaPkcs8', 1),
    {
      ...key('ecdsa', 1),
      title: 'Ctrl-D ends a key whose END line has no line end',
      async drive(tm) {
        await paste(tm, [sshd.keys.ecdsa.privateKey.replace(/\n$/, '')]);
        await sleep(500);
        const waiting = !/^rc=/m.test(everything(tm));
        tm.send('C-d');
        return [['still waiting for the end of the key before Ctrl-D', waiting]];
      },
    },
    {
      title: 'SIGTERM at the passphrase prompt that follows a pasted key: the terminal is restored',
      name: 'k-term',
      auth: 'key',
      prompt: PROMPT,
      async drive(tm) {
        await paste(tm, [sshd.keys.encrypted.privateKey]);
        await tm.waitFor(/^Passphrase of the private key:$/m, 30_000);
        process.kill(posternPid(tm), 'SIGTERM');
        return [];
      },
      rc: 143,
      outcome: /^Passphrase of the private key:$/m,
      secrets: bodyLines(sshd.keys.encrypted.privateKey),
    },
    {
      title: 'a password pasted with more lines: only the first is taken, the rest never reaches the shell',
      name: 'pw',
      auth: 'password',
      prompt: /^Password:$/m,
      async drive(tm) {
        await paste(tm, [`${password}\nextra-line-${randomBytes(6).toString('hex')}\n`, 'echo PWNED-$((6*7))\n'], 0.1);
        return [];
      },
      rc: 0,
      outcome: /^added credential "pw" \(sha256:[0-9a-f]{64}\)$/m,
      secrets: [password, 'extra-line-', 'PWNED'],
      login: new RegExp(`Accepted password for ${sshd.user} from 127\\.0\\.0\\.1 port `),
    },
    {
      title: 'a paste over 64 KiB: one clear line, nothing stored, nothing left',
      name: 'k-big',
      auth: 'key',
      prompt: PROMPT,
      async drive(tm) {
        await paste(tm, [big]);
        return [['the paste is over 64 KiB', big.length > 64 * 1024]];
      },
      rc: 1,
      outcome:
        /^postern: the pasted private key is larger than 64 KiB, more than any supported key; check what was pasted, or give the key file with --secret-file$/m,
      secrets: bigLines,
    },
    {
      title: 'Ctrl-C in the middle of a paste cancels; the rest of the paste is dropped',
      name: 'k-cancel',
      auth: 'key',
      prompt: PROMPT,
      async drive(tm) {
        const text = sshd.keys.rsa.privateKey;
        const half = Math.floor(text.length / 2);
        await paste(tm, [text.slice(0, half), `\x03${text.slice(half)}`], 0.1);
        return [];
      },
      rc: 130,
      outcome: /^postern: cancelled \(Ctrl-C\); nothing was done$/m,
      secrets: bodyLines(sshd.keys.rsa.privateKey),
    },
  ];

  // The terminals run a few at a time; each is checked on its own below.
  const outcomes = new Map<Scenario, Outcome | Error>();
  const queue = [...scenarios];
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let sc = queue.shift(); sc; sc = queue.shift()) {
        outcomes.set(sc, await play(sc).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))));
      }
    }),
  );

  for (const sc of scenarios) {
    await t.test(sc.title, async (t) => {
      const o = outcomes.get(sc)!;
      if (o instanceof Error) return t.fail(o.message);
      t.match(o.screen, new RegExp(`^rc=${sc.rc}$`, 'm'), `cred add exited ${sc.rc}`);
      t.match(o.screen, sc.outcome);
      t.notMatch(o.screen, /\n\s+at /, 'no stack trace');
      t.equal(o.left, '', 'nothing was left in the terminal for the next reader');
      t.ok(o.stty.includes('echo') && !o.stty.includes('-echo'), 'echo is back on');
      t.ok(o.stty.includes('icanon') && !o.stty.includes('-icanon'), 'line editing is back on');
      t.ok(o.stty.includes('isig') && !o.stty.includes('-isig'), 'Ctrl-C sends a signal again');
      t.same(shown(o.screen, sc.secrets), [], 'no secret on the screen');
      for (const [what, ok] of o.checks) t.ok(ok, what);
      if (sc.login) {
        const before = sshd.logs().length;
        const r = await agentRequest(s.sock, 'POST', '/v1/ssh', { credential: sc.name, command: 'id -un' });
        t.equal(r.status, 200, r.text.slice(0, 300));
        t.match(r.json, { exit_code: 0, stdout: `${sshd.user}\n`, stderr: '' });
        t.match(sshd.logs().slice(before), sc.login, 'sshd accepted exactly that secret');
      }
    });
  }

  t.same(
    await credNames(),
    scenarios
      .filter((sc) => sc.rc === 0)
      .map((sc) => sc.name)
      .sort(),
    'cred list: the added credentials, nothing from a refused or cancelled paste',
  );
});
