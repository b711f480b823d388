/**
 * The campaign's cases and how they become bytes. A case is a small pool of resources (a raw
 * path and a raw query) and a sequence of actions on them: requests (in origin or absolute
 * form, the query in either order, with a mix of header variants), bursts of one request sent
 * at once, writes, and waits that move entries through fresh, stale and gone.
 */
import fc from 'fast-check';

/** Raw paths: one per route kind, plus the paths whose dot segments or `//` a resolver would turn into another route. */
export const PATHS = [
  '/plain/a',
  '/vary/a',
  '/val/a',
  '/cookie/a',
  '/private/a',
  '/nostore/a',
  '/targeted/a',
  '/stream/a',
  '/broken/a',
  '/secret',
  '/d/../secret',
  '/e/%2e%2e/private',
  '/e/%2E%2E/private',
  '/e/private',
  '/d/./secret',
  '//x/y',
  '//127.0.0.1:9/link',
  '/q',
] as const;

/** Query names: a name, its percent-encoded spelling, another case, a bracketed and a `+` one. */
export const QUERY_NAMES = ['a', '%61', 'A', 'b', 'a%5B%5D', '+a', '%20a'] as const;
export const QUERY_VALUES = ['1', '2', '%20', ''] as const;
/** Pairs of spellings that decode to one name. */
export const ONE_NAME = [
  ['a', '%61'],
  ['+a', '%20a'],
  ['a[]', 'a%5B%5D'],
] as const;

export interface Resource {
  path: string;
  query: [name: string, value: string][];
}

export type Form = 'origin' | 'absolute-own' | 'absolute-other';

export interface Headers {
  host?: 'upper' | 'port80' | 'port8080';
  lang?: 'en' | 'fr' | 'en, fr';
  /** Accept-Language sent as two field lines. */
  langTwice?: boolean;
  xfh?: 'evil.test';
  conditional?: 'inm-v1' | 'inm-v2' | 'inm-star' | 'ims-after' | 'ims-before';
  range?: 'bytes=0-9' | 'bytes=5-' | 'bytes=-5' | 'bytes=900-';
  credentials?: 'authorization' | 'cookie';
  /** Fields a client may send that name the cache: `Dogpile-*`, `Cache-Control`, `Pragma`. */
  client?: 'dogpile-cache-control' | 'dogpile-tags' | 'cache-control-no-cache' | 'pragma';
  /** Header names in odd case. */
  mixedCase?: boolean;
}

export type Action =
  | { do: 'request'; resource: number; method: 'GET' | 'HEAD' | 'GET+body'; form: Form; reverseQuery: boolean; headers: Headers; copies: number }
  /** One request through an entry's life: sent, sent again once stale (a background refresh starts), sent again after the refresh. */
  | { do: 'cycle'; resource: number; form: Form; reverseQuery: boolean; headers: Headers }
  | { do: 'write'; resource: number; method: 'POST' | 'PUT' | 'PATCH' | 'DELETE' }
  | { do: 'wait'; ms: number }
  /** `invalidateTags` of the tag the apps put on their tagged routes, called in a guarded process. */
  | { do: 'invalidate' }
  /**
   * Redis paused (`CLIENT PAUSE ALL` for `ms`) or restarted (killed, down for `ms`, started
   * again, empty): the actions after it run while it lasts. Redis is shared by every adapter's
   * apps, so the others see it too.
   */
  | { do: 'redis'; fault: 'pause' | 'restart'; ms: number };

/** The actions that send no request. */
export type NoRequest = Extract<Action, { do: 'wait' | 'invalidate' | 'redis' }>;
export type RequestAction = Exclude<Action, NoRequest>;

export interface Case {
  pool: Resource[];
  actions: Action[];
}

function rarely<T>(arb: fc.Arbitrary<T>, weight = 1): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, { arbitrary: arb, weight });
}

/** Paths a resolver would turn into another route, twice as likely as the others. */
const RESOLVABLE = PATHS.filter((p) => p.includes('/.') || p.includes('%2') || p.startsWith('//'));

const resource: fc.Arbitrary<Resource> = fc.record({
  path: fc.oneof({ arbitrary: fc.constantFrom(...PATHS), weight: 2 }, { arbitrary: fc.constantFrom(...RESOLVABLE), weight: 1 }),
  query: fc.oneof(
    { arbitrary: fc.constant([] as [string, string][]), weight: 2 },
    { arbitrary: fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), fc.constantFrom(...QUERY_VALUES)), { minLength: 1, maxLength: 3 }), weight: 2 },
    {
      // Different values, so that the order of the two is something the app can see.
      arbitrary: fc.tuple(fc.constantFrom(...ONE_NAME), fc.boolean()).map(([[x, y], swap]): [string, string][] => [
        [swap ? y : x, '1'],
        [swap ? x : y, '2'],
      ]),
      weight: 1,
    },
  ),
});

