// test/e2e/http-lane.test.ts still imports from here; everything else uses factories.ts.
export { testIssuer } from './factories.js';
