// The home holds the vault, the journal and the sockets: it must be a real
// directory (not a symlink an agent could re-point), owned by this user and
// closed to everyone else.
import { lstatSync } from 'node:fs';
import { Refusal } from '../shared/errors';

export function checkHome(home: string): void {
  let st;
  try {
    st = lstatSync(home);
  } catch {
    throw new Refusal('bad_config', `the postern home ${home} does not exist; run \`postern init\` first`);
  }
  if (st.isSymbolicLink())
    throw new Refusal(
      'bad_config',
      `the postern home ${home} is a symlink; use a real directory (mode 0700) and point the config at it`,
    );
  if (!st.isDirectory())
    throw new Refusal(
      'bad_config',
      `the postern home ${home} is not a directory; move it away and run \`postern init\``,
    );
  const uid = process.getuid?.() ?? -1;
  if (st.uid !== uid)
    throw new Refusal(
      'bad_config',
      `the postern home ${home} belongs to uid ${st.uid}, not to this user (uid ${uid}); run postern as its owner`,
    );
  if ((st.mode & 0o077) !== 0) {
    throw new Refusal(
      'bad_config',
      `the postern home ${home} is accessible to other users (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); run \`chmod 700 ${home}\``,
    );
  }
}
