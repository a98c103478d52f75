import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { sourceType: 'module' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
      'no-console': ['error', { allow: ['error', 'warn'] }],
      // lengths in code points, as the OpenAPI document states them (src/shared/http/lengths.ts)
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'class-validator', importNames: ['Length', 'MinLength', 'MaxLength', 'length'], message: 'Use src/shared/http/lengths (code points, as OpenAPI minLength/maxLength).' }] },
      ],
    },
  },
  // environment variables are ASCII: class-validator's own lengths are right there
  { files: ['src/config/config.ts'], rules: { 'no-restricted-imports': 'off' } },
  { files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/**'], rules: { '@typescript-eslint/no-explicit-any': 'off', 'no-console': 'off' } },
);
