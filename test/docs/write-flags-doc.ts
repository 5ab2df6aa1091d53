/** `npm run docs:flags`: writes docs/flags.md (see flags-doc.ts). */
import { writeFileSync } from 'node:fs';
import { repoPath } from '../support/processes.js';
import { flagsDoc } from './flags-doc.js';

writeFileSync(repoPath('docs/flags.md'), flagsDoc());
console.log('wrote docs/flags.md');
