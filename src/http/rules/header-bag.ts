/**
 * Headers as the HTTP caching rules read them: a plain record (Node's `IncomingHttpHeaders`,
 * `OutgoingHttpHeaders`, `res.getHeaders()`), names looked up without regard to case.
 */
export type HeaderBag = Readonly<Record<string, string | readonly string[] | number | undefined>>;

/** Every line of one header field, in order (an array stays an array; a number becomes a string). */
export function fieldLines(headers: HeaderBag, name: string): string[] {
  const lower = name.toLowerCase();
  let v = headers[lower];
  if (v === undefined) {
    for (const key of Object.keys(headers)) {
      // (Lower-casing keeps the length of a header name: only names of that length are compared.)
      if (key.length === lower.length && key.toLowerCase() === lower) {
        v = headers[key];
        break;
      }
    }
  }
  if (v === undefined) return [];
  if (Array.isArray(v)) return v.map(String);
  return [String(v)];
}

/** One header field as a single string (its lines joined with `, `), or undefined when absent. */
export function fieldValue(headers: HeaderBag, name: string): string | undefined {
  const lines = fieldLines(headers, name);
  return lines.length === 0 ? undefined : lines.join(', ');
}

/**
 * The only value of a singleton field (`Date`, `Expires`, `Last-Modified`, `ETag`, `Location`):
 * undefined when absent, and also when it was sent several times with different values.
 * `conflict` tells those two cases apart.
 */
export function singletonField(headers: HeaderBag, name: string): { value?: string; conflict: boolean } {
  const lines = fieldLines(headers, name).map((s) => s.trim());
  if (lines.length === 0) return { conflict: false };
  if (lines.some((s) => s !== lines[0])) return { conflict: true };
  return { value: lines[0], conflict: false };
}

/**
 * Fields that describe one connection or one client and never belong to a stored response:
 * the hop-by-hop fields (RFC 9110 §7.6.1), `Set-Cookie`, and `Content-Length` (the stored
 * body's own length is sent).
 */
export const CONNECTION_FIELDS = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'set-cookie',
  'content-length',
] as const;
