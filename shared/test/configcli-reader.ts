/**
 * A configmeta reader that follows configcli's lookup rules (bluek8s/configcli, namespace/__init__.py),
 * written from those rules for the tests: it answers `configcli -g <key>` the way an app's scripts see it.
 *
 * - The key is split on `.`; each token walks one level down from the document root.
 * - A map holding `bdvlibrefkey` is a reference: its list (a path from the root) replaces the tokens
 *   consumed so far, and the lookup continues with the remaining tokens.
 * - A list of maps is merged in order, the last one winning per key (Python's dict.update); a list of
 *   strings is a value.
 * - A map at the end of the key answers with its keys, in document order; a miss is a KeyError.
 * - Root loads more than the public document (configcliRootView).
 */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const REFKEY = 'bdvlibrefkey';

export class ConfigcliKeyError extends Error {
  constructor(readonly tokens: string[]) {
    super(`KeyError: ${JSON.stringify(tokens)}`);
    this.name = 'ConfigcliKeyError';
  }
}

const isMap = (v: Json | undefined): v is { [k: string]: Json } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Python's `token in value` for the value types JSON has; TypeError (a throw) where Python raises it. */
function pythonIn(token: string, value: Json): boolean {
  if (isMap(value)) return Object.prototype.hasOwnProperty.call(value, token);
  if (Array.isArray(value)) return value.some((x) => x === token);
  if (typeof value === 'string') return value.includes(token);
  throw new TypeError(`argument of type ${value === null ? 'NoneType' : typeof value} is not iterable`);
}

/** A list of maps becomes one map, merged in order (the last wins); a list of strings stays a list. */
function mergeList(value: Json): Json {
  if (!Array.isArray(value) || value.every((x) => typeof x === 'string') || value.length === 0) return value;
  const merged: { [k: string]: Json } = {};
  for (const item of value) {
    if (!isMap(item)) throw new TypeError('cannot merge a list holding a non-map');
    Object.assign(merged, item);
  }
  return merged;
}

function own(map: { [k: string]: Json }, key: string, tokens: string[]): Json {
  if (!Object.prototype.hasOwnProperty.call(map, key)) throw new ConfigcliKeyError(tokens);
  return map[key]!;
}

/** Walks down while tokens match map keys; returns the value reached and the tokens left. */
function dig(tokens: string[], value: Json): [Json, string[]] {
  if (tokens.length === 0) return [mergeList(value), []];
  const [token, ...rest] = tokens as [string, ...string[]];
  if (isMap(value) && Object.prototype.hasOwnProperty.call(value, token)) return dig(rest, value[token]!);
  if (!pythonIn(REFKEY, value)) {
    const merged = mergeList(value);
    // configcli takes one step into a merged list and hands the rest back undigested.
    if (isMap(merged)) return [own(merged, token, tokens), rest];
  }
  return [value, tokens];
}

function resolve(tokens: string[], root: Json): Json | string[] {
  let data: Json;
  let remaining: string[];
  try {
    [data, remaining] = dig(tokens, root);
  } catch {
    throw new ConfigcliKeyError(tokens);
  }
  if (isMap(data)) {
    const ref = data[REFKEY];
    if (ref !== undefined) {
      if (!Array.isArray(ref) || !ref.every((x): x is string => typeof x === 'string')) {
        throw new ConfigcliKeyError(tokens);
      }
      return resolve([...ref, ...remaining], root);
    }
    if (remaining.length === 0) return Object.keys(data);
    if (remaining.length === 1) return own(data, remaining[0]!, remaining);
    if (Object.keys(data).length > 0) return Object.keys(data);
    throw new ConfigcliKeyError(tokens);
  }
  if (remaining.length > 0) throw new ConfigcliKeyError(remaining);
  return data;
}

/** `configcli -g <key>` against `doc` (a parsed configmeta.json). Throws ConfigcliKeyError on a miss. */
export function configcliGet(doc: Json, key: string): Json | string[] {
  return resolve(key.split('.'), doc);
}

/**
 * What configcli loads for root (namespace/__init__.py): the public document, then `.platform.json` and
 * `.priv_configmeta.json` merged over it with Python's dict.update (shallow: a top-level key replaces the
 * public one whole). A platform file that is not a JSON object makes configcli swallow the error and keep
 * the public document as loaded.
 */
export function configcliRootView(publicText: string, platformText: string, privateText: string): Json {
  const doc = JSON.parse(publicText) as Record<string, Json>;
  try {
    const platform = JSON.parse(platformText) as unknown;
    if (typeof platform !== 'object' || platform === null || Array.isArray(platform)) throw new TypeError('update');
    Object.assign(doc, platform);
    Object.assign(doc, JSON.parse(privateText) as Record<string, Json>);
  } catch {
    // configcli swallows the error: the public document stays as loaded
  }
  return doc;
}
