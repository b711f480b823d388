/**
 * The package as the tests that install it see it: whether dist/ is what `npm run build` makes of
 * src/ now.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** True when dist/ is missing or older than a file under src/ (`npm test` builds first anyway). */
export function buildIsStale(): boolean {
  const built = path.join(root, 'dist', 'index.js');
  if (!existsSync(built)) return true;
  const builtAt = statSync(built).mtimeMs;
  const newest = (dir: string): number =>
    Math.max(0, ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(path.join(dir, e.name)) : statSync(path.join(dir, e.name)).mtimeMs)));
  return newest(path.join(root, 'src')) > builtAt;
}
