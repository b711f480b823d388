import { createHash } from 'node:crypto';

/**
 * Redis Cluster hashes only the hash tag of a key: the text between its first `{` and the
 * first `}` after it, when that text is not empty. The library's keys are `prefix:segment:{id}`
 * plus, for some, a suffix (`:fence`, `:q`), and the prefix holds no brace, so the tag is `id`
 * up to its first `}`: every key of one id lands on one slot, whatever the id holds, except
 * when the id starts with `}`. Then the tag is empty, each key is hashed whole, and the keys of
 * one id scatter over the cluster.
 */
export function breaksHashTag(id: string): boolean {
  return id.charCodeAt(0) === 125; /* } */
}

/** `#` + the base64url SHA-256 of `text`: a fixed-length id with no brace in it. */
export function digestId(text: string): string {
  return `#${createHash('sha256').update(text).digest('base64url')}`;
}
