// The refusal of a secret at import: always at the path "secret", and never
// with any part of the secret in its message.
import { Refusal } from '../errors';

export function secretRefusal(message: string, detail: Record<string, unknown> = {}): Refusal {
  return new Refusal('invalid_definition', message, { problems: [{ path: 'secret', message }], ...detail });
}
