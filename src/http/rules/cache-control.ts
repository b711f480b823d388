import { fieldLines, type HeaderBag } from './header-bag.js';

/** A directive's argument: its text (quotes removed), or `true` for a directive without one. */
type DirectiveValue = string | true;

/** The largest delta-seconds this cache represents (RFC 9111 §1.2.2: 2^31). */
export const MAX_DELTA_SECONDS = 2 ** 31;

/**
 * Cache directives, names lower-case (RFC 9111 §5.2: names are case-insensitive), every
 * occurrence kept so that the rules for duplicates can be applied per directive.
 */
export class CacheDirectives {
  constructor(private readonly map: ReadonlyMap<string, readonly DirectiveValue[]> = new Map()) {}

  /** The directive names present, lower-case, in first-seen order. */
  names(): string[] {
    return [...this.map.keys()];
  }

  has(name: string): boolean {
    return this.map.has(name.toLowerCase());
  }

  /** Every value given to a directive, in order (empty when absent). */
  values(name: string): readonly DirectiveValue[] {
    return this.map.get(name.toLowerCase()) ?? [];
  }

  /**
   * A delta-seconds argument (`max-age`, `s-maxage`, `stale-while-revalidate`...):
   * - undefined when the directive is absent;
   * - `'invalid'` when an occurrence has no argument or one that is not `1*DIGIT` (a sign, a
   *   fraction, a negative number, letters, whitespace around `=`, single quotes), or when it
   *   occurs several times with different
   *   values. RFC 9111 §4.2.1 lets a cache use the first occurrence or consider the response
   *   stale; this cache does the latter, the most restrictive reading, so that neither
   *   `max-age=1, max-age=3600` nor `max-age=3600, max-age=1` is served fresh for an hour;
   * - otherwise the number of seconds; the quoted form (`"60"`) is accepted (RFC 9111 §5.2),
   *   leading zeros are allowed, and values beyond 2^31 are taken as 2^31 (§1.2.2).
   */
  seconds(name: string): number | 'invalid' | undefined {
    const values = this.values(name);
    if (values.length === 0) return undefined;
    let out: number | undefined;
    for (const v of values) {
      const n = deltaSeconds(v);
      if (n === undefined) return 'invalid';
      if (out !== undefined && out !== n) return 'invalid';
      out = n;
    }
    return out;
  }

  /**
   * The field names of a directive that may list them (`no-cache`, `private`): undefined when
   * absent, `true` when one occurrence is bare (it applies to the whole response, and the most
   * restrictive occurrence wins, RFC 9111 §4.2.1), otherwise the lower-case names of every
   * occurrence. An argument that lists no name (`no-cache=""`) is taken as the bare form.
   */
  fieldNames(name: string): true | string[] | undefined {
    const values = this.values(name);
    if (values.length === 0) return undefined;
    const names = new Set<string>();
    for (const v of values) {
      if (v === true) return true;
      const listed = v
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      if (listed.length === 0) return true;
      for (const n of listed) names.add(n);
    }
    return [...names];
  }
}

function deltaSeconds(v: DirectiveValue): number | undefined {
  if (v === true) return undefined;
  const s = v.replace(/[ \t]+$/, '');
  if (!/^[0-9]+$/.test(s)) return undefined;
  const digits = s.replace(/^0+(?=\d)/, '');
  if (digits.length > 10) return MAX_DELTA_SECONDS;
  return Math.min(Number(digits), MAX_DELTA_SECONDS);
}

/**
 * Parse `Cache-Control` (RFC 9111 §5.2): `token [ "=" ( token / quoted-string ) ]`, separated by
 * commas, over one or several header lines. Names are lower-cased; quoted arguments are
 * unquoted (backslash escapes removed) and may contain commas (`no-cache="a, b"`); empty list
 * members are skipped. Nothing is thrown: what cannot be read is kept as text and judged by
 * the accessor that needs it.
 */
export function parseCacheControl(value: string | readonly string[] | undefined): CacheDirectives {
  const map = new Map<string, DirectiveValue[]>();
  const lines = value === undefined ? [] : typeof value === 'string' ? [value] : value;
  for (const line of lines) parseLine(line, map);
  return new CacheDirectives(map);
}

