// tsc keeps the folder layout (src/, migrations/), so dist/src/main.js is the API. The contract's
// entry points are `node dist/main`, `node dist/worker`, `node dist/cli`: thin shims point there.
const fs = require('fs');
const path = require('path');
for (const name of ['main', 'worker', 'cli', 'migrate']) {
  fs.writeFileSync(path.join(__dirname, '..', 'dist', `${name}.js`), `require('./src/${name}');\n`);
}
