#!/usr/bin/env node
// Paired CPU comparison (#18), in its own process: the targets in turn, `amount` tools/call
// requests each at `connections` concurrent, for `rounds` rounds, each round starting one target
// later (A B C, B C A, C A B, ...), after one warm-up round that is not counted. Each segment's CPU
// is its process's run time over all its threads from /proc/<pid>/task/*/schedstat (nanoseconds,
// where /proc/<pid>/stat counts 10 ms ticks). Options as JSON in argv[2]; on stdout one JSON
// object: `usPerCall[round][target]`, and the errors seen.
//
// Why: on this 2-core VM a process's speed drifts by ±20% from one second to the next. Paths
// measured seconds apart (the round-robin phases) differ by that much in their ratio; paths
// measured back to back and compared round by round share the machine's state, and the spread of
// those per-round ratios gives the estimate's own confidence interval.
import { readdirSync, readFileSync } from 'node:fs';
import autocannon from 'autocannon';

const o = JSON.parse(process.argv[2]);

function cpuUs(pid) {
  let ns = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1000;
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
let errors = 0;
for (let round = 0; round <= o.rounds; round++) {
  const row = new Array(n);
  for (let k = 0; k < n; k++) {
    const i = (k + round) % n;
    const t = o.targets[i];
    const before = cpuUs(t.pid);
    const r = await segment(t);
    row[i] = (cpuUs(t.pid) - before) / Math.max(1, r.requests.total);
    errors += r.errors + r.non2xx + r.timeouts;
  }
  if (round > 0) usPerCall.push(row);
}
process.stdout.write(`${JSON.stringify({ usPerCall, errors })}\n`);
