// smol-toml ships a CommonJS build, but its type declarations are ESM-only;
// this one module bridges the two so the rest of the code imports plainly.
import type * as SmolToml from 'smol-toml' with { 'resolution-mode': 'import' };

// eslint-disable-next-line @typescript-eslint/no-require-imports
const toml = require('smol-toml') as typeof SmolToml;

export const parseToml: typeof SmolToml.parse = toml.parse;
export const stringifyToml: typeof SmolToml.stringify = toml.stringify;
export const TomlError: typeof SmolToml.TomlError = toml.TomlError;
