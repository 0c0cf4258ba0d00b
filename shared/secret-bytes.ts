// An opened secret, as the one door of the unlocked vault hands it out. It
// cannot be serialised: JSON, string conversion and template literals throw,
// and util.inspect (what console and loggers print) shows a placeholder, so a
// secret passed by mistake to a journal payload, a log line or a reply fails
// loudly instead of leaking. The bytes are read only by the code that places
// them (the HTTP injection, ssh2's login, the redactor's needles), through
// `bytes`, and are wiped when the door closes.
import { inspect } from 'node:util';

export class SecretNotSerialisable extends Error {
  constructor() {
    super('a secret cannot be serialised');
    this.name = 'SecretNotSerialisable';
  }
}

export class SecretBytes {
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  // The secret itself, for the call that places it; never kept after it.
  get bytes(): Buffer {
    return this.#bytes;
  }

  get length(): number {
    return this.#bytes.length;
  }

  wipe(): void {
    this.#bytes.fill(0);
  }

  toJSON(): never {
    throw new SecretNotSerialisable();
  }

  toString(): never {
    throw new SecretNotSerialisable();
  }

  [Symbol.toPrimitive](): never {
    throw new SecretNotSerialisable();
  }

  [inspect.custom](): string {
    return 'SecretBytes <hidden>';
  }
}
