// Upstream failures as tables: each row says which failures it covers, the
// refusal they get, whether the request may have reached its target, and
// the words; the first row that covers a failure decides, and a table ends
// with what every other failure gets. The words are written in the rows,
// never copied from a library's message (it can quote the request).
import { Refusal } from '../../shared/errors';

export interface FailureWords<F> {
  refusal: 'upstream_error' | 'upstream_timeout';
  // Carried as the refusal's maybe_executed (SPEC §6.3). A refusal from a
  // row without it carries none (Refusal.maybeExecuted reads null).
  maybeExecuted?: boolean;
  words: (f: F) => string;
}

export interface FailureRow<F> extends FailureWords<F> {
  covers: (f: F) => boolean;
}

export interface FailureTable<F> {
  rows: readonly FailureRow<F>[];
  otherwise: FailureWords<F>;
}

// Rows that cover failures by their code alone.
export function codeIs(...codes: string[]): (f: { code: string | undefined }) => boolean {
  return (f) => f.code !== undefined && codes.includes(f.code);
}

export function codeLike(pattern: RegExp): (f: { code: string | undefined }) => boolean {
  return (f) => f.code !== undefined && pattern.test(f.code);
}

export function rowFor<F>(table: FailureTable<F>, f: F): FailureWords<F> {
  return table.rows.find((row) => row.covers(f)) ?? table.otherwise;
}

export function refusalFor<F>(table: FailureTable<F>, f: F): Refusal {
  const row = rowFor(table, f);
  return new Refusal(
    row.refusal,
    row.words(f),
    row.maybeExecuted === undefined ? undefined : { maybe_executed: row.maybeExecuted },
  );
}
