// Reading the config file and the CA file it names, each refused with a
// message that says what is wrong with the file and what to do.
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import { Refusal } from './errors';
import { parseToml, TomlError, tomlSyntaxProblem } from './toml';
import { pemBlocks } from './ca-list';
import { fileRefusal } from './config-validate';

const MAX_CONFIG_BYTES = 1024 * 1024;
const MAX_CA_BYTES = 10 * 1024 * 1024;

function errnoCode(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? String(e);
}

// Reads the config without following a symlink at the last component: the
// file decides what the daemon trusts, so it must be the file named, not
// whatever a link points at. Returns null when there is no file.
export function readConfigFile(file: string): string | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return null;
    throw fileRefusal(
      file,
      `cannot read the config file (${errnoCode(e)}); check the path and its permissions, or pass --config FILE`,
    );
  }
  if (st.isSymbolicLink()) {
    throw fileRefusal(
      file,
      'the config file is a symbolic link, which postern refuses; replace the link with the file itself, or pass --config with the real path',
    );
  }
  if (!st.isFile())
    throw fileRefusal(file, 'the config file is not a regular file; point --config (or POSTERN_CONFIG) at a TOML file');
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    throw fileRefusal(file, `cannot open the config file (${errnoCode(e)}); check its permissions`);
  }
  try {
    const fst = fs.fstatSync(fd);
    if (!fst.isFile() || fst.ino !== st.ino || fst.dev !== st.dev) {
      throw fileRefusal(file, 'the config file changed while it was being read; try again');
    }
    if (fst.size > MAX_CONFIG_BYTES)
      throw fileRefusal(file, `the config file is larger than ${MAX_CONFIG_BYTES} bytes; it is not a postern config`);
    const bytes = fs.readFileSync(fd);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw fileRefusal(file, 'the config file is not valid UTF-8; save it as UTF-8 text');
    }
  } finally {
    fs.closeSync(fd);
  }
}

export function parseTomlText(file: string, text: string): Record<string, unknown> {
  try {
    // An integer beyond 2^53 is kept as a BigInt, so the check of its key
    // refuses it by name (a range error), rather than a syntax error.
    return parseToml(text, { unsafeKeyBehaviour: 'throw', integersAsBigInt: 'asNeeded' });
  } catch (e) {
    if (e instanceof TomlError) {
      const summary = tomlSyntaxProblem(e, text);
      const problem = {
        path: `[syntax] line ${e.line}, column ${e.column}`,
        message: `${summary}; fix the TOML syntax there`,
      };
      throw new Refusal(
        'bad_config',
        `${file}: not valid TOML: ${problem.path}: ${summary}. Fix the syntax there and try again`,
        {
          problems: [problem],
        },
      );
    }
    throw e;
  }
}

// The CA file is followed through symlinks (system bundles are often links)
// but must end at a regular file of PEM certificates that Node can parse.
export function readCaFile(file: string): { ok: true; value: Buffer } | { ok: false; message: string } {
  let bytes: Buffer;
  try {
    const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile())
        return { ok: false, message: `${file} is not a regular file; name a PEM file of CA certificates` };
      if (st.size > MAX_CA_BYTES)
        return {
          ok: false,
          message: `${file} is larger than ${MAX_CA_BYTES} bytes; name a PEM file of CA certificates`,
        };
      bytes = fs.readFileSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    return { ok: false, message: `cannot read ${file} (${errnoCode(e)}); fix the path, or set ca_file = "" for none` };
  }
  const blocks = pemBlocks(bytes);
  if (blocks.length === 0) {
    return {
      ok: false,
      message: `${file} holds no PEM certificate ("-----BEGIN CERTIFICATE-----"); name a PEM file of CA certificates`,
    };
  }
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch {
      return {
        ok: false,
        message: `${file}: certificate ${i + 1} of ${blocks.length} cannot be parsed; replace the file with valid PEM certificates`,
      };
    }
  }
  return { ok: true, value: bytes };
}
