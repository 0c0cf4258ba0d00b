// smol-toml ships a CommonJS build, but its type declarations are ESM-only;
// this one module bridges the two so the rest of the code imports plainly.
import type * as SmolToml from 'smol-toml' with { 'resolution-mode': 'import' };

// eslint-disable-next-line @typescript-eslint/no-require-imports
const toml = require('smol-toml') as typeof SmolToml;

export const parseToml: typeof SmolToml.parse = toml.parse;
export const stringifyToml: typeof SmolToml.stringify = toml.stringify;
export const TomlError: typeof SmolToml.TomlError = toml.TomlError;

// A syntax error said in the words of someone who wrote the file. smol-toml
// reports a string left open at the end of its line as "control characters
// are not allowed in strings" (the newline is the control character), which
// sends the reader looking for something that is not there. Only positions
// are used: the document itself is never quoted (it may hold a pasted secret).
export function tomlSyntaxProblem(e: InstanceType<typeof SmolToml.TomlError>, text: string): string {
  const what = (e.message.split('\n')[0] ?? '').replace(/^Invalid TOML document:\s*/, '');
  const line = text.split('\n')[e.line - 1] ?? '';
  const at = line[e.column - 1];
  if (/control characters are not allowed in strings/.test(what) && (at === undefined || at === '\r')) {
    return `a string is not closed before the end of line ${e.line}; end it with the quote it began with (use """ or ''' for a string of several lines)`;
  }
  if (/trying to redefine an already defined table or value/.test(what)) {
    return /^\s*\[/.test(line)
      ? `the table opened on line ${e.line} is already defined above (each [table] may appear once); put these settings under the first one`
      : `the key on line ${e.line} is already set above (each key may be set once); keep one of them`;
  }
  if (/unfinished string/.test(what)) {
    return `the string that begins at line ${e.line}, column ${e.column} is never closed; end it with the quote it began with`;
  }
  return what;
}
