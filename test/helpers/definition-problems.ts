// The problems a definition's TOML is refused with (`invalid_definition`),
// each with its path; [] when it is valid.
import { parseDefinitionToml } from '../../shared/credential';
import { Refusal } from '../../shared/errors';

export function definitionProblems(text: string): { path: string; message: string }[] {
  try {
    parseDefinitionToml(text);
  } catch (e) {
    if (e instanceof Refusal && e.code === 'invalid_definition')
      return e.detail?.['problems'] as { path: string; message: string }[];
    throw e;
  }
  return [];
}
