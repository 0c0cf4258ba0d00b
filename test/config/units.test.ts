// Durations and sizes as the config writes them: accepted forms, every kind
// of refusal naming the key path, and display round-trips.
import t from 'tap';
import { isRefusal, Refusal } from '../../shared/errors';
import { formatDuration, formatSize, parseDuration, parseSize } from '../../shared/units';

function refusalOf(fn: () => unknown): Refusal {
  try {
    fn();
  } catch (e) {
    if (isRefusal(e)) return e;
    throw e;
  }
  throw new Error('expected a Refusal, got a value');
}

t.test('durations: integer and unit, in milliseconds', async (t) => {
  const good: [string, number][] = [
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['8h', 28_800_000],
    ['1d', 86_400_000],
    ['120s', 120_000],
    ['24d', 24 * 86_400_000],
  ];
  for (const [text, ms] of good) t.equal(parseDuration(text, 'http.timeout'), ms, text);
});

t.test('durations: bad values are refused naming the path', async (t) => {
  const bad: [unknown, RegExp][] = [
    ['', /not a duration/],
    ['-1s', /negative/],
    [' -5m', /negative/],
    ['1.5s', /fractions/],
    ['.5h', /fractions/],
    ['10 parsecs', /not a duration/],
    ['10parsecs', /unknown unit "parsecs"/],
    ['10S', /unknown unit "S"/],
    ['10', /not a duration/],
    ['s', /not a duration/],
    ['0s', /more than zero/],
    ['25d', /at most 24d/],
    ['9999999999999999999ms', /at most 24d/],
    [30, /must be a duration string/],
    [null, /must be a duration string/],
  ];
  for (const [text, why] of bad) {
    const r = refusalOf(() => parseDuration(text, 'daemon.auto_lock'));
    t.equal(r.code, 'bad_config', `${String(text)}: code`);
    t.same(r.detail?.problems, [{ path: 'daemon.auto_lock', message: r.message.replace(/^daemon\.auto_lock: /, '') }]);
    t.match(r.message, /^daemon\.auto_lock: /, `${String(text)}: names the path`);
    t.match(r.message, why, `${String(text)}: says why`);
  }
});

t.test('sizes: binary and decimal units, in bytes', async (t) => {
  const good: [string, number][] = [
    ['512B', 512],
    ['64KiB', 65_536],
    ['1MiB', 1_048_576],
    ['8MiB', 8_388_608],
    ['1GiB', 1_073_741_824],
    ['1KB', 1000],
    ['5MB', 5_000_000],
    ['1GB', 1_000_000_000],
  ];
  for (const [text, bytes] of good) t.equal(parseSize(text, 'http.max_request_body'), bytes, text);
});

t.test('sizes: bad values are refused naming the path', async (t) => {
  const bad: [unknown, RegExp][] = [
    ['-1MiB', /negative/],
    ['1.5MiB', /fractions/],
    ['1mib', /unknown unit "mib"/],
    ['1TiB', /unknown unit "TiB"/],
    ['2GiB', /at most 1GiB/],
    ['0B', /more than zero/],
    ['8 MiB', /not a size/],
    [1048576, /must be a size string/],
  ];
  for (const [text, why] of bad) {
    const r = refusalOf(() => parseSize(text, 'http.max_request_body'));
    t.equal(r.code, 'bad_config');
    t.equal((r.detail?.problems as { path: string }[])[0]?.path, 'http.max_request_body');
    t.match(r.message, why, String(text));
  }
});

t.test('the refusal code can be chosen by the caller', async (t) => {
  t.equal(refusalOf(() => parseDuration('x', 'rate', 'invalid_definition')).code, 'invalid_definition');
  t.equal(refusalOf(() => parseSize('x', 'limit', 'bad_request')).code, 'bad_request');
});

t.test('format picks the largest exact unit and round-trips', async (t) => {
  t.equal(formatDuration(28_800_000), '8h');
  t.equal(formatDuration(1500), '1500ms');
  t.equal(formatDuration(90_000), '90s');
  t.equal(formatDuration(0), '0ms');
  t.equal(formatSize(8_388_608), '8MiB');
  t.equal(formatSize(1_000_000), '1MB');
  t.equal(formatSize(1536), '1536B');
  t.equal(formatSize(0), '0B');
  for (const text of ['500ms', '30s', '10m', '8h', '1d', '86401s'])
    t.equal(formatDuration(parseDuration(text, 'x')), text);
  for (const text of ['512B', '64KiB', '1MiB', '1GiB', '1KB', '3MB']) t.equal(formatSize(parseSize(text, 'x')), text);
});
