// The examples every command's --help ends with (SPEC §5), by command path.
// A command without an entry here fails a test, so none is forgotten.
import { Command } from 'commander';

export const EXAMPLES: Readonly<Record<string, readonly string[]>> = {
  '': ['postern init', 'postern daemon &', 'postern unlock', 'postern cred add --file github.toml', 'postern approver'],
  init: [
    'postern init',
    'postern init --kdf sensitive',
    'POSTERN_HOME=/srv/postern postern init --passphrase-file pass.txt',
  ],
  daemon: ['postern daemon', 'postern --config /etc/postern/config.toml daemon'],
  unlock: ['postern unlock', 'postern unlock --passphrase-file <(op read op://vault/postern/passphrase)'],
  lock: ['postern lock'],
  status: ['postern status', 'postern status --json | jq .locked'],
  passwd: ['postern passwd', 'postern passwd --passphrase-file old.txt --new-passphrase-file new.txt'],
  config: ['postern config approve'],
  'config approve': ['postern config approve', 'postern config approve --passphrase-file pass.txt'],
  cred: ['postern cred list', 'postern cred add --file github.toml', 'postern cred show github'],
  'cred add': [
    'postern cred add --file github.toml',
    'postern cred add --file github.toml --secret-file <(op read op://vault/github/token)',
    'postern cred add --file deploy-box.toml --secret-file ~/.ssh/deploy_ed25519',
  ],
  'cred update': [
    'postern cred update github --file github.toml',
    'postern cred update github --file github.toml --secret-file new-token.txt',
  ],
  'cred list': ['postern cred list', 'postern cred list --json'],
  'cred show': ['postern cred show github', 'postern cred show github --json'],
  'cred rm': ['postern cred rm github'],
  doctor: ['postern doctor', 'postern doctor --json'],
  audit: [
    'postern audit verify --pubkey <key printed by init>',
    'postern audit head',
    'postern audit show --since 100',
  ],
  'audit verify': [
    'postern audit verify',
    'postern audit verify --pubkey <key printed by init> --expect-head 1842:<hash>',
    'postern audit verify --log /backup/audit.log --allow-unsigned-tail',
  ],
  'audit head': ['postern audit head', 'postern audit head >> ~/postern-heads.txt'],
  'audit show': ['postern audit show', 'postern audit show --since 1800 --json | jq .kind'],
  'audit rotate-key': ['postern audit rotate-key'],
  request: [
    'postern request http --credential github --url https://api.github.com/user',
    'postern request ssh --credential deploy-box --command "systemctl status app"',
  ],
  'request http': [
    'postern request http --credential github --url https://api.github.com/repos/acme/app/issues > issues.json',
    'postern request http --credential github -X POST --url https://api.github.com/repos/acme/app/issues --data \'{"title":"x"}\' -H "content-type: application/json" --reason "file the bug the user asked for"',
    'postern request http --credential files --url https://files.example.com/v1/logo.png -o logo.png --fail',
  ],
  'request ssh': [
    'postern request ssh --credential deploy-box --command "systemctl status app"',
    'postern request ssh --credential deploy-box --command "git -C /srv/app pull"',
    'postern request ssh --credential deploy-box --command "tee /srv/app/motd" --stdin-file motd.txt',
  ],
  approver: [
    'postern approver',
    'postern approver --auto deny',
    'postern approver --auto approve --passphrase-file pass.txt   # tests and scripted set-ups only',
  ],
  sessions: ['postern sessions', 'postern sessions revoke 3f2a', 'postern sessions revoke --all'],
  'sessions revoke': ['postern sessions revoke 3f2a', 'postern sessions revoke --all'],
  mcp: [
    'claude mcp add postern -- postern mcp',
    'postern mcp   # speaks MCP on stdin/stdout; started by the MCP client',
  ],
  run: [
    'postern run -- gh pr list',
    'postern run --credential github -- git push',
    'postern run --credential openai -- python agent.py',
  ],
  'systemd-unit': [
    'postern systemd-unit > ~/.config/systemd/user/postern.service && systemctl --user daemon-reload',
    'postern --config /etc/postern/config.toml systemd-unit',
  ],
  ca: ['postern ca', 'postern ca --json | jq -r .pem > postern-ca.pem'],
  completion: [
    'source <(postern completion bash)',
    'postern completion zsh > "${fpath[1]}/_postern"',
    'postern completion fish > ~/.config/fish/completions/postern.fish',
  ],
};

export function commandPath(cmd: Command): string {
  const words: string[] = [];
  for (let c: Command | null = cmd; c && c.parent; c = c.parent) words.unshift(c.name());
  return words.join(' ');
}

// Every command in the tree, the top one included.
export function allCommands(program: Command): Command[] {
  const out: Command[] = [];
  const walk = (c: Command): void => {
    out.push(c);
    for (const s of c.commands) walk(s);
  };
  walk(program);
  return out;
}

export function addExamples(program: Command): void {
  for (const cmd of allCommands(program)) {
    const examples = EXAMPLES[commandPath(cmd)];
    if (examples) cmd.addHelpText('after', `\nExamples:\n${examples.map((e) => `  $ ${e}`).join('\n')}`);
  }
}
