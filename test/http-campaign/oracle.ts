/**
 * The oracle: a reply of the guarded app is right when it is the reply the bare app gives to the
 * same bytes (status, body, the app's own header fields), except that a cache may answer a
 * conditional request 304 or a Range request 206 from a full response, and it adds its own
 * fields (Age, X-Cache, Cache-Status) and takes off the ones meant for it (`Dogpile-*`).
 * Beyond equality: nothing the app marks unstorable, and nothing asked with credentials, is
 * ever answered from the store.
 */
import { field, type WireReply } from './wire.js';

export const FROM_STORE = new Set(['HIT', 'STALE', 'COALESCED']);

/** Fields a cache or a connection adds or changes (compared elsewhere or not at all). */
const NOT_COMPARED = new Set(['date', 'age', 'x-cache', 'cache-status', 'connection', 'keep-alive', 'transfer-encoding']);

function isChunked(r: WireReply): boolean {
  return /chunked/i.test(field(r, 'transfer-encoding') ?? '');
}

/** The app's own fields of a reply, by name (values in order), as the app would send them to a client. */
function ownFields(r: WireReply, dropLength: boolean, extra: readonly string[] = []): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [name, value] of r.fields) {
    if (NOT_COMPARED.has(name) || name.startsWith('dogpile-') || extra.includes(name)) continue;
    if (name === 'content-length' && dropLength) continue;
    (out[name] ??= []).push(value);
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}

export function summary(r: WireReply): string {
  const text = r.body.toString('utf8');
  return `${r.status} ${JSON.stringify(ownFields(r, false))} ${text.length > 400 ? `${text.slice(0, 400)}…` : text}`;
}

/** Where two replies differ (status, body, own fields), or undefined when they agree. */
export function difference(got: WireReply, expected: WireReply, head: boolean, extra: readonly string[] = []): string | undefined {
  if (got.status !== expected.status) return `status ${got.status}, the app answers ${expected.status}`;
  if (!head && !got.body.equals(expected.body)) return `body ${JSON.stringify(got.body.toString('utf8'))}, the app answers ${JSON.stringify(expected.body.toString('utf8'))}`;
  const dropLength = head || isChunked(got) || isChunked(expected);
  const g = JSON.stringify(ownFields(got, dropLength, extra));
  const e = JSON.stringify(ownFields(expected, dropLength, extra));
  if (g !== e) return `fields ${g}, the app sends ${e}`;
  return undefined;
}

function opaque(tag: string): string {
  return tag.trim().replace(/^W\//, '');
}

/** Whether a conditional request with these fields is satisfied (answered 304) by a full reply's validators (RFC 9110 §13.2.2). */
export function notModified(request: { inm?: string; ims?: string }, full: WireReply): boolean {
  const etag = field(full, 'etag');
  if (request.inm !== undefined) {
    if (request.inm.trim() === '*') return true;
    return etag !== undefined && request.inm.split(',').some((t) => opaque(t) === opaque(etag));
  }
  if (request.ims !== undefined) {
    const lastModified = field(full, 'last-modified');
    if (lastModified === undefined) return false;
    return Date.parse(lastModified) <= Date.parse(request.ims);
  }
  return false;
}

/** Whether a 206 reply is the slice of `full` its Content-Range names; a 416 must name the full length. */
export function rangeOf(got: WireReply, full: WireReply): string | undefined {
  const contentRange = field(got, 'content-range') ?? '';
  if (got.status === 416) {
    return contentRange === `bytes */${full.body.length}` ? undefined : `416 with Content-Range ${contentRange}, the full body has ${full.body.length} bytes`;
  }
  const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(contentRange);
  if (!m) return `206 with Content-Range ${JSON.stringify(contentRange)}`;
  const [start, end, total] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (total !== full.body.length) return `206 of a ${total}-byte body, the app's body has ${full.body.length} bytes`;
  if (!got.body.equals(full.body.subarray(start, end + 1))) return `206 body ${JSON.stringify(got.body.toString('utf8'))} is not bytes ${start}-${end} of the app's ${JSON.stringify(full.body.toString('utf8'))}`;
  return undefined;
}

/** Whether the app marks this reply as one a shared cache must not store or serve to another client. */
export function unstorable(r: WireReply): string | undefined {
  if (field(r, 'set-cookie') !== undefined) return 'Set-Cookie';
  const cc = field(r, 'cache-control') ?? '';
  if (/(^|[\s,])private\b/i.test(cc)) return 'Cache-Control: private';
  if (/(^|[\s,])no-store\b/i.test(cc)) return 'Cache-Control: no-store';
  return undefined;
}
