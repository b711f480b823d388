import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    'express/index': 'src/express/index.ts',
    'fastify/index': 'src/fastify/index.ts',
    'nest/index': 'src/nest/index.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  sourcemap: true,
  shims: true,
  target: 'node20',
  platform: 'node',
  splitting: true,
  treeshake: true,
  external: [
    'ioredis',
    'express',
    'fastify',
    'fastify-plugin',
    'lru-cache',
    '@nestjs/common',
    '@nestjs/core',
    'rxjs',
    'rxjs/operators',
    'reflect-metadata',
  ],
});
