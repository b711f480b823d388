/**
 * The reader's own application, as the ```ts blocks of README.md and docs/ refer to it: a
 * block may use these names without declaring them (tools/docs-check.ts compiles every block
 * with this file). Everything a block takes from dogpile-guard, a framework or Node, it
 * imports itself, so the check proves the library's API as written.
 */
type Product = { id: string; name: string; categoryId: string };
type Report = { total: number; builtAt: string };

/** A cache made earlier with createCache(). */
declare const cache: import('dogpile-guard').DogpileCache;
/** The application's Redis client. */
declare const redis: import('ioredis').Redis;
/** An Express application, and a response inside one of its handlers. */
declare const app: import('express').Express;
declare const res: import('express').Response;
/** The incoming request of a fetch-style handler. */
declare const request: Request;
/** Values the surrounding code has at hand. */
declare const id: string;
declare const day: string;
declare const report: Report;

/** The application's data access and loaders. */
declare const db: {
  users: {
    find(id: string): Promise<{ id: string; name: string }>;
    findMany(keys: readonly string[]): Promise<{ key: string; id: string; name: string }[]>;
  };
  products: { find(id: string): Promise<Product> };
  profiles: {
    find(id: string): Promise<{ id: string; name: string }>;
    update(id: string, fields: { name: string }): Promise<void>;
    featured(): Promise<{ id: string; name: string }[]>;
  };
};
declare function loader(): Promise<{ partial: boolean }>;
declare function loadUser(key: string): Promise<{ id: string; name: string }>;
declare function loadProfile(key: string): Promise<{ bio: string }>;
declare function loadOrders(key: string): Promise<string[]>;
declare function loadPrices(): Promise<Record<string, number>>;
declare function buildReport(...args: unknown[]): Promise<Report>;
declare function loadProduct(id: string): Promise<Product>;
declare function findProduct(id: string): Promise<Product>;
declare function loadReport(request: Request): Promise<Report>;
/** A Fastify instance. */
declare const fastify: import('fastify').FastifyInstance;
declare function saveProduct(id: string, body: ProductDto): Promise<Product>;
declare class ProductDto {
  name: string;
}
declare const store: { write(report: Report, options: { fencingToken: number }): Promise<void> };

/** Route handlers of the application (Express and Fastify accept these). */
declare function renderReport(req: import('express').Request, res: import('express').Response): Promise<void>;
declare function updateReport(req: import('express').Request, res: import('express').Response): Promise<void>;
declare function handler(): Promise<unknown>;

/** The application's logger and metrics client. */
declare const log: { warn(fields: object, message?: string): void; error(fields: object, message?: string): void };
declare const metrics: {
  inc(name: string, labels?: Record<string, string | number | boolean | undefined>): void;
  observe(name: string, value: number, labels?: Record<string, string | number | boolean | undefined>): void;
};
