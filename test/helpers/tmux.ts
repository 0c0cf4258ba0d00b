// A real terminal for tests: a command in a detached tmux session of a fixed
// size, on a tmux server of its own (its own socket), so the session's
// environment is exactly the one given here and tests never share a server.
// The pane stays after the command exits, so its last screen can still be
// read; the exit status is written to a file by the shell that runs the
// command (tmux's own #{pane_dead_status} was seen empty for a dead pane
// under load).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let counter = 0;

export interface TmuxOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  width?: number;
  height?: number;
}

function shellQuote(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

export class Tmux {
  private constructor(
    readonly name: string,
    private readonly socket: string,
    private readonly dir: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  private get exitFile(): string {
    return join(this.dir, 'exit-status');
  }

  // `argv` runs through `env -u NODE_OPTIONS`: tap puts its own
  // NODE_OPTIONS into every child's environment, and postern refuses it.
  static start(argv: string[], o: TmuxOptions = {}): Tmux {
    const dir = mkdtempSync(join(tmpdir(), 'pt-tmux-'));
    const conf = join(dir, 'tmux.conf');
    writeFileSync(conf, 'set -g remain-on-exit on\nset -g status off\nset -g history-limit 10000\n');
    const name = `pt${process.pid}x${counter++}`;
    const env = { ...(o.env ?? process.env) };
    delete env['TMUX'];
    const t = new Tmux(name, name, dir, env);
    const run = 'env -u NODE_OPTIONS "$@"; echo $? > "$0.tmp" && mv "$0.tmp" "$0"';
    const command = ['/bin/sh', '-c', run, t.exitFile, ...argv].map(shellQuote).join(' ');
    t.tmux([
      '-f',
      conf,
      'new-session',
      '-d',
      '-s',
      name,
      '-x',
      String(o.width ?? 200),
      '-y',
      String(o.height ?? 50),
      ...(o.cwd ? ['-c', o.cwd] : []),
      command,
    ]);
    return t;
  }

  private tmux(args: string[]): string {
    const r = spawnSync('tmux', ['-L', this.socket, ...args], { env: this.env, encoding: 'utf8', timeout: 10_000 });
    if (r.status !== 0)
      throw new Error(`tmux ${args[0] === '-f' ? args[2] : args[0]} failed (${r.status}): ${r.stderr}`);
    return r.stdout;
  }

  // The visible screen as plain text (no escape sequences), lines joined by
  // newlines, trailing blanks trimmed.
  screen(): string {
    return this.tmux(['capture-pane', '-p', '-t', this.name])
      .replace(/[ \t]+$/gm, '')
      .replace(/\n+$/, '');
  }

  // Key names as tmux knows them (`Enter`, `C-c`, `Escape`), or text.
  send(...keys: string[]): void {
    this.tmux(['send-keys', '-t', this.name, ...keys]);
  }

  // Text sent literally, character by character, in one write.
  type(text: string): void {
    this.tmux(['send-keys', '-t', this.name, '-l', text]);
  }

  // Wait until the screen matches; returns the screen, or throws with it.
  async waitFor(re: RegExp, ms = 10_000): Promise<string> {
    const deadline = Date.now() + ms;
    let last = '';
    for (;;) {
      last = this.screen();
      if (re.test(last)) return last;
      if (Date.now() > deadline) throw new Error(`screen did not match ${re} within ${ms} ms; it shows:\n${last}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  // Whether the pane's command has ended (by exit or signal). Under load
  // the "Pane is dead" line can be late to the screen; the flag is not.
  dead(): boolean {
    return this.tmux(['display-message', '-p', '-t', this.name, '#{pane_dead}']).trim() === '1';
  }

  // The command's exit status once it has exited, else null.
  exitStatus(): number | null {
    let text: string;
    try {
      text = readFileSync(this.exitFile, 'utf8');
    } catch {
      return null;
    }
    return /^\d+\n$/.test(text) ? Number(text) : null;
  }

  async waitExit(ms = 10_000): Promise<number> {
    const deadline = Date.now() + ms;
    for (;;) {
      const s = this.exitStatus();
      if (s !== null) return s;
      if (Date.now() > deadline)
        throw new Error(`the command in tmux did not exit within ${ms} ms; the screen shows:\n${this.screen()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  kill(): void {
    spawnSync('tmux', ['-L', this.socket, 'kill-server'], { env: this.env, timeout: 10_000 });
    rmSync(this.dir, { recursive: true, force: true });
  }
}
