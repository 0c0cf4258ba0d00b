// A stand-in API for `make demo`: HTTPS on localhost with a throwaway
// certificate. It echoes what it received (so the demo can show that the
// secret arrived and was redacted on the way back) and answers /redirect
// with a 302 to the cloud metadata address.
'use strict';
const https = require('node:https');
const { readFileSync, writeFileSync } = require('node:fs');

const [key, cert, portFile] = process.argv.slice(2);
const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
  if (req.url.startsWith('/redirect')) {
    res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' });
    res.end();
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const text = JSON.stringify({ you_sent: { method: req.method, url: req.url, authorization: req.headers.authorization ?? null } });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(text);
  });
});
server.listen(0, '127.0.0.1', () => writeFileSync(portFile, String(server.address().port)));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
