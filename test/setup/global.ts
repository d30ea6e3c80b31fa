/**
 * Vitest's global setup: one Postgres cluster for the whole run (each test file makes its own
 * databases on it: test/helpers/postgres.ts), stopped when the run ends.
 */
import type { TestProject } from 'vitest/node';
import { startCluster } from './postgres-cluster.mjs';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startCluster();
  project.provide('postgresAdminUrl', cluster.adminUrl);
  return () => cluster.stop();
}
