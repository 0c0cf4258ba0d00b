// What every command shares: the global options, the config, and printing
// (human text, or one JSON document with --json).
import { loadConfig, loadConfigLeniently, LoadedConfig } from '../shared/config';
import { harden } from '../shared/hardening';
import { escapeInvisible } from '../shared/units';

export interface GlobalOptions {
  config?: string;
  json?: boolean;
}

export class Context {
  private loaded: LoadedConfig | null = null;
  constructor(
    readonly opts: GlobalOptions,
    readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  get json(): boolean {
    return Boolean(this.opts.json);
  }

  config(allowMissing = false): LoadedConfig {
    this.loaded ??= loadConfig({ configFlag: this.opts.config, env: this.env, allowMissing });
    return this.loaded;
  }

  // For lock, session revocation and status: a config that does not load
  // (the agent may write it) still reaches the running daemon, with the
  // settings that are valid and a warning; see loadConfigLeniently.
  configToStop(): LoadedConfig {
    if (this.loaded) return this.loaded;
    const { loaded, problem } = loadConfigLeniently({ configFlag: this.opts.config, env: this.env });
    if (problem !== null)
      process.stderr.write(
        `postern: warning: ${escapeInvisible(problem)}\npostern: warning: going on with the settings that are still valid (admin socket ${escapeInvisible(loaded.paths.adminSocket)}); fix the config, then \`postern config approve\`\n`,
      );
    this.loaded = loaded;
    return loaded;
  }

  // Commands that touch a passphrase, a secret or an approval harden first.
  // `role` is the command ("unlock", "cred"); harden() names it "postern <role>".
  harden(role: string): void {
    harden(role);
  }

  // Human lines go to stdout in text mode; in JSON mode only `data` is printed.
  out(data: Record<string, unknown>, text: string | string[]): void {
    if (this.json) process.stdout.write(JSON.stringify(data, null, 2) + '\n');
    else {
      const lines = Array.isArray(text) ? text : [text];
      if (lines.length) process.stdout.write(lines.join('\n') + '\n');
    }
  }

  // Informational output shown before a question (e.g. the normalised
  // definition): stdout in text mode, stderr in JSON mode so stdout stays
  // one JSON document.
  info(text: string): void {
    (this.json ? process.stderr : process.stdout).write(text.endsWith('\n') ? text : text + '\n');
  }
}