const headers: fc.Arbitrary<Headers> = fc
  .record({
    host: rarely(fc.constantFrom('upper', 'port80', 'port8080') as fc.Arbitrary<Headers['host']>),
    lang: fc.oneof({ arbitrary: fc.constant(undefined), weight: 2 }, { arbitrary: fc.constantFrom('en', 'fr', 'en, fr') as fc.Arbitrary<Headers['lang']>, weight: 1 }),
    langTwice: rarely(fc.constant(true)),
    xfh: rarely(fc.constant('evil.test' as const)),
    conditional: rarely(fc.constantFrom('inm-v1', 'inm-v2', 'inm-star', 'ims-after', 'ims-before') as fc.Arbitrary<Headers['conditional']>),
    range: rarely(fc.constantFrom('bytes=0-9', 'bytes=5-', 'bytes=-5', 'bytes=900-') as fc.Arbitrary<Headers['range']>),
    credentials: rarely(fc.constantFrom('authorization', 'cookie') as fc.Arbitrary<Headers['credentials']>),
    client: rarely(fc.constantFrom('dogpile-cache-control', 'dogpile-tags', 'cache-control-no-cache', 'pragma') as fc.Arbitrary<Headers['client']>),
    mixedCase: rarely(fc.constant(true)),
  })
  .map((h) => Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined)) as Headers);

const request: fc.Arbitrary<Action> = fc.record({
  do: fc.constant('request' as const),
  resource: fc.nat(2),
  method: fc.oneof({ arbitrary: fc.constant('GET' as const), weight: 8 }, { arbitrary: fc.constant('HEAD' as const), weight: 1 }, { arbitrary: fc.constant('GET+body' as const), weight: 1 }),
  form: fc.oneof({ arbitrary: fc.constant('origin' as const), weight: 6 }, { arbitrary: fc.constant('absolute-other' as const), weight: 2 }, { arbitrary: fc.constant('absolute-own' as const), weight: 1 }),
  reverseQuery: fc.boolean(),
  headers,
  copies: fc.oneof({ arbitrary: fc.constant(1), weight: 5 }, { arbitrary: fc.constant(3), weight: 1 }),
});

const cycle: fc.Arbitrary<Action> = fc.record({
  do: fc.constant('cycle' as const),
  resource: fc.nat(2),
  form: fc.oneof({ arbitrary: fc.constant('origin' as const), weight: 6 }, { arbitrary: fc.constant('absolute-other' as const), weight: 1 }, { arbitrary: fc.constant('absolute-own' as const), weight: 1 }),
  reverseQuery: fc.boolean(),
  headers,
});

/** The waits of a cycle: into the stale window, then long enough for the background refresh to land. */
export const CYCLE_WAITS = [450, 150] as const;

