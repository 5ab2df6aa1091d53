/**
 * The splice that turns the annotation's document (Secret values redacted) into KubeDirector's document
 * inside the pod: the reconciler renders the public text and records the byte ranges of the top-level
 * sections the private Secret replaces; the sidecar (busybox sh, no JSON parser) cuts at those offsets
 * with head/tail and inserts the private sections' text. `assembleDocument` is the same operation in
 * TypeScript, for tests.
 */
import { SPLICE_SECTIONS, type SpliceSection } from '../domain/guestconfig-layout.js';

export interface SplicedText {
  text: string;
  /** The splice annotation's value, or '' when nothing is replaced. */
  splice: string;
}

/**
 * JSON.stringify(doc), plus the splice naming where each section of `sections` (section → byte length of
 * the private text that replaces it) lies in the text. Offsets and lengths are bytes of UTF-8 text; the
 * length lets the sidecar refuse a private section that is not the one the reconciler wrote (cut short,
 * or edited by hand). Top-level JSON.stringify output is `{` + `"key":value` joined by `,` + `}`,
 * which is what the walk below measures.
 */
export function renderSpliced(
  doc: Record<string, unknown>,
  sections: Partial<Record<SpliceSection, number>>,
  version: string | undefined,
): SplicedText {
  const text = JSON.stringify(doc);
  const names = SPLICE_SECTIONS.filter((k) => sections[k] !== undefined);
  if (!version || names.length === 0) return { text, splice: '' };
  if (!/^[0-9a-f]{16,64}$/.test(version)) throw new Error(`splice version must be hex, got ${JSON.stringify(version)}`);
  const parts: string[] = [];
  let at = 1; // after "{"
  let first = true;
  for (const [k, v] of Object.entries(doc)) {
    if (v === undefined) continue;
    if (!first) at += 1; // ","
    first = false;
    at += Buffer.byteLength(JSON.stringify(k)) + 1; // "key":
    const len = Buffer.byteLength(JSON.stringify(v));
    const priv = sections[k as SpliceSection];
    if (priv !== undefined) parts.push(`${k} ${at} ${at + len} ${priv}`);
    at += len;
  }
  if (at + 1 !== Buffer.byteLength(text)) throw new Error('splice offsets do not match the rendered text');
  const missing = names.filter((s) => !parts.some((p) => p.startsWith(`${s} `)));
  if (missing.length) throw new Error(`document has no top-level ${missing.join(', ')} to splice`);
  return { text, splice: ['1', version, ...parts].join(' ') };
}

export interface ParsedSplice {
  version: string;
  ranges: { section: SpliceSection; start: number; end: number; length: number }[];
}

/** The splice annotation's value, or an error naming what is wrong with it. */
export function parseSplice(value: string): ParsedSplice | Error {
  const w = value.trim().split(/\s+/);
  if (w[0] !== '1' || w.length < 2 || (w.length - 2) % 4 !== 0)
    return new Error(`splice "${value}": not "1 <version> (<section> <start> <end> <length>)*"`);
  const ranges: ParsedSplice['ranges'] = [];
  let last = 0;
  for (let i = 2; i < w.length; i += 4) {
    const section = w[i] as SpliceSection;
    const start = Number(w[i + 1]);
    const end = Number(w[i + 2]);
    const length = Number(w[i + 3]);
    if (!SPLICE_SECTIONS.includes(section)) return new Error(`splice: unknown section ${w[i]}`);
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < last || end < start)
      return new Error(`splice: bad range ${w[i + 1]}..${w[i + 2]} for ${section}`);
    if (!Number.isInteger(length) || length < 0) return new Error(`splice: bad length ${w[i + 3]} for ${section}`);
    ranges.push({ section, start, end, length });
    last = end;
  }
  return { version: w[1]!, ranges };
}

/**
 * What the sidecar writes: the public text with each range replaced by the private section of the same
 * version; undefined when the halves do not match (another version, a section missing) — never a mix.
 */
export function assembleDocument(
  publicText: Buffer,
  splice: string,
  priv: { version?: string; sections: Partial<Record<SpliceSection, Buffer>> },
): Buffer | undefined {
  if (splice.trim() === '') return publicText;
  const s = parseSplice(splice);
  if (s instanceof Error || s.version !== priv.version) return undefined;
  const out: Buffer[] = [];
  let pos = 0;
  for (const r of s.ranges) {
    const section = priv.sections[r.section];
    if (!section || section.length !== r.length || r.end > publicText.length) return undefined;
    out.push(publicText.subarray(pos, r.start), section);
    pos = r.end;
  }
  out.push(publicText.subarray(pos));
  return Buffer.concat(out);
}
