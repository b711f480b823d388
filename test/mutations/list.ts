/**
 * The mutations `npm run mutate` applies (tools/mutate.ts), one at a time: each breaks one
 * critical point of the protocol, and the tests named must fail on it. `search` must occur
 * exactly once in `file`; when the code moves on, update the entry (the run reports it stale).
 */
export interface Mutation {
  id: string;
  /** The mechanism removed, in a few words. */
  breaks: string;
  file: string;
  search: string;
  replace: string;
  /** Test files that must fail with the mutation applied. */
  tests: string[];
  /** Optional `-t` filter: only the tests that claim the mechanism. */
  filter?: string;
}

/** How many times `search` occurs in `text` (a mutation's file): the mutation applies only where that is 1. */
export function occurrences(text: string, search: string): number {
  let n = 0;
  for (let i = text.indexOf(search); i !== -1; i = text.indexOf(search, i + 1)) n++;
  return n;
}

const CACHE_SCRIPTS = 'src/store/cache-scripts.ts';
const LOCK_SCRIPTS = 'src/lock/lock-scripts.ts';

export const MUTATIONS: Mutation[] = [
  // The look-up-or-lead script and the commit (store and release).
  {
    id: 'lookup-nx',
    breaks: 'the look-up takes the lead lock whether or not another caller holds it',
    file: CACHE_SCRIPTS,
    search: 'if left == -2 then\n  if lead() then return {2, time} end',
    replace: "if true then\n  if redis.call('SET', lock_key, token, 'PX', lock_ttl) then clock() return {2, time} end",
    tests: ['test/cache-processes.test.ts'],
    filter: '8 processes',
  },
  {
    id: 'late-lookup-lead',
    breaks: 'a look-up that reaches Redis after its caller gave up still takes the lead lock',
    file: CACHE_SCRIPTS,
    search: "  if not_after ~= nil and not_after ~= '' and clock() > tonumber(not_after) then return false end",
    replace: '',
    tests: ['test/late-lookups.test.ts'],
  },
  {
    id: 'stale-lead-nx',
    breaks: 'the refresh of a stale value takes the lead lock without NX',
    file: CACHE_SCRIPTS,
    search: "if ARGV[5] == '1' and lead() then",
    replace: "if ARGV[5] == '1' and redis.call('SET', lock_key, token, 'PX', lock_ttl) then",
    tests: ['test/stale-processes.test.ts'],
    filter: '4 processes on a hot key',
  },
  {
    id: 'commit-token',
    breaks: 'the commit writes without checking that the lock still holds its token',
    file: CACHE_SCRIPTS,
    search: "if redis.call('GET', lock_key) ~= token then return 0 end",
    replace: 'if false then return 0 end',
    tests: ['test/cache.test.ts'],
    filter: 'a leader that lost its lock does not overwrite',
  },
  {
    id: 'commit-publish-value',
    breaks: 'the commit does not announce an inline value',
    file: CACHE_SCRIPTS,
    search: "    redis.call(pub, channel, (mode == 'store' and 'v' or 's') .. bytes)",
    replace: '    -- no announcement',
    tests: ['test/cache.test.ts'],
    filter: 'a waiter gets the leader value from the announcement',
  },
  {
    id: 'commit-publish-large',
    breaks: 'the commit does not announce a value too big to inline',
    file: CACHE_SCRIPTS,
    search: "  elseif mode == 'store' then\n    redis.call(pub, channel, 'V' .. string.sub(bytes, 5, 12))",
    replace: "  elseif mode == 'store' then\n    -- no announcement",
    tests: ['test/cache.test.ts'],
    filter: 'a large value is stored, announced without inlining',
  },
  {
    id: 'commit-publish-error',
    breaks: 'the commit does not announce a loader error',
    file: CACHE_SCRIPTS,
    search: "elseif mode == 'error' then\n  redis.call(pub, channel, 'e' .. bytes)",
    replace: "elseif mode == 'error' then\n  -- no announcement",
    tests: ['test/cache.test.ts'],
    filter: 'onRemoteError',
  },
  {
    id: 'commit-publish-release',
    breaks: 'an abandoned lead is released without an announcement',
    file: CACHE_SCRIPTS,
    search: "  redis.call(pub, channel, 'r')",
    replace: '  -- no announcement',
    tests: ['test/cache.test.ts'],
    filter: 'an abandoned lead is released to the other process',
  },
  {
    id: 'fail-safe-hold',
    breaks: 'a failed refresh does not hold the lock for failSafeRetry',
    file: CACHE_SCRIPTS,
    search: "  redis.call('SET', lock_key, 'F:' .. token, 'PX', ttl)",
    replace: "  redis.call('DEL', lock_key)",
    tests: ['test/stale-processes.test.ts'],
    filter: 'the loader starts throwing',
  },
  {
    id: 'memory-fail-safe-hold',
    breaks: 'the in-process store does not hold a failed refresh for failSafeRetry',
    file: 'src/store/memory-backend.ts',
    search: '      this.locks.set(key, { token, until: performance.now() + commit.holdMs, hold: true });',
    replace: '      this.locks.delete(key);',
    tests: ['test/freshness.test.ts'],
    filter: 'staleIfError \\+ failSafeRetry',
  },
  // Writes announced to the other processes' L1.
  {
    id: 'set-publish',
    breaks: 'set() does not announce the new value',
    file: CACHE_SCRIPTS,
    search: "  redis.call(pub, ARGV[3], 'v' .. bytes)",
    replace: '  -- no announcement',
    tests: ['test/coherence-processes.test.ts'],
    filter: 'set: the new value reaches every process',
  },
  {
    id: 'delete-publish',
    breaks: 'delete() does not announce the delete',
    file: CACHE_SCRIPTS,
    search: "redis.call(ARGV[2] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[1], 'd' .. struct.pack('>d', now))",
    replace: '-- no announcement',
    tests: ['test/coherence-processes.test.ts'],
    filter: 'delete: every process drops its copy',
  },
  {
    id: 'tag-publish',
    breaks: 'invalidateTags() does not announce the new stamp',
    file: CACHE_SCRIPTS,
    search: "redis.call(ARGV[5] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[4], 't' .. text)",
    replace: '-- no announcement',
    tests: ['test/coherence-processes.test.ts'],
    filter: 'invalidateTags: no process returns the old value',
  },
  // The L1's message handlers.
  {
    id: 'l1-deleted',
    breaks: 'the L1 ignores the "deleted" announcement',
    file: 'src/store/l1-links.ts',
    search: "      case 'deleted':\n        l1.heard(key, outcome.at);\n        return;",
    replace: "      case 'deleted':\n        return;",
    tests: ['test/coherence-processes.test.ts'],
    filter: 'delete: every process drops its copy',
  },
  {
    id: 'l1-value',
    breaks: 'the L1 ignores a value announcement',
    file: 'src/store/l1-links.ts',
    search: '        if (!outcome.stored) return;',
    replace: '        return;',
    tests: ['test/coherence-processes.test.ts'],
    filter: 'set: the new value reaches every process',
  },
  {
    id: 'l1-reconnect',
    breaks: 'the L1 keeps trusting its copies after the subscriber reconnected',
    file: 'src/store/l1-links.ts',
    search: '      l1.untrust(key);\n      link.liveAt = existingSharedSubscriber',
    replace: '      link.liveAt = existingSharedSubscriber',
    tests: ['test/coherence-processes.test.ts'],
    filter: 'the subscriber (connections killed between two writes|was down)',
  },
  {
    id: 'tag-channel',
    breaks: 'a process ignores the tag channel',
    file: 'src/store/redis-tags.ts',
    search: 'if (message[0] === 0x74 /* t */) held.stamp =',
    replace: 'if (message[0] === -1) held.stamp =',
    tests: ['test/coherence-processes.test.ts'],
    filter: 'invalidateTags: no process returns the old value',
  },
  // The tag checks.
  {
    id: 'tag-verdict-hard',
    breaks: 'an entry read after its tag was invalidated is not a miss',
    file: 'src/store/tags.ts',
    search: "    if (stamp.hard >= started) return 'gone';",
    replace: "    if (stamp.hard > Number.MAX_VALUE) return 'gone';",
    tests: ['test/tags.test.ts'],
    filter: 'invalidateTags makes every entry carrying a tag a miss',
  },
  {
    id: 'tag-verdict-delta',
    breaks: "a value whose loader ran while its tag was invalidated counts as computed after it",
    file: 'src/store/tags.ts',
    search: 'return entry.createdAt - (entry.delta ?? 0);',
    replace: 'return entry.createdAt;',
    tests: ['test/tags.test.ts'],
    filter: 'a value whose loader ran while its tag was invalidated',
  },
  {
    id: 'tag-stamp-before-write',
    breaks: "a process moves its own tag stamp before Redis took the invalidation",
    file: 'src/store/redis-tags.ts',
    search: '      const [text, stampedAt] = await TAG_INVALIDATE.run(',
    replace: "      const early = this.held.peek(tag);\n      if (early) early.stamp = laterStamp(early.stamp, parseStamp(`${performance.timeOrigin + performance.now()}:0`));\n      const [text, stampedAt] = await TAG_INVALIDATE.run(",
    tests: ['test/tags.test.ts'],
    filter: 'refuses the write, and changes nothing',
  },
  // HTTP: invalidation on writes.
  {
    id: 'http-write-invalidation',
    breaks: 'a successful unsafe request invalidates nothing',
    file: 'src/http/rules/invalidation.ts',
    search: '  if (SAFE_METHODS.has(method.toUpperCase())) return [];',
    replace: '  return [];',
    tests: ['test/http-caching.test.ts'],
    filter: 'a successful POST, PUT, PATCH or DELETE invalidates',
  },
  // The lock product.
  {
    id: 'lock-acquire-nx',
    breaks: 'ACQUIRE takes a lock someone else holds',
    file: LOCK_SCRIPTS,
    search: "if cur == false or (entry ~= '' and cur == '~' .. entry) then",
    replace: 'if true then',
    tests: ['test/lock.test.ts'],
    filter: 'excludes a second holder',
  },
  {
    id: 'lock-release-token',
    breaks: 'RELEASE frees the lock without checking its token',
    file: LOCK_SCRIPTS,
    search: "if redis.call('GET', lock_key) ~= value then return 0 end",
    replace: 'if false then return 0 end',
    tests: ['test/lock.test.ts'],
    filter: 'wrong-owner',
  },
  {
    id: 'lock-extend-token',
    breaks: 'EXTEND renews the lock without checking its token',
    file: 'src/redis/extend-script.ts',
    search: "if redis.call('GET', lock_key) == value then",
    replace: 'if true then',
    tests: ['test/lock.test.ts'],
    filter: 'wrong-owner',
  },
  {
    id: 'lock-hand-off',
    breaks: 'a release does not hand the lock to the first waiter',
    file: LOCK_SCRIPTS,
    search: '  if not nxt[1] then return false end',
    replace: '  do return false end',
    tests: ['test/lock.test.ts'],
    filter: 'a reset hands the lock to the first waiter',
  },
  // The documented defaults.
  {
    id: 'default-lock-ttl',
    breaks: "the cache's lockTtl default is not the README's 5000 ms",
    file: 'src/core/options.ts',
    search: '  lockTtl: 5000,',
    replace: '  lockTtl: 3000,',
    tests: ['test/defaults.test.ts'],
  },
  // One clock, deaf subscribers, late writes.
  {
    id: 'subscriber-close-silent',
    breaks: 'a closed subscriber connection leaves every L1 copy and tag stamp trusted',
    file: 'src/redis/subscriber.ts',
    search: '    this.down = true;\n    for (const state of this.channels.values()) for (const l of [...state.listeners]) l(null);',
    replace: '    this.down = true;',
    tests: ['test/one-clock.test.ts'],
    filter: 'subscriber connection is gone',
  },
  {
    id: 'late-write-deadline',
    breaks: 'a set that reaches Redis after its caller gave up is still applied',
    file: CACHE_SCRIPTS,
    search: "if ARGV[7] ~= '' and now > tonumber(ARGV[7]) then return 0 end",
    replace: '-- no deadline',
    tests: ['test/one-clock.test.ts'],
    filter: 'after its caller gave up',
  },
  {
    id: 'refreshing-tagged-stale',
    breaks: 'a value refreshed in this process is answered stale after one of its tags was invalidated',
    file: 'src/core/refresh.ts',
    search: 'const entry = running.entry.tags === undefined ? running.entry : backend.withKnownTags(running.entry);',
    replace: 'const entry = running.entry;',
    tests: ['test/core-hardening.test.ts'],
    filter: 'invalidated stale value',
  },
];