function parseLine(s: string, map: Map<string, DirectiveValue[]>): void {
  let i = 0;
  const n = s.length;
  while (i < n) {
    // Skip separators and whitespace before a member.
    while (i < n && (s[i] === ',' || s[i] === ' ' || s[i] === '\t')) i++;
    if (i >= n) break;
    let j = i;
    while (j < n && s[j] !== ',' && s[j] !== '=') j++;
    const rawName = s.slice(i, j);
    const name = rawName.trim().toLowerCase();
    let value: DirectiveValue = true;
    i = j;
    if (s[i] === '=') {
      i++;
      // The grammar has no whitespace around "=": `max-age =60` and `max-age= 60` are kept with
      // a leading space, which no argument accessor accepts (the directive is then invalid).
      const spaced = /[ \t]$/.test(rawName) || s[i] === ' ' || s[i] === '\t';
      while (i < n && (s[i] === ' ' || s[i] === '\t')) i++;
      if (spaced) {
        let k = i;
        while (k < n && s[k] !== ',') k++;
        value = ` ${s.slice(i, k).trim()}`;
        i = k;
      } else if (s[i] === '"') {
        i++;
        let text = '';
        while (i < n && s[i] !== '"') {
          if (s[i] === '\\' && i + 1 < n) i++;
          text += s[i];
          i++;
        }
        i++; // the closing quote
        value = text;
        // Anything between the closing quote and the next comma makes the argument invalid.
        let k = i;
        while (k < n && s[k] !== ',') k++;
        if (s.slice(i, k).trim() !== '') value = `"${text}"${s.slice(i, k)}`;
        i = k;
      } else {
        let k = i;
        while (k < n && s[k] !== ',') k++;
        value = s.slice(i, k).trim();
        i = k;
      }
    }
    if (!name) continue;
    const list = map.get(name);
    if (list) list.push(value);
    else map.set(name, [value]);
  }
}

/**
 * The targeted cache-control fields this cache reads, most specific first (RFC 9213 §2.2):
 * `Dogpile-Cache-Control` (read by this cache only, and removed from the response before it
 * leaves the server), then `CDN-Cache-Control`.
 */
const TARGETED_FIELDS = ['dogpile-cache-control', 'cdn-cache-control'] as const;

/** Which field the caching policy of a response came from. */
export type PolicySource = (typeof TARGETED_FIELDS)[number] | 'cache-control';

/**
 * The directives that govern this cache for a response (RFC 9213 §2.2): the first targeted
 * field in {@link TARGETED_FIELDS} order that is present, non-empty and parses as a Structured
 * Fields Dictionary (RFC 8941 §3.2) replaces `Cache-Control` entirely, and also `Expires` and
 * `Pragma` (`source` tells the caller to ignore them). A targeted field that is empty or fails
 * to parse is ignored, as if absent; with none usable, `Cache-Control` applies.
 */
export function selectCacheDirectives(headers: HeaderBag): { directives: CacheDirectives; source: PolicySource } {
  for (const field of TARGETED_FIELDS) {
    const lines = fieldLines(headers, field);
    if (lines.length === 0) continue;
    const directives = parseTargetedField(lines);
    if (directives) return { directives, source: field };
  }
  return { directives: parseCacheControl(fieldLines(headers, 'cache-control')), source: 'cache-control' };
}

/**
 * Parse a targeted field (RFC 9213 §2.1) as a Structured Fields Dictionary; undefined when it is
 * empty or not a valid Dictionary (upper-case names, `max-age = 5`, unbalanced quotes...).
 * A known directive with a value of the wrong type (`max-age="60"`, `max-age=-5`,
 * `max-age=1.5`, `no-store=1`) also makes the field invalid (RFC 9213 §2.1).
 * Members map to directives: an Integer becomes its text, a String or Token its text, `?1` or
 * a bare key `true`, an Inner List of Strings/Tokens a comma-joined field list
 * (`no-cache=("a" "b")`); a member set to `?0` is absent. Parameters are ignored.
 * A repeated key keeps its last value (RFC 8941 §4.2.2).
 */
export function parseTargetedField(value: string | readonly string[]): CacheDirectives | undefined {
  const text = (typeof value === 'string' ? [value] : value).join(', ');
  const dict = parseSfDictionary(text);
  if (!dict || dict.size === 0) return undefined;
  const map = new Map<string, DirectiveValue[]>();
  for (const [name, member] of dict) {
    if (!memberTypeFits(name, member)) return undefined;
    if (member.value !== false) map.set(name, [member.value]);
  }
  return new CacheDirectives(map);
}

/** Directives whose argument is a non-negative Integer (delta-seconds) in a targeted field. */
const INTEGER_DIRECTIVES = new Set(['max-age', 's-maxage', 'stale-while-revalidate', 'stale-if-error']);
/** Directives without an argument: a Boolean in a targeted field. */
const BOOLEAN_DIRECTIVES = new Set(['no-store', 'must-revalidate', 'proxy-revalidate', 'public', 'no-transform', 'immutable', 'must-understand']);

/**
 * RFC 9213 §2.1: the types of known directives are inferred from RFC 9111 and values that
 * violate them are not consumed (a `max-age` of `"60"`, `-5` or `1.5`). This cache then ignores
 * the whole field, falling back to the next one, rather than guess at a part of it.
 */
function memberTypeFits(name: string, member: SfMember): boolean {
  if (INTEGER_DIRECTIVES.has(name)) return member.type === 'integer' && !String(member.value).startsWith('-');
  if (BOOLEAN_DIRECTIVES.has(name)) return member.type === 'boolean';
  if (name === 'no-cache' || name === 'private') return member.type === 'boolean' || member.type === 'string' || member.type === 'inner-list';
  return true;
}

