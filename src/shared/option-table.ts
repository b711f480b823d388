import { describe, toMs } from './duration.js';
import { InvalidOptionError } from './errors.js';
import { checkKnownOptions } from './known-options.js';

/**
 * Options declared once. Each options interface has one table, an object literal tied to it
 * with `satisfies OptionTable<XxxOptions>`: one row per field of the interface (a field
 * without a row, or a row without a field, does not compile), giving the field's default,
 * its check, its one-line doc and how the docs' option table shows the default. The resolved
 * options (`resolveOptions`), the known names behind "did you mean" (`optionNames`) and the
 * error messages (each check names the option it was given) come from the table; the docs'
 * tables are pinned against it by test/option-tables.test.ts. Checks that involve two fields
 * stay as code after the per-field checks.
 */

/**
 * A field's check: the value given (never undefined) and the option's full name (e.g.
 * `l1.ttl`); returns the value resolved (a duration in ms, ...) or throws an
 * `InvalidOptionError` naming the option.
 */
export type Check<R> = (value: unknown, option: string) => R;

export interface OptionRow<R = unknown> {
  /** The resolved value of an omitted field (absent: undefined). */
  readonly default?: R;
  /** The field must be given: an omitted one goes to `check` (whose message says what is expected). */
  readonly required?: true;
  readonly check: Check<R>;
  /** One line: what the option does. */
  readonly doc: string;
  /** The default as the docs' option table shows it (only for the tables the docs carry). */
  readonly shown?: string;
}

/** A row for every field of `T`, and no other (with `satisfies`). */
export type OptionTable<T> = { readonly [K in keyof T]-?: OptionRow };

type AnyTable = Readonly<Record<string, OptionRow>>;

/** What a row resolves to: its check's result, or its default when the field is omitted. */
export type ResolvedRow<Row> = Row extends { check: Check<infer R> } ? (Row extends { default: infer D } ? R | D : Row extends { required: true } ? R : R | undefined) : never;

/** A table's fields, resolved. */
export type ResolvedTable<Table> = { -readonly [K in keyof Table]: ResolvedRow<Table[K]> };

/** The table's option names: the known-option list of `checkKnownOptions`. */
export function optionNames(table: AnyTable): readonly string[] {
  return Object.keys(table);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Checks and resolves `table`'s fields of `given` (fields not in the table are not read):
 * an omitted field takes `defaults[name]` when given there, else the row's default (a required
 * one is refused by its check, before any other); a field with no value given or by default is left out. `path` is put before every option name (`'l1.'`).
 */
export function resolveFields<Table extends AnyTable>(
  table: Table,
  given: object,
  { path = '', defaults }: { path?: string; defaults?: { readonly [K in keyof Table]?: unknown } } = {},
): ResolvedTable<Table> {
  const plan = planOf(table);
  // A copy of the omitted fields' values (made once per table and defaults object), then the
  // fields given, each checked by its row.
  return checkGiven(plan, Object.assign({}, omittedValues(plan, defaults)), given as Record<string, unknown>, path, false) as ResolvedTable<Table>;
}

/**
 * `resolveFields` for the options of every call (each `getOrCompute` with an options object,
 * each HTTP request): the result holds the fields given, checked, and inherits the omitted
 * fields' values (made once per table and defaults object) instead of copying them. Read its
 * fields; do not spread it or list its keys. Unknown fields are refused.
 */
export function resolveCallFields<Table extends AnyTable>(table: Table, given: object, defaults: { readonly [K in keyof Table]?: unknown }): ResolvedTable<Table> {
  const plan = planOf(table);
  return checkGiven(plan, Object.create(omittedValues(plan, defaults)) as Record<string, unknown>, given as Record<string, unknown>, '', true) as ResolvedTable<Table>;
}

/**
 * Checks the fields of `values` into `out`: a required one left out first (its check says what
 * is expected), then each given field by its row. `refuseUnknown`: a field the table lacks is
 * refused as `checkKnownOptions` refuses it ("did you mean").
 */
