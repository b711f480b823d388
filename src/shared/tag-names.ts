import { InvalidOptionError } from './errors.js';

/* Tag lists as the caller gives them: checked once, where every layer may import them. */

/** The most tags one entry may carry. */
export const MAX_TAGS = 64;
/** The longest tag, in characters. */
export const MAX_TAG_LENGTH = 1024;

/**
 * Checks a list of tags (`InvalidOptionError` naming `option`: not an array, an empty or
 * non-string tag, one longer than `MAX_TAG_LENGTH`, more than `MAX_TAGS` distinct tags) and
 * returns it without duplicates, in its order.
 */
export function validateTags(tags: unknown, option = 'tags'): string[] {
  if (!Array.isArray(tags)) throw new InvalidOptionError(option, `expected an array of strings, got ${tags === null ? 'null' : typeof tags}`);
  const seen = new Set<string>();
  for (let i = 0; i < tags.length; i++) {
    const tag: unknown = tags[i];
    if (typeof tag !== 'string') throw new InvalidOptionError(option, `tag ${i} is ${tag === null ? 'null' : typeof tag}; every tag must be a non-empty string`);
    if (tag.length === 0) throw new InvalidOptionError(option, `tag ${i} is empty; every tag must be a non-empty string`);
    if (tag.length > MAX_TAG_LENGTH) throw new InvalidOptionError(option, `tag ${i} is ${tag.length} characters long; the limit is ${MAX_TAG_LENGTH}`);
    seen.add(tag);
  }
  if (seen.size > MAX_TAGS) throw new InvalidOptionError(option, `${seen.size} distinct tags given; an entry carries at most ${MAX_TAGS}`);
  return [...seen];
}

/** Two tag lists as one (duplicates dropped); `InvalidOptionError` naming `option` past `MAX_TAGS`. */
export function mergeTags(a: readonly string[] | undefined, b: readonly string[] | undefined, option: string): readonly string[] | undefined {
  if (!b || b.length === 0) return a;
  if (!a || a.length === 0) return b;
  const merged = [...new Set([...a, ...b])];
  if (merged.length > MAX_TAGS) throw new InvalidOptionError(option, `${merged.length} distinct tags in all; an entry carries at most ${MAX_TAGS}`);
  return merged;
}
