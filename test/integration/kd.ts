/** Helpers for the integration suites: reading YAML files and kubectl tables. */
import { expect } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

/** The YAML documents of a file, as plain objects. */
export function yamlDocs(path: string): Record<string, unknown>[] {
  return parseAllDocuments(readFileSync(path, 'utf8')).map((d) => d.toJSON() as Record<string, unknown>);
}

/** A kubectl table (default output) as rows of header → cell. Columns are separated by two or more spaces. */
export function parseTable(stdout: string): { headers: string[]; rows: Record<string, string>[] } {
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  expect(lines.length).toBeGreaterThan(0);
  const header = lines[0]!;
  // Cell boundaries are where header words start: kubectl pads every column to the header's start.
  const starts: number[] = [];
  const re = /(\S+(?: \S+)*)/g;
  for (let m = re.exec(header); m; m = re.exec(header)) starts.push(m.index);
  const headers = starts.map((s, i) => header.slice(s, starts[i + 1]).trim());
  const rows = lines
    .slice(1)
    .map((line) => Object.fromEntries(headers.map((h, i) => [h, line.slice(starts[i], starts[i + 1]).trim()])));
  return { headers, rows };
}
