import { breaksHashTag, digestId } from '../redis/hash-tag.js';

/** Keys longer than this are stored under a SHA-256 digest of the key. */
const MAX_PLAIN_KEY_LENGTH = 512;

/**
 * The part of the Redis key that identifies a cache key (or a tag). Keys up to 512 characters
 * are used as they are; longer ones, any key starting with `#`, and any key starting with `}`
 * (it would leave the hash tag `{id}` empty, see `breaksHashTag`) become `#` + the base64url
 * SHA-256 of the key, so a plain key and a digest can never meet.
 */
function storageId(key: string): string {
  if (key.length <= MAX_PLAIN_KEY_LENGTH && key.charCodeAt(0) !== 35 /* # */ && !breaksHashTag(key)) return key;
  return digestId(key);
}

/**
 * The Redis keys and channel of one cache key, all with the hash tag `{id}` so they land on
 * one cluster slot (an id may hold `{` and `}` but never starts with `}`, so its tag is never empty): the value, the lead lock, the channel, and a short-lived copy of a value
 * shared with waiters but not stored (`s`). The segments `v`, `l`, `c`, `s` never overlap
 * with `RedisLock`'s `lock`.
 */
export function cacheKeys(prefix: string, key: string) {
  const id = storageId(key);
  return { value: `${prefix}:v:{${id}}`, lock: `${prefix}:l:{${id}}`, channel: `${prefix}:c:{${id}}`, shared: `${prefix}:s:{${id}}` };
}

/** Just the value key of `key` (the read path needs no lock or channel name). */
export function valueKey(prefix: string, key: string): string {
  return `${prefix}:v:{${storageId(key)}}`;
}

/** The Redis key and channel of a tag's invalidation stamp (segments `t` and `tc`, one slot). */
export function tagKeys(prefix: string, tag: string) {
  const id = storageId(tag);
  return { stamp: `${prefix}:t:{${id}}`, channel: `${prefix}:tc:{${id}}` };
}
