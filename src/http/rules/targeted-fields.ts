import type { ServerResponse } from 'node:http';
import { mergeTags, validateTags } from '../../shared/tag-names.js';

/**
 * Response fields read by this cache only: `Dogpile-Cache-Control` (RFC 9213's targeted
 * field for this cache), `Dogpile-Tags`, and any other `Dogpile-*` field. They are taken off
 * every response before it is written: never stored, never sent to a client.
 */
export function isTargetedField(name: string): boolean {
  return name.toLowerCase().startsWith('dogpile-');
}

/** `isTargetedField`, lower-casing only a name whose first letter is a `d`: every response's header names go through it. */
function targeted(name: string): boolean {
  return (name.charCodeAt(0) | 0x20) === 0x64 && isTargetedField(name);
}

type HeaderAccess = { getHeader(name: string): unknown; removeHeader(name: string): unknown };
type HeaderNames = HeaderAccess & { getHeaderNames(): string[] };
type WriteHeadFn = (...args: unknown[]) => unknown;

/** Takes `Dogpile-Cache-Control` (read by this cache only) off a response; returns its value. */
export function takeTargetedField(res: HeaderAccess): string | undefined {
  return takeField(res, 'dogpile-cache-control');
}

/** Takes `Dogpile-Tags` (the tags of the stored entry, read by this cache only) off a response; returns its value. */
export function takeTagsField(res: HeaderAccess): string | undefined {
  return takeField(res, 'dogpile-tags');
}

function takeField(res: HeaderAccess, name: string): string | undefined {
  const value = res.getHeader(name);
  if (value === undefined || value === null) return undefined;
  res.removeHeader(name);
  return Array.isArray(value) ? value.join(', ') : String(value);
}

/**
 * The tags a `Dogpile-Tags` value gives an entry (comma-separated, trimmed, empty members
 * dropped), none without one, or false when they are not valid tags or too many with the
 * request's own: the response is then shared with nobody.
 */
export function fieldTags(tagged: string | undefined, callTags: readonly string[] | undefined): string[] | false {
  if (tagged === undefined) return [];
  try {
    const own = validateTags(tagged.split(',').map((s) => s.trim()).filter((s) => s !== ''), 'Dogpile-Tags');
    mergeTags(callTags, own, 'Dogpile-Tags');
    return own;
  } catch {
    return false;
  }
}

/** The index of the headers argument of `writeHead(status, [message], [headers])`, or -1. */
function headersArg(args: unknown[]): number {
  for (let i = 1; i < args.length; i++) if (args[i] !== null && typeof args[i] === 'object') return i;
  return -1;
}

/**
 * Sets the headers given to `writeHead(status, [message], headers)` (an object, or a flat
 * `[name, value, ...]` list) on `res` and takes them out of `args`, so that everything reading
 * `res`'s headers from here on sees them. Node does the same itself whenever the response has
 * headers set already: a field given there replaces one set before (in a list, repeated names
 * are all kept).
 */
export function absorbWriteHeadHeaders(res: ServerResponse, args: unknown[]): void {
  const at = headersArg(args);
  if (at === -1) return;
  const given = args[at];
  if (Array.isArray(given)) {
    // A list of pairs is not Node's form: left to Node as it is.
    if (given.length % 2 !== 0 || given.some((item) => Array.isArray(item))) return;
    for (let i = 0; i < given.length; i += 2) res.removeHeader(String(given[i]));
    for (let i = 0; i < given.length; i += 2) if (given[i]) res.appendHeader(String(given[i]), given[i + 1] as string | string[]);
  } else {
    for (const [name, value] of Object.entries(given as Record<string, unknown>)) if (name) res.setHeader(name, value as string | string[] | number);
  }
  args.splice(at, 1);
}

/** Removes every `Dogpile-*` field from `res`, and from the headers argument of a `writeHead` call (`args`, changed in place). */
export function dropTargetedFields(res: HeaderNames, args?: unknown[]): void {
  for (const name of res.getHeaderNames()) if (targeted(name)) res.removeHeader(name);
  if (args === undefined) return;
  const at = headersArg(args);
  if (at === -1) return;
  const given = args[at];
  if (Array.isArray(given)) {
    if (given.some((item) => Array.isArray(item))) args[at] = given.filter((pair) => !isTargetedField(String((pair as unknown[])[0])));
    else {
      const kept: unknown[] = [];
      for (let i = 0; i < given.length; i += 2) if (!isTargetedField(String(given[i]))) kept.push(given[i], given[i + 1]);
      args[at] = kept;
    }
    return;
  }
  const object = given as Record<string, unknown>;
  if (hasTargetedName(object)) args[at] = Object.fromEntries(Object.entries(object).filter(([name]) => !isTargetedField(name)));
}

/** True when one of the own property names of `object` is a `Dogpile-*` field (without listing them in an array). */
function hasTargetedName(object: Record<string, unknown>): boolean {
  for (const name in object) if (targeted(name) && Object.hasOwn(object, name)) return true;
  return false;
}

/**
 * The `writeHead` that drops `Dogpile-*` fields, for responses whose own `writeHead` is the one
 * their class gives them (`ServerResponse`'s, almost always): made once, not per response.
 */
let sharedWrap: { inner: WriteHeadFn; outer: WriteHeadFn } | undefined;

/**
 * True for the usual calls, answered without an arguments list: `writeHead(status)` (Node's
 * own, for implicit headers) and `writeHead(status, second)` where `second` is a message or a
 * headers object naming no `Dogpile-*` field (Fastify's).
 */
function usualCall(count: number, second: unknown): boolean {
  if (count === 1) return true;
  if (count !== 2) return false;
  if (second === null || typeof second !== 'object') return true;
  return !Array.isArray(second) && !hasTargetedName(second as Record<string, unknown>);
}

function droppingWriteHead(inner: WriteHeadFn): WriteHeadFn {
  return function (this: ServerResponse, statusCode: unknown, second?: unknown): unknown {
    if (usualCall(arguments.length, second)) {
      dropTargetedFields(this);
      return arguments.length === 1 ? inner.call(this, statusCode) : inner.call(this, statusCode, second);
    }
    // eslint-disable-next-line prefer-rest-params -- the rare calls, with their arguments as given
    const args = Array.prototype.slice.call(arguments) as unknown[];
    dropTargetedFields(this, args);
    return inner.apply(this, args);
  };
}

/** Drops every `Dogpile-*` field from `res` when its headers are written (`writeHead`, which Node also calls for implicit headers), whoever set them and however. */
export function dropTargetedFieldsOnWrite(res: ServerResponse): void {
  const target = res as unknown as { writeHead: WriteHeadFn };
  const writeHead = target.writeHead;
  if (sharedWrap?.inner === writeHead) {
    target.writeHead = sharedWrap.outer;
    return;
  }
  const outer = droppingWriteHead(writeHead);
  // Wrapped already by someone else (an own property): this response gets a wrapper of its own.
  if (sharedWrap === undefined && !Object.hasOwn(res, 'writeHead')) sharedWrap = { inner: writeHead, outer };
  target.writeHead = outer;
}
