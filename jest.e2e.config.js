/** e2e tests: supertest against the real app on a fresh PostgreSQL database and Redis prefix. */
module.exports = {
  rootDir: '.',
  testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'],
  transform: { '^.+\\.(t|j)s$': ['ts-jest', { tsconfig: 'tsconfig.json', isolatedModules: true }] },
  // ESM-only helpers (jose, openid-client, otplib) are transformed by ts-jest.
  transformIgnorePatterns: ['/node_modules/(?!(jose|openid-client|oauth4webapi|otplib|@otplib|@scure|@noble)/)'],
  testEnvironment: 'node',
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  setupFiles: ['<rootDir>/test/setup/env.ts'],
  // a hook or test over this is stuck; a CI machine at half speed still fits (set-ups take 5-15 s here)
  testTimeout: 60000,
  maxWorkers: 2,
};
