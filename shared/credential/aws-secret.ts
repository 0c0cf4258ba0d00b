// The secret of an AWS Signature V4 credential (SPEC §13):
// "ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]", read where it is
// stored (`cred add`, and the daemon again) and where a request is signed.

export interface AwsKeys {
  accessKeyId: string;
  // A view of the opened secret, not a copy: wiping the secret wipes it.
  secretAccessKey: Buffer;
  sessionToken: string | null;
}

const FORM = 'give it as ACCESS_KEY_ID:SECRET_ACCESS_KEY or ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN';
const COLON = 0x3a;

function badByte(secret: Buffer): string | null {
  for (const b of secret) {
    if (b >= 0x80) return `the AWS secret contains a byte that is not ASCII; ${FORM}`;
    if (b < 0x20 || b === 0x7f)
      return `the AWS secret contains a control character (a newline, tab, NUL...); ${FORM} on one line`;
    if (b === 0x20) return `the AWS secret contains a space; ${FORM}, without spaces`;
  }
  return null;
}

function splitOnColons(secret: Buffer): Buffer[] {
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = secret.indexOf(COLON); i !== -1; i = secret.indexOf(COLON, start)) {
    parts.push(secret.subarray(start, i));
    start = i + 1;
  }
  parts.push(secret.subarray(start));
  return parts;
}

function partsProblem(parts: Buffer[]): string | null {
  if (parts.length < 2) return `the AWS secret has no ':' between the access key id and the secret key; ${FORM}`;
  if (parts.length > 3) return `the AWS secret has more than three ':'-separated parts; ${FORM}`;
  const [id, key, token] = parts as [Buffer, Buffer, Buffer | undefined];
  if (id.length === 0) return `the AWS secret's access key id (before the first ':') is empty; ${FORM}`;
  if (id.length < 16 || id.length > 128)
    return `the AWS secret's access key id is ${id.length} characters; AWS access key ids are 16 to 128 (e.g. AKIA…); ${FORM}`;
  for (const b of id)
    if (!((b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39)))
      return `the AWS secret's access key id may hold only upper-case letters and digits (e.g. AKIA…); ${FORM}`;
  if (key.length === 0) return `the AWS secret's secret access key (after the first ':') is empty; ${FORM}`;
  if (key.length < 16 || key.length > 128)
    return `the AWS secret's secret access key is ${key.length} characters; AWS secret keys are 16 to 128 (usually 40); ${FORM}`;
  if (token !== undefined && token.length === 0)
    return `the AWS secret's session token (after the second ':') is empty; remove the trailing ':' or add the token`;
  return null;
}

// The stored secret "ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]", or a
// one-line problem that never contains any part of it.
export function parseAwsSecret(secret: Buffer): { ok: true; keys: AwsKeys } | { ok: false; problem: string } {
  if (secret.length === 0) return { ok: false, problem: `the AWS secret is empty; ${FORM}` };
  const parts = splitOnColons(secret);
  const problem = badByte(secret) ?? partsProblem(parts);
  if (problem !== null) return { ok: false, problem };
  const [id, key, token] = parts as [Buffer, Buffer, Buffer | undefined];
  return {
    ok: true,
    keys: {
      accessKeyId: id.toString('latin1'),
      secretAccessKey: key,
      sessionToken: token === undefined ? null : token.toString('latin1'),
    },
  };
}
