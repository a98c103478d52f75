/* eslint-disable */
// A host-stall canary for the fixed-rate runs: an otherwise idle process at the highest CPU
// priority (nice -20 when allowed) that wakes every millisecond and reports each wake-up that came
// more than 5 ms late, as "<epoch ms> <late ms>". Being first in line for a core, it is late only
// when the machine itself stalls (the hypervisor takes the vCPUs away, or the kernel does not
// schedule), not because the API is busy, so its figures separate host stalls from service tails.
let last = performance.now();
setInterval(() => {
  const now = performance.now();
  const late = now - last - 1;
  last = now;
  if (late > 5) process.stdout.write(`${Date.now()} ${late.toFixed(1)}\n`);
}, 1);