type SfType = 'integer' | 'decimal' | 'string' | 'token' | 'boolean' | 'bytes' | 'inner-list';

/** A Dictionary member as a directive value, with the Structured Fields type it had. */
interface SfMember {
  type: SfType;
  value: DirectiveValue | false;
}

/** A minimal RFC 8941 Dictionary parser: the members, or undefined on any syntax error. */
function parseSfDictionary(input: string): Map<string, SfMember> | undefined {
  const s = input.replace(/^ +| +$/g, '');
  const out = new Map<string, SfMember>();
  let lastType: SfType = 'boolean';
  let i = 0;
  const n = s.length;
  const isLcalpha = (c: string | undefined) => c !== undefined && c >= 'a' && c <= 'z';
  const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
  const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/;

  const parseKey = (): string | undefined => {
    if (!isLcalpha(s[i]) && s[i] !== '*') return undefined;
    const start = i;
    while (i < n && (isLcalpha(s[i]) || isDigit(s[i]) || '_-.*'.includes(s[i]!))) i++;
    return s.slice(start, i);
  };
  const parseBareItem = (): DirectiveValue | false | undefined => {
    const c = s[i];
    if (c === '-' || isDigit(c)) {
      const m = /^-?\d{1,15}(\.\d{1,3})?/.exec(s.slice(i));
      if (!m) return undefined;
      if (m[1] !== undefined && m[0].replace(/^-/, '').indexOf('.') > 12) return undefined;
      i += m[0].length;
      if (isDigit(s[i]) || s[i] === '.') return undefined;
      lastType = m[1] === undefined ? 'integer' : 'decimal';
      return m[0];
    }
    if (c === '"') {
      i++;
      let text = '';
      while (i < n) {
        const ch = s[i]!;
        if (ch === '\\') {
          const next = s[i + 1];
          if (next !== '"' && next !== '\\') return undefined;
          text += next;
          i += 2;
          continue;
        }
        if (ch === '"') {
          i++;
          lastType = 'string';
          return text;
        }
        const code = ch.charCodeAt(0);
        if (code < 0x20 || code > 0x7e) return undefined;
        text += ch;
        i++;
      }
      return undefined;
    }
    if (c === '*' || (c !== undefined && /[A-Za-z]/.test(c))) {
      const start = i;
      i++;
      while (i < n && TCHAR.test(s[i]!)) i++;
      lastType = 'token';
      return s.slice(start, i);
    }
    if (c === '?') {
      if (s[i + 1] === '1' || s[i + 1] === '0') {
        i += 2;
        lastType = 'boolean';
        return s[i - 1] === '1';
      }
      return undefined;
    }
    if (c === ':') {
      const m = /^:[A-Za-z0-9+/=]*:/.exec(s.slice(i));
      if (!m) return undefined;
      i += m[0].length;
      lastType = 'bytes';
      return m[0];
    }
    return undefined;
  };
  const parseParameters = (): boolean => {
    while (s[i] === ';') {
      i++;
      while (s[i] === ' ') i++;
      if (parseKey() === undefined) return false;
      if (s[i] === '=') {
        i++;
        if (parseBareItem() === undefined) return false;
      }
    }
    return true;
  };
  const parseInnerList = (): string | undefined => {
    i++; // (
    const items: string[] = [];
    while (i < n) {
      while (s[i] === ' ') i++;
      if (s[i] === ')') {
        i++;
        return parseParameters() ? items.join(', ') : undefined;
      }
      const item = parseBareItem();
      if (item === undefined) return undefined;
      if (typeof item === 'string') items.push(item);
      if (!parseParameters()) return undefined;
      if (s[i] !== ' ' && s[i] !== ')') return undefined;
    }
    return undefined;
  };

  if (n === 0) return out;
  while (i < n) {
    const key = parseKey();
    if (key === undefined) return undefined;
    let member: SfMember = { type: 'boolean', value: true };
    if (s[i] === '=') {
      i++;
      if (s[i] === '(') {
        const list = parseInnerList();
        if (list === undefined) return undefined;
        member = { type: 'inner-list', value: list };
      } else {
        const item = parseBareItem();
        if (item === undefined) return undefined;
        member = { type: lastType, value: item };
        if (!parseParameters()) return undefined;
      }
    } else if (!parseParameters()) {
      return undefined;
    }
    out.delete(key); // the last occurrence wins and takes the last position
    out.set(key, member);
    while (s[i] === ' ' || s[i] === '\t') i++;
    if (i >= n) return out;
    if (s[i] !== ',') return undefined;
    i++;
    while (s[i] === ' ' || s[i] === '\t') i++;
    if (i >= n) return undefined;
  }
  return out;
}
