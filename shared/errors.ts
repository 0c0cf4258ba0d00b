import { REFUSALS, RefusalCode } from './protocol';

// The only error type whose message reaches a user. The message must say what
// happened and what to do next, and must never contain a secret. `detail`
// carries structured, secret-free facts (a list of problems, changed keys).
export class Refusal extends Error {
  readonly code: RefusalCode;
  readonly detail: Record<string, unknown> | undefined;

  constructor(code: RefusalCode, message: string, detail?: Record<string, unknown>) {
    super(message);
    this.name = 'Refusal';
    this.code = code;
    this.detail = detail;
  }

  get status(): number {
    return REFUSALS[this.code];
  }

  // The journal entry that recorded this refusal: set once it is journaled,
  // so a refusal is never journaled twice.
  get auditSeq(): number | undefined {
    const v = this.detail?.['audit_seq'];
    return typeof v === 'number' ? v : undefined;
  }

  // Whether the request may have reached its target (SPEC §6.3): true, false,
  // or null when the question does not arise (refused before sending).
  get maybeExecuted(): boolean | null {
    const v = this.detail?.['maybe_executed'];
    return typeof v === 'boolean' ? v : null;
  }

  toJSON(): { code: RefusalCode; message: string; [k: string]: unknown } {
    return { code: this.code, message: this.message, ...(this.detail ?? {}) };
  }
}

export function isRefusal(e: unknown): e is Refusal {
  return e instanceof Refusal;
}

// A problem found while validating a user-supplied document (config or
// credential definition): where it is, and what is wrong with it.
export interface Problem {
  path: string;
  message: string;
}

export function formatProblems(problems: readonly Problem[]): string {
  return problems.map((p) => `${p.path || '(top level)'}: ${p.message}`).join('; ');
}
