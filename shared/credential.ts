// Credential definitions and secrets (SPEC §4). The code lives in
// shared/credential/, one job per file; this is the one import for users.
export type {
  Approve,
  HttpScheme,
  SshAuth,
  HttpInject,
  AwsSigV4Inject,
  GithubAppInject,
  OAuth2Inject,
  InjectForm,
  HttpAllowRule,
  HttpCredentialDef,
  SshCredentialDef,
  CredentialDef,
} from './credential/types';
export { stricterApprove, injectForm } from './credential/types';
export { validateDefinition, checkDefinition, formatPath, LIMITS } from './credential/schema';
export type { Validation } from './credential/schema';
export { parseDefinitionToml, definitionToToml } from './credential/toml';
export { wideningNotes } from './credential/widenings';
export { definitionHash, diffDefinitions } from './credential/compare';
export { summariseTargets, formatTargets } from './credential/targets';
export type { TargetSummary, HttpTarget } from './credential/targets';
export { parseRate, RATE_UNITS, SECRET_PLACEHOLDER } from './credential/fields';
export type { Rate } from './credential/fields';
export {
  checkHttpSecret,
  stripOneTrailingNewline,
  prepareSshSecret,
  sshKeyPublic,
  sshKeyFingerprint,
  sshPrivateParts,
  MIN_RSA_BITS,
} from './credential/secret';
