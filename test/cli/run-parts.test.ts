// Two parts of `postern run`'s proxy on real sockets and processes: the
// lookup of which of CMD's descendants opened a connection (/proc/net/tcp
// and tcp6 → socket inode → /proc/<pid>/fd), "unknown" whenever it is not a
// descendant's or is gone; and the request head's bounds (size, time,
// shape), each a HeadProblem saying what is wrong.
import t from 'tap';
import type { Test } from 'tap';
import net from 'node:net';
import { spawn, ChildProcess } from 'node:child_process';
import { connectionClient as lookUp, SocketTables } from '../../cli/run/client-pid';
import { HeadProblem, readRequestHead } from '../../cli/run/request-head';
import { refuseFailure } from '../../cli/run/relay';

// One lookup as the relay makes it: a ticket taken for the connection,
// then the lookup (each with tables of its own, so no read is shared).
function connectionClient(
  root: number | null,
  clientPort: number,
  serverPort: number,
  clientAddress = '127.0.0.1',
): string {
  const tables = new SocketTables();
  return lookUp(tables, tables.accepted(), root, on(clientAddress, clientPort, serverPort));
}

function on(clientAddress: string, clientPort: number, serverPort: number) {
  return { clientAddress, clientPort, serverAddress: '127.0.0.1', serverPort };
}

