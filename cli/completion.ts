// `postern completion bash|zsh|fish`: a completion script made from the
// command tree itself, so a new command or option is completed the day it is
// added. The scripts complete sub-commands and options; option values that
// are files are left to the shell's own file completion.
import { Command, Option } from 'commander';
import { UsageError } from './errors';

// One command of the tree: its words from the top ("cred add"), its
// sub-commands and its long options.
interface Node {
  path: string;
  subs: string[];
  options: { flag: string; takesValue: boolean; help: string }[];
  help: string;
}

function nodes(program: Command): Node[] {
  const out: Node[] = [];
  const walk = (cmd: Command, path: string[]): void => {
    const visible = cmd.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden);
    out.push({
      path: path.join(' '),
      subs: visible.map((c) => c.name()),
      options: cmd.options
        .filter((o: Option) => o.long !== undefined && !o.hidden)
        .map((o: Option) => ({ flag: o.long as string, takesValue: o.required || o.optional, help: o.description })),
      help: cmd.description(),
    });
    for (const c of visible) walk(c, [...path, c.name()]);
  };
  walk(program, []);
  for (const n of out)
    if (!n.options.some((o) => o.flag === '--help'))
      n.options.push({ flag: '--help', takesValue: false, help: 'show help' });
  return out;
}

// Words are [a-z0-9-] (commander names and long flags); anything else would
// need quoting in three shells, so it is refused rather than emitted.
function safe(word: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9 _-]*$/.test(word.replace(/^--/, '')))
    throw new Error(`completion: unexpected word ${JSON.stringify(word)}`);
  return word;
}

// Descriptions for zsh and fish, inside single quotes.
function quoted(text: string): string {
  return `'${text.replace(/[\x00-\x1f\x7f]/g, ' ').replace(/'/g, `'\\''`)}'`;
}

function bash(tree: Node[]): string {
  const cases = tree.map((n) => {
    const words = [...n.subs, ...n.options.map((o) => o.flag)].map(safe).join(' ');
    const valued = n.options
      .filter((o) => o.takesValue)
      .map((o) => safe(o.flag))
      .join('|');
    return `    ${quoted(n.path)}) words=${quoted(words)}; valued=${quoted(valued)} ;;`;
  });
  return `# bash completion for postern; load it with: source <(postern completion bash)
_postern() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" path="" words="" valued="" i w
  # The command path: the words before the cursor that are neither options
  # nor the values of options.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -- ]] && return
    _postern_node "$path"
    if [[ "$w" != -* && ! ( -n "$prev" && "|$valued|" == *"|$prev|"* ) ]]; then path="\${path:+$path }$w"; fi
    prev="$w"
  done
  _postern_node "$path"
  if [[ "$prev" == -* && "|$valued|" == *"|$prev|"* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
_postern_node() {
  case "$1" in
${cases.join('\n')}
    *) words=""; valued="" ;;
  esac
}
complete -o default -F _postern postern
`;
}

function zsh(tree: Node[]): string {
  const cases = tree.map((n) => {
    const subs = n.subs
      .map((s) => quoted(`${safe(s)}:${tree.find((x) => x.path === (n.path ? `${n.path} ${s}` : s))?.help ?? ''}`))
      .join(' ');
    const opts = n.options.map((o) => quoted(`${safe(o.flag)}:${o.help}`)).join(' ');
    const valued = n.options
      .filter((o) => o.takesValue)
      .map((o) => safe(o.flag))
      .join(' ');
    return `    ${quoted(n.path)}) subs=(${subs}); opts=(${opts}); valued=(${valued}) ;;`;
  });
  return `#compdef postern
# zsh completion for postern; load it with: source <(postern completion zsh)
# (after compinit), or save it as _postern in a directory on $fpath.
_postern_node() {
  case "$1" in
${cases.join('\n')}
    *) subs=(); opts=(); valued=() ;;
  esac
}
_postern() {
  local -a subs opts valued
  local cmdpath="" prev="" w i
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == -- ]] && return 1
    _postern_node "$cmdpath"
    if [[ "$w" != -* ]] && ! (( \${valued[(Ie)$prev]} )); then cmdpath="\${cmdpath:+$cmdpath }$w"; fi
    prev="$w"
  done
  _postern_node "$cmdpath"
  if [[ -n "$prev" ]] && (( \${valued[(Ie)$prev]} )); then _files; return; fi
  if [[ "\${words[CURRENT]}" == -* ]]; then _describe -t options 'postern option' opts; else _describe -t commands 'postern command' subs; fi
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then _postern "$@"; else compdef _postern postern; fi
`;
}

function fish(tree: Node[]): string {
  const lines = [
    '# fish completion for postern; load it with: postern completion fish | source',
    '# (or save it as ~/.config/fish/completions/postern.fish)',
    'complete -c postern -f',
  ];
  for (const n of tree) {
    // fish sees the command path through __fish_seen_subcommand_from; the
    // condition pins this node: its own words seen, none of its sub-commands.
    const own = n.path === '' ? [] : n.path.split(' ');
    const cond = [
      ...own.map((w) => `__fish_seen_subcommand_from ${safe(w)}`),
      ...(n.subs.length ? [`not __fish_seen_subcommand_from ${n.subs.map(safe).join(' ')}`] : []),
    ];
    if (n.path === '') cond.splice(0, cond.length, '__fish_use_subcommand');
    const when = cond.length ? ` -n ${quoted(cond.join('; and '))}` : '';
    for (const s of n.subs) {
      const help = tree.find((x) => x.path === (n.path ? `${n.path} ${s}` : s))?.help ?? '';
      lines.push(`complete -c postern${when} -a ${safe(s)} -d ${quoted(help)}`);
    }
    for (const o of n.options)
      lines.push(
        `complete -c postern${when} -l ${safe(o.flag.replace(/^--/, ''))}${o.takesValue ? ' -r -F' : ''} -d ${quoted(o.help)}`,
      );
  }
  return lines.join('\n') + '\n';
}

export function completionScript(program: Command, shell: string): string {
  const tree = nodes(program);
  if (shell === 'bash') return bash(tree);
  if (shell === 'zsh') return zsh(tree);
  if (shell === 'fish') return fish(tree);
  throw new UsageError(`no completion for the shell ${JSON.stringify(shell)}; say bash, zsh or fish`);
}

export function register(program: Command): void {
  program
    .command('completion')
    .description('print a completion script for bash, zsh or fish')
    .argument('<shell>', 'bash, zsh or fish')
    .action((shell: string) => {
      process.stdout.write(completionScript(program, shell));
    });
}