function checkGiven(plan: Plan, out: Record<string, unknown>, values: Record<string, unknown>, path: string, refuseUnknown: boolean): Record<string, unknown> {
  for (const name of plan.required) if (values[name] === undefined) plan.rows.get(name)!.check(undefined, `${path}${name}`);
  for (const name in values) {
    const row = plan.rows.get(name);
    if (row === undefined && refuseUnknown) checkKnownOptions(values, plan.names, path);
    const value = values[name];
    if (row === undefined || value === undefined) continue;
    const resolved = row.check(value, path === '' ? name : `${path}${name}`);
    if (resolved !== undefined) out[name] = resolved;
    else if (name in out) out[name] = undefined; // a check that resolves a given value to nothing
  }
  return out;
}

interface Plan {
  readonly table: AnyTable;
  readonly names: readonly string[];
  readonly rows: ReadonlyMap<string, OptionRow>;
  readonly required: readonly string[];
  readonly omitted: Readonly<Record<string, unknown>>;
  readonly omittedOver: WeakMap<object, Readonly<Record<string, unknown>>>;
}

/** Per table: its rows by name, its required fields, the omitted fields' values (alone, and over each defaults object met: a cache's, made once). */
const PLANS = new WeakMap<AnyTable, Plan>();

function planOf(table: AnyTable): Plan {
  let plan = PLANS.get(table);
  if (plan === undefined) {
    const names = Object.keys(table);
    plan = {
      table,
      names,
      rows: new Map(names.map((name) => [name, table[name]!])),
      required: names.filter((name) => table[name]!.required === true),
      omitted: valuesWhenOmitted(table, undefined),
      omittedOver: new WeakMap(),
    };
    PLANS.set(table, plan);
  }
  return plan;
}

function omittedValues(plan: Plan, defaults: object | undefined): Readonly<Record<string, unknown>> {
  if (defaults === undefined) return plan.omitted;
  let values = plan.omittedOver.get(defaults);
  if (values === undefined) {
    values = valuesWhenOmitted(plan.table, defaults as Record<string, unknown>);
    plan.omittedOver.set(defaults, values);
  }
  return values;
}

/** The fields' values when omitted, in the table's order: `defaults[name]` when given there, else the row's default; undefined ones left out. */
function valuesWhenOmitted(table: AnyTable, defaults: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(table)) {
    const value = defaults !== undefined && name in defaults ? defaults[name] : table[name]!.default;
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * An options object checked against `table`: an object (undefined is `{}`), with no field
 * the table lacks ("did you mean"), each field checked and defaulted by its row. `option`
 * names the object in the error when it is not one; `extra` are further names accepted (and
 * not read).
 */
export function resolveOptions<Table extends AnyTable>(
  table: Table,
  given: unknown,
  { path = '', option = 'options', extra = [] as readonly string[] } = {},
): ResolvedTable<Table> {
  const o = optionsObject(given ?? {}, option);
  checkKnownOptions(o, extra.length === 0 ? optionNames(table) : [...optionNames(table), ...extra], path);
  return resolveFields(table, o, { path });
}

/** `given` when it is an options object (not null, not an array); else an `InvalidOptionError` naming `option`. */
export function optionsObject(given: unknown, option = 'options'): Record<string, unknown> {
  if (!isPlainObject(given)) throw new InvalidOptionError(option, `expected an object, got ${describe(given)}`);
  return given;
}

/**
 * `error` again, naming `option` (e.g. with a prefix: `config.dogpile.softTimeout`) and with
 * `suffix` after its message (where it was found); any other error as it is.
 */
export function renamedOptionError(error: unknown, option: (name: string) => string, suffix = ''): unknown {
  if (!(error instanceof InvalidOptionError)) return error;
  return new InvalidOptionError(option(error.option), `${error.message.replace(/^Invalid [^:]+: /, '')}${suffix}`);
}

// ---- The kinds of check, each written once. ----

/** A duration greater than zero, in ms (`toMs`). */
export const duration: Check<number> = (value, option) => toMs(value, option);

/** A duration of zero or more, in ms (`toMs`). */
export const durationOrZero: Check<number> = (value, option) => toMs(value, option, { allowZero: true });

/** A positive integer. */
export const positiveInt: Check<number> = (value, option) => {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) throw new InvalidOptionError(option, `must be a positive integer, got ${describe(value)}`);
  return value;
};

