import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { DogpileModuleOptions } from './options.js';

export const {
  ConfigurableModuleClass: DogpileConfigurableModule,
  MODULE_OPTIONS_TOKEN: DOGPILE_MODULE_OPTIONS,
  OPTIONS_TYPE: DOGPILE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: DOGPILE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<DogpileModuleOptions>({ moduleName: 'Dogpile' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** What `DogpileModule.forRoot()` takes: the module options plus `isGlobal`. */
export type DogpileModuleForRootOptions = typeof DOGPILE_OPTIONS_TYPE;
/** What `DogpileModule.forRootAsync()` takes: `useFactory` / `useClass` / `useExisting`, `inject`, `imports`, `isGlobal`. */
export type DogpileModuleAsyncOptions = typeof DOGPILE_ASYNC_OPTIONS_TYPE;