const action: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: request, weight: 24 },
  { arbitrary: cycle, weight: 8 },
  { arbitrary: fc.record({ do: fc.constant('wait' as const), ms: fc.constantFrom(50, 400, 400, 900, 1900) }), weight: 12 },
  { arbitrary: fc.record({ do: fc.constant('write' as const), resource: fc.nat(2), method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE') as fc.Arbitrary<'POST' | 'PUT' | 'PATCH' | 'DELETE'> }), weight: 4 },
  { arbitrary: fc.constant({ do: 'invalidate' as const }), weight: 4 },
  {
    arbitrary: fc.record({ do: fc.constant('redis' as const), fault: fc.constantFrom('pause', 'restart') as fc.Arbitrary<'pause' | 'restart'>, ms: fc.constantFrom(200, 800) }),
    // Rare: every adapter's apps share the one Redis.
    weight: 1,
  },
);

export const caseArbitrary: fc.Arbitrary<Case> = fc.record({
  pool: fc.array(resource, { minLength: 1, maxLength: 2 }),
  actions: fc.array(action, { minLength: 1, maxLength: 10 }),
});

/** The request target of `r` (the query in the order given, or reversed). */
export function target(r: Resource, reverseQuery = false): string {
  const pairs = reverseQuery ? [...r.query].reverse() : r.query;
  return pairs.length === 0 ? r.path : `${r.path}?${pairs.map(([n, v]) => `${n}=${v}`).join('&')}`;
}

function name(n: string, mixed: boolean | undefined): string {
  if (!mixed) return n;
  return [...n].map((ch, i) => (i % 2 === 0 ? ch.toLowerCase() : ch.toUpperCase())).join('');
}

export const IMS = { 'ims-after': 'Thu, 01 Jan 2026 00:00:00 GMT', 'ims-before': 'Mon, 01 Jan 2024 00:00:00 GMT' } as const;

/** The exact bytes of a request action against `host` (the case's own authority). */
export function requestBytes(c: Case, a: RequestAction, host: string): string {
  const r = c.pool[a.resource % c.pool.length]!;
  const h: Headers = a.do === 'write' ? {} : a.headers;
  const form: Form = a.do === 'write' ? 'origin' : a.form;
  const t = target(r, a.do !== 'write' && a.reverseQuery);
  const requestTarget = form === 'origin' ? t : `http://${form === 'absolute-own' ? host : 'evil.test'}${t}`;
  const method = a.do === 'cycle' ? 'GET' : a.method === 'GET+body' ? 'GET' : a.method;
  const hostValue = h.host === 'upper' ? host.toUpperCase() : h.host === 'port80' ? `${host}:80` : h.host === 'port8080' ? `${host}:8080` : host;
  const lines: string[] = [`${method} ${requestTarget} HTTP/1.1`, `${name('Host', h.mixedCase)}: ${hostValue}`];
  if (h.lang !== undefined) {
    lines.push(`${name('Accept-Language', h.mixedCase)}: ${h.lang}`);
    if (h.langTwice) lines.push(`${name('Accept-Language', h.mixedCase)}: de`);
  }
  if (h.xfh !== undefined) lines.push(`${name('X-Forwarded-Host', h.mixedCase)}: ${h.xfh}`);
  if (h.conditional === 'inm-v1') lines.push(`${name('If-None-Match', h.mixedCase)}: "v1"`);
  if (h.conditional === 'inm-v2') lines.push(`${name('If-None-Match', h.mixedCase)}: "v2"`);
  if (h.conditional === 'inm-star') lines.push(`${name('If-None-Match', h.mixedCase)}: *`);
  if (h.conditional === 'ims-after' || h.conditional === 'ims-before') lines.push(`${name('If-Modified-Since', h.mixedCase)}: ${IMS[h.conditional]}`);
  if (h.range !== undefined) lines.push(`${name('Range', h.mixedCase)}: ${h.range}`);
  if (h.credentials === 'authorization') lines.push(`${name('Authorization', h.mixedCase)}: Bearer campaign`);
  if (h.credentials === 'cookie') lines.push(`${name('Cookie', h.mixedCase)}: sid=campaign`);
  if (h.client === 'dogpile-cache-control') lines.push('Dogpile-Cache-Control: max-age=600');
  if (h.client === 'dogpile-tags') lines.push('Dogpile-Tags: t');
  if (h.client === 'cache-control-no-cache') lines.push('Cache-Control: no-cache');
  if (h.client === 'pragma') lines.push('Pragma: no-cache');
  const body = a.do === 'write' || (a.do === 'request' && a.method === 'GET+body') ? 'hi' : '';
  if (body !== '') lines.push('Content-Type: text/plain', `Content-Length: ${body.length}`);
  lines.push('Connection: close');
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** The same request without its conditional or Range fields (what the app answers in full). */
export function unconditional(bytes: string): string {
  const [head, body] = splitHead(bytes);
  return `${head.filter((l) => !/^(if-none-match|if-modified-since|range):/i.test(l)).join('\r\n')}\r\n\r\n${body}`;
}

function splitHead(bytes: string): [string[], string] {
  const end = bytes.indexOf('\r\n\r\n');
  return [bytes.slice(0, end).split('\r\n'), bytes.slice(end + 4)];
}

/** The case as text, one action a line, each request as the bytes it sends (for a failure report). */
export function describeCase(c: Case, host: string): string {
  return c.actions
    .map((a, i) => {
      if (a.do === 'wait') return `${i}: wait ${a.ms} ms`;
      if (a.do === 'invalidate') return `${i}: invalidateTags`;
      if (a.do === 'redis') return `${i}: Redis ${a.fault === 'pause' ? 'paused' : 'restarted, down'} for ${a.ms} ms`;
      const copies = a.do === 'request' && a.copies > 1 ? ` (x${a.copies} at once)` : '';
      const cycle = a.do === 'cycle' ? ` (then wait ${CYCLE_WAITS[0]} ms, again, wait ${CYCLE_WAITS[1]} ms, again)` : '';
      return `${i}: ${JSON.stringify(requestBytes(c, a, host))}${copies}${cycle}`;
    })
    .join('\n');
}
