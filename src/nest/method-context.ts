import type { ExecutionContext, Type } from '@nestjs/common';

type HttpArgumentsHost = ReturnType<ExecutionContext['switchToHttp']>;
type RpcArgumentsHost = ReturnType<ExecutionContext['switchToRpc']>;
type WsArgumentsHost = ReturnType<ExecutionContext['switchToWs']>;

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

  switchToRpc(): RpcArgumentsHost {
    return { getData: () => this.args[0], getContext: () => this.args[1] } as RpcArgumentsHost;
  }

  switchToHttp(): HttpArgumentsHost {
    return { getRequest: () => this.args[0], getResponse: () => this.args[1], getNext: () => this.args[2] } as HttpArgumentsHost;
  }

  switchToWs(): WsArgumentsHost {
    return { getClient: () => this.args[0], getData: () => this.args[1], getPattern: () => '' } as unknown as WsArgumentsHost;
  }
}
