#!/usr/bin/env node
// The load generator, in its own process. Options as JSON in argv[2]; one JSON summary on stdout.
//   mode "throughput": autocannon, `connections` concurrent, for `duration` s or `amount` requests
//   (`rate`: at most that many requests per second in all).
//   mode "latency": one request at a time over a kept-alive undici connection, timed with
//   hrtime (autocannon's histogram has whole-millisecond resolution, too coarse for a proxy hop).
//   It runs for `duration` s and at least until it has `minSamples` samples after the `warmup`
//   requests, but never past `limit` s: a short phase on a busy machine still measures something.
//   With `samples: true` the sorted samples (µs) come back too, for merging rounds.
import autocannon from 'autocannon';
import { Client } from 'undici';

const o = JSON.parse(process.argv[2]);

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

if (o.mode === 'latency') {
  const url = new URL(o.url);
  const client = new Client(url.origin, { pipelining: 1 });
  const samples = [];
  const t0 = performance.now();
  const until = t0 + o.duration * 1000;
  const limit = t0 + (o.limit ?? Math.max(30, 4 * o.duration)) * 1000;
  const minSamples = o.minSamples ?? 1;
  const more = () => {
    const now = performance.now();
    return now < limit && (now < until || samples.length < minSamples);
  };
  let errors = 0;
  let n = 0;
  while (more() && n < (o.amount ?? 1e9)) {
    const sent = process.hrtime.bigint();
    const res = await client.request({
      method: 'POST',
      path: url.pathname,
      headers: o.headers,
      body: o.body,
    });
    await res.body.text();
    const us = Number(process.hrtime.bigint() - sent) / 1000;
    if (res.statusCode !== 200) errors++;
    if (n >= (o.warmup ?? 50)) samples.push(us);
    n++;
  }
  await client.close();
  samples.sort((a, b) => a - b);
  process.stdout.write(
    `${JSON.stringify({ requests: n, errors, p50Us: pct(samples, 50), p90Us: pct(samples, 90), p99Us: pct(samples, 99), ...(o.samples ? { samples } : {}) })}\n`,
  );
} else {
  const result = await autocannon({
    url: o.url,
    method: 'POST',
    headers: o.headers,
    body: o.body,
    connections: o.connections,
    pipelining: 1,
    ...(o.amount ? { amount: o.amount } : { duration: o.duration }),
    // At most `rate` requests per second over all connections (the scale section's same-rate phases).
    ...(o.rate ? { overallRate: o.rate } : {}),
    timeout: 10,
  });
  process.stdout.write(
    `${JSON.stringify({
      requests: result.requests.total,
      rps: result.requests.average,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      errors: result.errors,
      timeouts: result.timeouts,
      non2xx: result.non2xx,
      durationS: result.duration,
    })}\n`,
  );
}
