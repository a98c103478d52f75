import { LoggerModule } from 'nestjs-pino';
import { getConfig } from '../../config/config.module';

/** Paths pino removes from every log line: credentials, tokens, secrets, dates of birth. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["x-csrf-token"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.current_password',
  '*.new_password',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.subject_token',
  '*.secret',
  '*.client_secret',
  '*.key',
  '*.date_of_birth',
  '*.invite_token',
  '*.csrf_token',
];

/** JSON logs via pino, one line per request, with the request id. */
export function loggerModule() {
  const config = getConfig();
  return LoggerModule.forRoot({
    pinoHttp: {
      level: config.LOG_LEVEL,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      genReqId: (req) => String(req.headers['x-request-id'] ?? ''),
      customProps: () => ({ service: 'authp' }),
      serializers: {
        req: (req: { id: string; method: string; url: string }) => ({ id: req.id, method: req.method, url: req.url?.split('?')[0] }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
      autoLogging: { ignore: (req) => req.url === '/health' || req.url === '/metrics' },
    },
  });
}
