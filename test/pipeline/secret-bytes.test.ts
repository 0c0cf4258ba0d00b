// An opened secret cannot be serialised: JSON, string conversion and
// template literals throw, util.inspect and the daemon's logger show a
// placeholder, so a secret handed by mistake to a payload, a reply or a log
// line fails or shows nothing of itself. The canary is searched in what
// each path produced.
import t from 'tap';
import { inspect } from 'node:util';
import { Writable } from 'node:stream';
import pino from 'pino';
import { SecretBytes, SecretNotSerialisable } from '../../shared/secret-bytes';
import { findCanary, makeCanary } from '../helpers/canary';

t.test('no conversion gives the bytes away', async (t) => {
  const canary = makeCanary('SECRETBYTES');
  const s = new SecretBytes(Buffer.from(canary));
  t.throws(() => JSON.stringify({ s }), SecretNotSerialisable, 'JSON.stringify');
  t.throws(() => String(s), SecretNotSerialisable, 'String()');
  t.throws(() => `${s as unknown as string}`, SecretNotSerialisable, 'a template literal');
  t.throws(() => (s as unknown as string) + '', SecretNotSerialisable, '+ with a string');
  t.throws(() => s.toString(), SecretNotSerialisable, 'toString()');
  const shown = inspect({ s }, { depth: 5 });
  t.match(shown, /SecretBytes <hidden>/, 'inspect shows a placeholder');
  t.same(findCanary(shown, canary), [], 'and nothing of the secret');
  t.equal(s.bytes.toString(), canary, 'the code that places it reads the bytes');
  s.wipe();
  t.ok(
    s.bytes.every((b) => b === 0),
    'wipe zeroes them',
  );
});

t.test("the daemon's logger never writes it", async (t) => {
  const canary = makeCanary('SECRETLOG');
  let out = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      out += chunk.toString();
      done();
    },
  });
  const log = pino({ level: 'info' }, sink);
  const s = new SecretBytes(Buffer.from(canary));
  let threw = false;
  try {
    log.info({ event: 'oops', secret: s }, 'a secret passed by mistake');
  } catch {
    threw = true;
  }
  log.info({ event: 'after' }, 'the logger still works');
  await new Promise((r) => setImmediate(r));
  t.same(findCanary(out, canary), [], `nothing of the secret in the log (threw: ${threw})`);
  t.match(out, /"event":"after"/, 'and later lines are written');
});
