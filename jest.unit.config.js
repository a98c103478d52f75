/** unit tests: pure logic beside the code, no database. */
module.exports = {
  rootDir: '.',
  testMatch: ['<rootDir>/src/**/*.spec.ts'],
  transform: { '^.+\\.(t|j)s$': ['ts-jest', { tsconfig: 'tsconfig.json', isolatedModules: true }] },
  transformIgnorePatterns: ['/node_modules/(?!(jose|openid-client|oauth4webapi|otplib|@otplib|@scure|@noble)/)'],
  testEnvironment: 'node',
};
