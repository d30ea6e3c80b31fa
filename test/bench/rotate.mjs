#!/usr/bin/env node
// Paired CPU comparison (#18), in its own process: the targets in turn, `amount` tools/call
// requests each at `connections` concurrent, for `rounds` rounds, each round starting one target
// later (A B C, B C A, C A B, ...), after one warm-up round that is not counted. Each segment's CPU
// is its process's run time over all its threads from /proc/<pid>/task/*/schedstat (nanoseconds,
// where /proc/<pid>/stat counts 10 ms ticks). Options as JSON in argv[2]; on stdout one JSON
// object: `usPerCall[round][target]`, `stealShare[round]` (the share of the machine's CPU time
// the hypervisor gave to others during the round: /proc/stat's steal column, so that a slow round
// can be told from a busy one), and the errors seen.
//
// Why: on this 2-core VM a process's speed drifts by ±20% from one second to the next. Paths
// measured seconds apart (the round-robin phases) differ by that much in their ratio; paths
// measured back to back and compared round by round share the machine's state, and the spread of
// those per-round ratios gives the estimate's own confidence interval.
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { cpuUs } from './processes.mjs';

const o = JSON.parse(process.argv[2]);

/** The machine's CPU time so far, in ticks: all of it, and the part stolen by the hypervisor. */
function machineTicks() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  return { all: f.reduce((a, b) => a + b, 0), steal: f[7] ?? 0 };
}

function segment(t) {
  return new Promise((res, rej) =>
    autocannon(
      {
        url: t.url,
        method: 'POST',
        headers: t.headers,
        body: t.body,
        connections: o.connections ?? 16,
        pipelining: 1,
        amount: o.amount,
        timeout: 10,
      },
      (e, r) => (e ? rej(e) : res(r)),
    ),
  );
}

const n = o.targets.length;
const usPerCall = [];
const stealShare = [];
let errors = 0;
for (let round = 0; round <= o.rounds; round++) {
  const row = new Array(n);
  const start = machineTicks();
  for (let k = 0; k < n; k++) {
    const i = (k + round) % n;
    const t = o.targets[i];
    const before = cpuUs(t.pid);
    const r = await segment(t);
    row[i] = (cpuUs(t.pid) - before) / Math.max(1, r.requests.total);
    errors += r.errors + r.non2xx + r.timeouts;
  }
  const end = machineTicks();
  if (round > 0) {
    usPerCall.push(row);
    stealShare.push((end.steal - start.steal) / Math.max(1, end.all - start.all));
  }
}
process.stdout.write(`${JSON.stringify({ usPerCall, stealShare, errors })}\n`);