function listen(): Promise<net.Server> {
  return new Promise((resolve) => {
    const s = net.createServer(() => undefined);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

// A Node process (under `sh -c` when `viaShell`) that connects to `port`
// at `host`, prints "<pid> <local port>" and holds the connection.
function connector(
  port: number,
  host: string,
  viaShell: boolean,
): Promise<{ proc: ChildProcess; pid: number; localPort: number }> {
  const code = `const s = require('node:net').connect({ port: ${port}, host: '${host}' }, () => process.stdout.write(process.pid + ' ' + s.localPort + '\\n')); setTimeout(() => {}, 30000);`;
  const proc = viaShell
    ? spawn('sh', ['-c', `"$0" -e "$1"; :`, process.execPath, code], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve) =>
    proc.stdout!.once('data', (d: Buffer) => {
      const [pid, localPort] = d.toString().trim().split(' ').map(Number);
      resolve({ proc, pid: pid!, localPort: localPort! });
    }),
  );
}

// A listening server for the test, its connections closed at the end.
async function serverPort(t: Test): Promise<number> {
  const server = await listen();
  const sockets = new Set<net.Socket>();
  server.on('connection', (s) => sockets.add(s));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return (server.address() as net.AddressInfo).port;
}

// `n` connectors at once, killed at the end; and each one's lookup with a
// ticket taken for it now, all against the same tables.
async function connectors(t: Test, port: number, host: string, n: number) {
  const all = await Promise.all(Array.from({ length: n }, () => connector(port, host, false)));
  t.teardown(() => {
    for (const c of all) c.proc.kill('SIGKILL');
  });
  return all;
}
function lookUpAll(tables: SocketTables, clients: { localPort: number }[], port: number): string[] {
  const tickets = clients.map(() => tables.accepted());
  return clients.map((c, i) => lookUp(tables, tickets[i]!, process.pid, on('127.0.0.1', c.localPort, port)));
}

t.test('the client of a proxy connection is found among the descendants of CMD', async (t) => {
  const port = await serverPort(t);

  const child = await connector(port, '127.0.0.1', false);
  t.teardown(() => child.proc.kill('SIGKILL'));
  t.equal(connectionClient(child.pid, child.localPort, port), String(child.pid), 'CMD itself');
  t.equal(connectionClient(process.pid, child.localPort, port), String(child.pid), 'a child of the root');
  t.equal(connectionClient(null, child.localPort, port), 'unknown', 'no CMD yet');
  t.equal(
    connectionClient(child.pid, child.localPort, port + 1 === 65536 ? 1 : port + 1),
    'unknown',
    'another server port',
  );

  const nested = await connector(port, '127.0.0.1', true);
  t.teardown(() => {
    process.kill(nested.pid, 'SIGKILL');
    nested.proc.kill('SIGKILL');
  });
  t.not(nested.pid, nested.proc.pid, 'the connector is the shell’s child');
  t.equal(
    await connectionClient(nested.proc.pid!, nested.localPort, port),
    String(nested.pid),
    'a grandchild is named',
  );
  t.equal(connectionClient(child.pid, nested.localPort, port), 'unknown', "another process's connection");

  // Another program connecting from another loopback address with the
  // same port number as CMD's connection: the port alone matched it to
  // CMD's socket, and it was served as CMD.
  const twin = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2', localPort: child.localPort });
  await new Promise((r) => twin.once('connect', r));
  t.equal(
    connectionClient(child.pid, child.localPort, port, '127.0.0.2'),
    'unknown',
    "a connection from 127.0.0.2 with the port of CMD's",
  );
  t.equal(connectionClient(child.pid, child.localPort, port), String(child.pid), "CMD's own is still CMD's");
  twin.destroy();

  const mine = net.connect(port, '127.0.0.1');
  await new Promise((r) => mine.once('connect', r));
  t.equal(connectionClient(child.pid, mine.localPort!, port), 'unknown', 'a connection from outside the tree');
  mine.destroy();

  const v6 = await connector(port, '::ffff:127.0.0.1', false);
  t.teardown(() => v6.proc.kill('SIGKILL'));
  t.equal(connectionClient(v6.pid, v6.localPort, port), String(v6.pid), 'a dual-stack socket, in /proc/net/tcp6');

  child.proc.kill('SIGKILL');
  await new Promise((r) => child.proc.once('exit', r));
  t.equal(connectionClient(process.pid, child.localPort, port), 'unknown', 'a client that is gone');
});

t.test('a read of the tables answers the lookups of connections accepted before it began', async (t) => {
  const port = await serverPort(t);
  const clients = await connectors(t, port, '127.0.0.1', 16);

  // Sixteen connections accepted, then looked up: one read of the IPv4
  // table answers all of them, each with its own client.
  const tables = new SocketTables();
  t.same(
    lookUpAll(tables, clients, port),
    clients.map((c) => String(c.pid)),
    'each connection named by its own client',
  );
  t.same(tables.reads(), [1, 0], 'one read of /proc/net/tcp, none of tcp6');

  // A connection accepted after a read began is not answered by it: that
  // read may have passed its socket by. It gets a read of its own.
  const late = await connector(port, '127.0.0.1', false);
  t.teardown(() => late.proc.kill('SIGKILL'));
  const lateTicket = tables.accepted();
  t.equal(
    lookUp(tables, lateTicket, process.pid, on('127.0.0.1', late.localPort, port)),
    String(late.pid),
    'the later connection',
  );
  t.same(tables.reads(), [2, 0], 'found by a read of its own');
  t.equal(lookUp(tables, 4, process.pid, on('127.0.0.1', clients[3]!.localPort, port)), String(clients[3]!.pid));
  t.same(tables.reads(), [2, 0], 'an earlier connection again: the last read answers it');

  // Not found in the IPv4 table: the IPv6 one is read, also once for many.
  const v6 = await connectors(t, port, '::ffff:127.0.0.1', 4);
  const six = new SocketTables();
  t.same(
    lookUpAll(six, v6, port),
    v6.map((c) => String(c.pid)),
    'each dual-stack connection named',
  );
  t.same(six.reads(), [1, 1], 'one read of each table for four dual-stack connections');
});

// A server-side socket fed by a client the test writes to.
async function headFrom(
  send: (client: net.Socket) => void,
  limit: number,
  timeoutMs: number,
): Promise<HeadProblem | Awaited<ReturnType<typeof readRequestHead>>> {
  const got = new Promise<net.Socket>((resolve) => {
    const server = net.createServer((s) => {
      server.close();
      resolve(s);
    });
    server.listen(0, '127.0.0.1', () => {
      const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      client.on('error', () => undefined);
      client.on('connect', () => send(client));
    });
  });
  const s = await got;
  try {
    return await readRequestHead(s, limit, timeoutMs);
  } catch (e) {
    return e as HeadProblem;
  } finally {
    s.destroy();
  }
}

t.test("the request head's bounds", async (t) => {
  const ok = await headFrom(
    (c) => {
      c.write('CONNECT a.test:443 HTTP/1.1\r\nHo');
      setTimeout(() => c.write('st: a.test:443\r\n\r\nrest'), 50);
    },
    1024,
    2000,
  );
  t.match(ok, { method: 'CONNECT', target: 'a.test:443', headers: [{ name: 'Host', value: 'a.test:443' }] });
  t.equal((ok as { rest: Buffer }).rest.toString(), 'rest', 'bytes after the head are kept');
  const slow = await headFrom((c) => c.write('GET http://a/ HTTP/1.1\r\n'), 1024, 300);
  t.ok(slow instanceof HeadProblem);
  t.match((slow as Error).message, /did not arrive within 0\.3 s/);
  const big = await headFrom((c) => c.write(`GET http://a/ HTTP/1.1\r\nX: ${'a'.repeat(2000)}\r\n\r\n`), 1024, 2000);
  t.match((big as Error).message, /over 1 KiB/);
  // Closed by the relay itself (the oldest idle connection of a flood):
  // the wait ends then, not at its timeout, so a flood leaves no waits
  // behind it.
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  const accepted = await new Promise<net.Socket>((r) => server.once('connection', r));
  server.close();
  const t0 = Date.now();
  setTimeout(() => accepted.destroy(), 100);
  const closed = await readRequestHead(accepted, 1024, 20_000).catch((e: unknown) => e);
  client.destroy();
  t.ok(closed instanceof HeadProblem, 'a connection closed before its head: a HeadProblem');
  t.ok(Date.now() - t0 < 10_000, `at the close, not at the 20 s timeout (${Date.now() - t0} ms)`);
  const ended = await headFrom((c) => c.end('GET http://a/ HTTP/1.1\r\n'), 1024, 2000);
  t.match((ended as Error).message, /ended before a whole request head/);
  const malformed: [string, string][] = [
    ['no version', 'GET http://a/\r\n\r\n'],
    ['lower-case method', 'get http://a/ HTTP/1.1\r\n\r\n'],
    ['HTTP/2', 'GET http://a/ HTTP/2.0\r\n\r\n'],
    ['a header without a colon', 'GET http://a/ HTTP/1.1\r\nnocolon\r\n\r\n'],
    ['a space in a header name', 'GET http://a/ HTTP/1.1\r\nx y: z\r\n\r\n'],
  ];
  for (const [what, bytes] of malformed) {
    const r = await headFrom((c) => c.write(bytes), 1024, 2000);
    t.ok(r instanceof HeadProblem, what);
  }
});

// What the relay answers when the lookup itself fails: out of descriptors
// (a flood, or a low `ulimit -n`) is a 429 `busy` the client can retry;
// anything else a 500 naming no detail (the cause goes to run's stderr).
t.test('a lookup that failed is answered: 429 busy out of descriptors, else 500', async (t) => {
  const answerTo = async (e: Error): Promise<string> => {
    const server = net.createServer((c) => refuseFailure(c, e));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => server.close());
    const c = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    let got = '';
    c.on('data', (d: Buffer) => (got += d.toString()));
    await new Promise((r) => c.on('close', r));
    return got;
  };
  const emfile = await answerTo(Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' }));
  t.match(emfile, /^HTTP\/1\.1 429 Too Many Requests\r\n/);
  t.match(emfile, /\r\nx-postern-error: busy\r\n/);
  t.match(emfile, /out of file descriptors .*raise the limit \(ulimit -n\)/);
  const enfile = await answerTo(Object.assign(new Error('ENFILE'), { code: 'ENFILE' }));
  t.match(enfile, /^HTTP\/1\.1 429 .*\r\nx-postern-error: busy\r\n/s, 'the system-wide limit too');
  const other = await answerTo(new Error('some defect with /home/someone/path'));
  t.match(other, /^HTTP\/1\.1 500 .*\r\nx-postern-error: internal_error\r\n/s);
  t.notMatch(other, /some defect/, 'the cause is not sent to the client');
});
