// Imported first by the command line: no postern process opens Node's
// inspector on SIGUSR1 (shared/hardening.ts), whatever command it runs.
import { ignoreInspectorSignalEarly } from '../shared/hardening';

ignoreInspectorSignalEarly();
