/** `npm run docs:chart`: writes the chart README's "Values that matter" table (see chart-values-doc.ts). */
import { readFileSync, writeFileSync } from 'node:fs';
import { repoPath } from '../support/processes.js';
import { withMattersTable } from './chart-values-doc.js';

const readme = repoPath('charts/kd-connections/README.md');
const values = readFileSync(repoPath('charts/kd-connections/values.yaml'), 'utf8');
writeFileSync(readme, withMattersTable(readFileSync(readme, 'utf8'), values));
console.log('wrote the values table of charts/kd-connections/README.md');
