// The signal that a requester went away is made when first asked for; it
// must say the same as one made at the start would: aborted when the
// client left before its response was finished, whether that was before or
// after the signal was asked for, and never for a finished response.
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { requestContext, requesterGone, type RequesterGone } from '../../daemon/pipeline/requester-gone';
import type { PipelineServices } from '../../daemon/pipeline/context';
import type { Identity } from '../../daemon/identity/identify';

async function withServer(
  handle: (res: http.ServerResponse, gone: RequesterGone) => Promise<void>,
  client: (port: number) => Promise<void>,
): Promise<void> {
  let done!: Promise<void>;
  const server = http.createServer((_req, res) => {
    done = handle(res, requesterGone(res));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    await client((server.address() as net.AddressInfo).port);
    await new Promise((r) => setTimeout(r, 50));
    await done;
  } finally {
    server.close();
  }
}

const leaveAfterHead = (port: number) =>
  new Promise<void>((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
      setTimeout(() => {
        s.destroy();
        resolve();
      }, 30);
    });
  });

t.test('asked for after the requester left: already aborted', async (t) => {
  await withServer(async (res, gone) => {
    await once(res, 'close');
    t.equal(gone.signal.aborted, true);
  }, leaveAfterHead);
});

t.test('asked for before the requester left: aborted when it leaves', async (t) => {
  await withServer(async (_res, gone) => {
    const signal = gone.signal;
    t.equal(signal.aborted, false, 'not yet');
    await once(signal, 'abort');
    t.equal(signal.aborted, true);
    t.equal(gone.signal, signal, 'one signal, whenever it is read');
  }, leaveAfterHead);
});

t.test('a finished response: never aborted, read before or after', async (t) => {
  for (const readFirst of [true, false]) {
    await withServer(
      async (res, gone) => {
        const early = readFirst ? gone.signal : null;
        res.end('ok');
        await once(res, 'close');
        t.equal((early ?? gone.signal).aborted, false, readFirst ? 'read before the end' : 'read after the close');
      },
      async (port) => {
        const r = await fetch(`http://127.0.0.1:${port}/`);
        t.equal(await r.text(), 'ok');
      },
    );
  }
});

// Both front doors build their request's context with requestContext: its
// signal is the requester's own, read through, and a waiting notice is
// carried only when one is given.
t.test('requestContext: the signal read through, onWaiting only when given', async (t) => {
  const services = {} as PipelineServices;
  const identity = {} as Identity;
  const slot = { release: () => undefined } as never;
  await withServer(async (res, gone) => {
    const ctx = requestContext(services, identity, gone, slot);
    t.notOk('onWaiting' in ctx, 'no waiting notice given, none carried');
    t.equal(ctx.services, services);
    t.equal(ctx.identity, identity);
    t.equal(ctx.slot, slot);
    await once(res, 'close');
    t.equal(ctx.signal.aborted, true, 'aborted: the requester left before its response');
    t.equal(ctx.signal, gone.signal, 'the requester-gone signal itself');
  }, leaveAfterHead);
  await withServer(
    async (res, gone) => {
      const onWaiting = (): void => undefined;
      const ctx = requestContext(services, identity, gone, slot, onWaiting);
      t.equal(ctx.onWaiting, onWaiting);
      res.end('ok');
      await once(res, 'close');
      t.equal(ctx.signal.aborted, false, 'a finished response: not aborted');
    },
    async (port) => {
      await (await fetch(`http://127.0.0.1:${port}/`)).text();
    },
  );
});
