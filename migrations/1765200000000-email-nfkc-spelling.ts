import { MigrationInterface, QueryRunner } from 'typeorm';
import { rewriteSpellings } from './email-spelling-rewrite';

/**
 * The spelling of an address stored beside its key (the one mail goes to) is now kept in NFKC,
 * as new accounts store it (mailboxSpelling): an account created with a compatibility spelling
 * (fullwidth `ｖｉｃｔｉｍ@example.com`, whose key is `victim@example.com`) had every mail of the
 * account (verification, reset, links, codes) go to that other mailbox, so the owner of the
 * address the key names could not take it over by a reset. Rows are rewritten to their NFKC
 * spelling (computed in Node, as the code does), a page at a time; keys do not change. Only
 * non-ASCII spellings can change. Left as they are: a row whose key is not the key of its new
 * spelling (a pair the earlier email migrations left for an operator to resolve keeps the
 * spelling that tells its accounts apart), and a spelling whose NFKC form is no longer one address
 * (a fullwidth `＠` or a space would appear). Profile caches (at most USER_CACHE_TTL_SECONDS) may
 * show the old spelling until they expire; mail queued before keeps its address.
 */
export class EmailNfkcSpelling1765200000000 implements MigrationInterface {
  name = 'EmailNfkcSpelling1765200000000';

  async up(q: QueryRunner): Promise<void> {
    await rewriteSpellings(q, `email ~ '[^\\x01-\\x7F]'`, (email) => {
      const spelling = email.normalize('NFKC');
      // still one address: no second @ (a fullwidth ＠) and no blank
      return spelling.split('@').length === email.split('@').length && !/\s/u.test(spelling) ? spelling : undefined;
    });
  }

  async down(): Promise<void> {
    // forward-only: the previous code reads NFKC spellings as any other
  }
}
