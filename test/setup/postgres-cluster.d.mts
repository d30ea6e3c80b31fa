export interface Cluster {
  port: number;
  pid: number;
  adminUrl: string;
  stop(): Promise<void>;
}
export function startCluster(): Promise<Cluster>;
export function createDatabase(adminUrl: string, name: string): Promise<string>;
