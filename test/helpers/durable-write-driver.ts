// A child process that performs real durable writes, for tests that need to
// watch them from outside (strace) or kill them mid-write (kill -9).
//
// Test side: `buildDriver()` transpiles this file and the shared modules it
// reaches into a temp dir, so the child runs on plain `node` (no TypeScript
// loader, no NODE_OPTIONS) whether or not dist/ has been built.
// Child side (run as a script):
//   node driver.js write <target> <bytes>    one writeFileDurable of <bytes> bytes
//   node driver.js loop <vault> <key-hex>    rewrite the vault forever; each
//        generation n holds meta {n} and one blob of blobBytes(n) bytes of
//        blobFill(n). Prints "ready" after its first rewrite.
//   node driver.js read <vault>              readVaultFile; prints the outcome as
//        JSON (used to run it as another uid)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeFileDurable } from '../../shared/durable-write';
import { sodiumReady } from '../../shared/crypto';
import { decryptVault, readVaultFile, rewriteVaultFile, VaultContents } from '../../shared/vault-format';
import { Refusal } from '../../shared/errors';

// The repository, looked up on the test side only: the child runs from a
// temp dir, where no package.json lies above it.
const repo = (): string => (require('./repo-root') as typeof import('./repo-root')).ROOT;

// What a complete vault of generation n contains: tests check every byte.
export function blobBytes(n: number): number {
  return 64 * 1024 + (n % 7) * 4096;
}
export function blobFill(n: number): number {
  return n % 251;
}
export function contentsFor(n: number): VaultContents {
  return { meta: { n }, blobs: [Buffer.alloc(blobBytes(n), blobFill(n))] };
}

let built: string | null = null;

// Returns the path of the runnable driver. Follows relative imports from this
// file, transpiling each .ts into the same relative place under a temp dir.
export function buildDriver(): string {
  if (built) return built;
  // Loaded lazily: the child never needs the compiler.
  const ts = require('typescript') as typeof import('typescript');
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'postern-driver-'));
  // Readable by other uids: tests run it unprivileged too. Nothing secret.
  fs.chmodSync(out, 0o755);
  process.once('exit', () => fs.rmSync(out, { recursive: true, force: true }));
  const pending = [path.join(repo(), 'test', 'helpers', 'durable-write-driver.ts')];
  const seen = new Set<string>();
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    const source = fs.readFileSync(file, 'utf8');
    for (const imp of ts.preProcessFile(source, true, true).importedFiles) {
      if (imp.fileName.startsWith('.')) pending.push(path.resolve(path.dirname(file), `${imp.fileName}.ts`));
    }
    const js = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      fileName: file,
    }).outputText;
    const dest = path.join(out, path.relative(repo(), file)).replace(/\.ts$/, '.js');
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, js);
  }
  built = path.join(out, 'test', 'helpers', 'durable-write-driver.js');
  return built;
}

// The command line that runs the driver: through `env -u NODE_OPTIONS`,
// because tap's processinfo re-adds its loader to NODE_OPTIONS of every child
// it sees spawned (and an unprivileged child could not write its report).
// NODE_PATH makes node_modules reachable from the temp dir.
export function driverArgv(...args: string[]): string[] {
  return [
    'env',
    '-u',
    'NODE_OPTIONS',
    `NODE_PATH=${path.join(repo(), 'node_modules')}`,
    process.execPath,
    buildDriver(),
    ...args,
  ];
}

async function loop(vault: string, key: Buffer): Promise<never> {
  await sodiumReady();
  let first = true;
  for (;;) {
    const { header } = decryptVault(fs.readFileSync(vault), key);
    rewriteVaultFile(vault, key, header, contentsFor(header.generation + 1));
    if (first) {
      process.stdout.write('ready\n');
      first = false;
    }
  }
}

function main(argv: string[]): void {
  const [mode, target, arg] = argv;
  if (mode === 'write' && target && arg) {
    writeFileDurable(target, Buffer.alloc(Number(arg), 0x5a));
    return;
  }
  if (mode === 'loop' && target && arg) {
    loop(target, Buffer.from(arg, 'hex')).catch((e: unknown) => {
      process.stderr.write(`driver: ${String(e)}\n`);
      process.exit(1);
    });
    return;
  }
  if (mode === 'read' && target) {
    try {
      process.stdout.write(JSON.stringify({ bytes: readVaultFile(target).length }));
    } catch (e) {
      process.stdout.write(JSON.stringify(e instanceof Refusal ? e.toJSON() : { error: String(e) }));
    }
    return;
  }
  process.stderr.write('usage: driver read <vault> | write <target> <bytes> | loop <vault> <key-hex>\n');
  process.exit(2);
}

if (require.main === module) main(process.argv.slice(2));
