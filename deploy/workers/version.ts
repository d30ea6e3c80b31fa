/** The release the Worker reports as its serverInfo version: package.json's (test/unit/release.test.ts). */
export const VERSION = '0.2.0';
