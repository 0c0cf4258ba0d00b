// nginx as a yardstick for postern's HTTP path: plain HTTP in on a Unix
// socket, HTTPS out to the bench's upstream over a keep-alive pool, the
// certificate verified against the bench CA and an `Authorization` header
// injected. One worker, in the foreground, as a child of the bench, with its
// configuration, logs, pid file and temporary files in a directory of its
// own. `startNginx` resolves to null (and says why) when nginx is not
// installed, so the bench can skip only this column.
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const PACKAGE = 'nginx-light';

function findNginx() {
  for (const p of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx']) if (fs.existsSync(p)) return p;
  const r = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

function configuration({ dir, socket, host, port, ca, authorization }) {
  const tmp = (name) => path.join(dir, name);
  return `worker_processes 1;
pid ${tmp('nginx.pid')};
error_log ${tmp('error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${tmp('body')};
  proxy_temp_path ${tmp('proxy')};
  fastcgi_temp_path ${tmp('fastcgi')};
  uwsgi_temp_path ${tmp('uwsgi')};
  scgi_temp_path ${tmp('scgi')};
  upstream bench_upstream {
    server 127.0.0.1:${port};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen unix:${socket};
    keepalive_requests 1000000;
    location / {
      proxy_pass https://bench_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host ${host};
      proxy_set_header Authorization "${authorization}";
      proxy_ssl_name ${host};
      proxy_ssl_server_name on;
      proxy_ssl_trusted_certificate ${ca};
      proxy_ssl_verify on;
      proxy_ssl_session_reuse on;
    }
  }
}
`;
}

// The worker's pid: the master's only child. The master listens before it
// forks, so once there is a worker the socket accepts connections.
function workerPid(master) {
  try {
    const children = fs
      .readFileSync(`/proc/${master}/task/${master}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean);
    return children.length ? Number(children[0]) : null;
  } catch {
    return null;
  }
}

// Resolves to { socket, master, worker, stop } or null when nginx is missing.
async function startNginx({ dir, host, port, ca, authorization }) {
  const bin = findNginx();
  if (!bin) {
    console.log(
      `nginx is not installed: skipping the nginx column (install the Debian package ${PACKAGE}: apt-get install -y ${PACKAGE})`,
    );
    return null;
  }
  fs.mkdirSync(dir, { recursive: true });
  const socket = path.join(dir, 'nginx.sock');
  const conf = path.join(dir, 'nginx.conf');
  fs.writeFileSync(conf, configuration({ dir, socket, host, port, ca, authorization }));
  const errorLog = path.join(dir, 'error.log');
  const child = spawn(bin, ['-e', errorLog, '-p', dir, '-c', conf, '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const why = () => `${stderr}${fs.existsSync(errorLog) ? fs.readFileSync(errorLog, 'utf8') : ''}`.trim();
  const deadline = Date.now() + 10_000;
  let worker = null;
  while (!worker) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode} before it was ready: ${why()}`);
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`nginx did not start in time: ${why()}`);
    }
    await new Promise((r) => setTimeout(r, 25));
    worker = workerPid(child.pid);
  }
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  return { socket, master: child.pid, worker, stop, errors: why };
}

module.exports = { startNginx, PACKAGE };
