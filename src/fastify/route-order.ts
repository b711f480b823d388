import type { FastifyInstance } from 'fastify';
import { warn } from '../shared/diagnostics.js';

/** Gives `fn` a name of its own: `printRoutes()` lists a route's hooks by name. */
export function named<F extends (...args: never[]) => unknown>(fn: F, name: string): F {
  return Object.defineProperty(fn, 'name', { value: name });
}

/** One route of a `printRoutes({ method: 'GET', commonPrefix: false, includeMeta })` tree: its path and its meta lines. */
interface PrintedRoute {
  path: string;
  meta: string[];
}

const TREE_NODE = /^((?:│ {3}| {4})*)(?:├── |└── )(.*)$/;
const GET_ROUTE = ' (GET)';

/**
 * The GET routes of a route tree as Fastify prints it with `commonPrefix: false`: each printed
 * node's key continues its parent's path; a node's routes (one per set of constraints) follow
 * their key, each with its `• (hook) [...]` lines.
 */
function printedRoutes(tree: string): PrintedRoute[] {
  const routes: PrintedRoute[] = [];
  const paths: string[] = [];
  let nodePath = '';
  let current: PrintedRoute | undefined;
  for (const line of tree.split('\n')) {
    const node = TREE_NODE.exec(line);
    let text: string;
    if (node) {
      const depth = node[1]!.length / 4;
      text = node[2]!;
      const at = text.indexOf(GET_ROUTE);
      nodePath = (depth === 0 ? '' : (paths[depth - 1] ?? '')) + (at < 0 ? text : text.slice(0, at));
      paths.length = depth;
      paths[depth] = nodePath;
    } else {
      text = line.replace(/^[│ ]+/, '');
      if (text.startsWith('• (')) {
        current?.meta.push(text);
        continue;
      }
    }
    if (text.includes(GET_ROUTE)) {
      current = { path: nodePath, meta: [] };
      routes.push(current);
    }
  }
  return routes;
}

/** The hook names of one meta line of `hook` (`• (onSend) ["a()","b()"]`), or none. */
function hooksOf(route: PrintedRoute, hook: string): string {
  return route.meta.find((line) => line.startsWith(`• (${hook}) `)) ?? '';
}

/** How many routes a start-up warning names before it says how many more there are. */
const NAMED_ROUTES = 5;

/**
 * Warns (`DOGPILE_FASTIFY_ORDER`) of the GET routes in the plugin's scope that it never wrapped:
 * every such route carries the plugin's `scopeHook` (onRequest), and one that carries it without
 * the `captureHook` (onSend) was added before the plugin's `onRoute` hook was in place (the
 * plugin registered after it, or without `await` before it), so its handler runs every time.
 */
export function warnOfEarlyRoutes(fastify: FastifyInstance, scopeHook: string, captureHook: string): void {
  const tree = fastify.printRoutes({ method: 'GET', commonPrefix: false, includeMeta: ['onRequest', 'onSend'] });
  const missed = printedRoutes(tree)
    .filter((route) => hooksOf(route, 'onRequest').includes(`"${scopeHook}()"`) && !hooksOf(route, 'onSend').includes(`"${captureHook}()"`))
    .map((route) => `GET ${route.path}`);
  if (missed.length === 0) return;
  const list = missed.slice(0, NAMED_ROUTES).join(', ') + (missed.length > NAMED_ROUTES ? ` and ${missed.length - NAMED_ROUTES} more` : '');
  warn(
    'DOGPILE_FASTIFY_ORDER',
    `dogpile-guard caches none of the routes added before dogpileGuardPlugin was in place (${list}): ` +
      'register it with `await fastify.register(dogpileGuardPlugin, { ... })` before the routes it should cache ' +
      '(a route to leave uncached says `config: { dogpile: false }`).',
  );
}
