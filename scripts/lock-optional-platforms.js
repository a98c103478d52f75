// npm 11 with this machine's registry writes no lockfile entries for optional dependencies of
// other platforms (npm/cli#9342), and `npm ci` then refuses the lockfile ("Missing: ... from lock
// file"). This adds the complete entries (version, resolved, integrity, os, cpu) from the
// registry; npm ci skips them on os/cpu mismatch. Run after `npm install`: node scripts/lock-optional-platforms.js
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const file = path.join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const pk = lock.packages;
let added = 0;
for (const [loc, entry] of Object.entries(pk)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const nested = `${loc ? `${loc}/` : ''}node_modules/${name}`;
    if (pk[nested] || pk[`node_modules/${name}`]) continue;
    let v;
    try {
      const view = JSON.parse(execFileSync('npm', ['view', `${name}@${range}`, '--json', 'version', 'dist', 'os', 'cpu', 'libc', 'license', 'engines'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
      v = Array.isArray(view) ? view[view.length - 1] : view;
    } catch {
      // not on this registry (its mirror lacks some platform builds): record the platform from
      // the package name so npm ci skips it on os/cpu mismatch without fetching it
      v = { version: range, ...platformOf(name) };
    }
    pk[`node_modules/${name}`] = {
      version: v.version,
      ...(v.dist ? { resolved: v.dist.tarball, integrity: v.dist.integrity } : {}),
      ...(v.cpu ? { cpu: v.cpu } : {}),
      ...(entry.dev ? { dev: true } : {}),
      ...(v.license ? { license: v.license } : {}),
      ...(v.libc ? { libc: v.libc } : {}),
      optional: true,
      ...(v.os ? { os: v.os } : {}),
      ...(v.engines ? { engines: v.engines } : {}),
    };
    added++;
  }
}
const sorted = Object.fromEntries(Object.entries(pk).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
lock.packages = sorted;
fs.writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
console.log(`added ${added} optional platform entries`);

/** os and cpu from a platform package name such as `x-darwin-arm64` or `y-linux-arm-gnueabihf`. */
function platformOf(name) {
  const m = /-(android|darwin|freebsd|linux|win32|openharmony|sunos|aix|netbsd|openbsd)-(arm64|x64|ia32|arm|loong64|ppc64|riscv64|s390x|mips64el)\b/.exec(name);
  return m ? { os: [m[1]], cpu: [m[2]] } : {};
}