/** A whole number of bytes, 0 or more. */
export const byteCount: Check<number> = (value, option) => {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidOptionError(option, `must be a whole number of bytes (0 or more), got ${describe(value)}`);
  }
  return value;
};

/** A finite number greater than zero. */
export const positiveNumber: Check<number> = (value, option) => {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new InvalidOptionError(option, `must be a finite number greater than zero, got ${describe(value)}`);
  return value;
};

/** `true` or `false`. */
export const boolean: Check<boolean> = (value, option) => {
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, `expected true or false, got ${describe(value)}`);
  return value;
};

/** An instance of `type`; `what` names it in the message (`'an AbortSignal'`). */
export function instanceOf<T>(type: abstract new (...args: never[]) => T, what: string): Check<T> {
  return (value, option) => {
    if (!(value instanceof type)) throw new InvalidOptionError(option, `expected ${what}, got ${describe(value)}`);
    return value;
  };
}

/** An `AbortSignal`. */
export const abortSignal: Check<AbortSignal> = instanceOf(AbortSignal, 'an AbortSignal');

/** One of `choices` (strings). */
export function oneOf<C extends string>(...choices: C[]): Check<C> {
  const quoted = choices.map((c) => `'${c}'`);
  const list = quoted.length === 2 ? `${quoted[0]} or ${quoted[1]}` : `one of ${quoted.join(', ')}`;
  return (value, option) => {
    if (typeof value !== 'string' || !(choices as string[]).includes(value)) throw new InvalidOptionError(option, `expected ${list}, got ${describe(value)}`);
    return value as C;
  };
}

/** A function; `shape` shows its signature in the message (e.g. `(req) => string`). */
export function fn<F>(shape = ''): Check<F> {
  return (value, option) => {
    if (typeof value !== 'function') throw new InvalidOptionError(option, `expected a function${shape ? ` ${shape}` : ''}, got ${describe(value)}`);
    return value as F;
  };
}

/**
 * A name: a non-empty string, at most `max` characters, without any of `forbidden` (its
 * characters, shown in the message as they are listed).
 */
export function nonEmptyString({ max, forbidden }: { max?: number; forbidden?: readonly string[] } = {}): Check<string> {
  const shown = forbidden === undefined ? '' : forbidden.map((c) => JSON.stringify(c)).join(forbidden.length === 2 ? ' or ' : ', ').replace(/, ([^,]*)$/, ' or $1');
  return (value, option) => {
    if (typeof value !== 'string') throw new InvalidOptionError(option, `expected a non-empty string, got ${describe(value)}`);
    if (value.length === 0) throw new InvalidOptionError(option, 'must not be empty');
    if (forbidden !== undefined && forbidden.some((c) => value.includes(c))) throw new InvalidOptionError(option, `must not contain ${shown}, got ${JSON.stringify(value)}`);
    if (max !== undefined && value.length > max) throw new InvalidOptionError(option, `is ${value.length} characters long; the limit is ${max}`);
    return value;
  };
}

/** The value as given: a field whose check is made by code after the table (it says where). */
export function asGiven<V>(): Check<V> {
  return (value) => value as V;
}

/**
 * `true`, `false` or an object of `table`'s fields: `false` is `off`, `true` every default of
 * the table, an object its fields resolved (unknown ones refused as `<option>.<name>`); `map`
 * turns the table's result into the option's.
 */
export function switchOrTable<Table extends AnyTable>(table: Table): Check<ResolvedTable<Table> | undefined>;
export function switchOrTable<Table extends AnyTable, R, Off>(table: Table, how: { off: Off; map: (resolved: ResolvedTable<Table>) => R }): Check<R | Off>;
export function switchOrTable<Table extends AnyTable>(
  table: Table,
  { off, map }: { off?: unknown; map?: (resolved: ResolvedTable<Table>) => unknown } = {},
): Check<unknown> {
  const fields = optionNames(table).join(', ');
  const finish = map ?? ((resolved: ResolvedTable<Table>) => resolved);
  return (value, option) => {
    if (value === false) return off;
    if (value === true) return finish(resolveFields(table, {}));
    if (!isPlainObject(value)) throw new InvalidOptionError(option, `expected true, false or { ${fields} }, got ${describe(value)}`);
    return finish(resolveOptions(table, value, { path: `${option}.` }));
  };
}
