/**
 * The session layer (the SDK client, its transports, the HTTP wires) is loaded on the first
 * connection, not with the gateway: the listener opens before any of it is needed (#18, start time).
 */
let sessionLayer: Promise<typeof import('./probe.js')> | undefined;

export const sessions = (): Promise<typeof import('./probe.js')> => {
  sessionLayer ??= import('./probe.js');
  return sessionLayer;
};
