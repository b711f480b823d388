import type { ExecutionContext, Type } from '@nestjs/common';

/** The context type of a cached provider-method call, as `context.getType()` reports it. */
export const METHOD_CONTEXT_TYPE = 'dogpile-method';

/**
 * The `ExecutionContext` handed to `@Cached` `key` / `ttl` functions on a provider method:
 * `getArgs()` are the method's arguments, `getClass()` / `getHandler()` the provider class
 * and the original method, `getType()` is `'dogpile-method'`.
 */
export class MethodCallContext implements ExecutionContext {
  constructor(
    private readonly cls: Type<unknown>,
    private readonly handler: (...args: any[]) => unknown,
    private readonly args: unknown[],
  ) {}

  getClass<T = any>(): Type<T> {
    return this.cls as Type<T>;
  }

  getHandler(): (...args: any[]) => unknown {
    return this.handler;
  }

  getArgs<T extends any[] = any[]>(): T {
    return this.args as T;
  }

  getArgByIndex<T = any>(index: number): T {
    return this.args[index] as T;
  }

  getType<TContext extends string = string>(): TContext {
    return METHOD_CONTEXT_TYPE as TContext;
  }

  switchToRpc(): ReturnType<ExecutionContext['switchToRpc']> {
    return { getData: () => this.args[0], getContext: () => this.args[1] } as ReturnType<ExecutionContext['switchToRpc']>;
  }

  switchToHttp(): ReturnType<ExecutionContext['switchToHttp']> {
    return { getRequest: () => this.args[0], getResponse: () => this.args[1], getNext: () => this.args[2] } as ReturnType<ExecutionContext['switchToHttp']>;
  }

  switchToWs(): ReturnType<ExecutionContext['switchToWs']> {
    return { getClient: () => this.args[0], getData: () => this.args[1], getPattern: () => '' } as unknown as ReturnType<ExecutionContext['switchToWs']>;
  }
}
