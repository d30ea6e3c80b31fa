// The bench's processes: started with their port read from their output, stopped within a bound,
// and measured from /proc (CPU time, resident memory, its peak).
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** Every child started here, so that an interrupted run can stop what is left. */
export const children = new Set();

/**
 * Starts `cmd argv`; `port` resolves with the port it prints alone on a line of stdout
 * (`portFrom: 'stdout'`) or names in the gateway's `gateway.listening` log line (`'log'`).
 * `lines` keeps its first output lines; `quiet()` stops keeping them (the output is still
 * drained, so the child never blocks): parsing a gateway's audit log here during a load phase
 * would take CPU from what is measured.
 */
export function start(cmd, argv, { env = {}, portFrom = 'stdout' } = {}) {
  const child = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const lines = [];
  const port = new Promise((res, rej) => {
    const timer = setTimeout(
      () => rej(new Error(`${argv.join(' ')}: no port after 30 s\n${lines.join('\n')}`)),
      30_000,
    );
    timer.unref();
    const onLine = (line) => {
      if (lines.length < 2000) lines.push(line);
      if (portFrom === 'stdout' && /^\d+$/.test(line.trim())) {
        clearTimeout(timer);
        res(Number(line.trim()));
      } else if (portFrom === 'log' && line.includes('"gateway.listening"')) {
        clearTimeout(timer);
        res(Number(new URL(JSON.parse(line).url).port));
      }
    };
    for (const s of ['stdout', 'stderr']) {
      let buf = '';
      child[s].setEncoding('utf8');
      child[s].on('data', (d) => {
        buf += d;
        for (let i = buf.indexOf('\n'); i !== -1; i = buf.indexOf('\n')) {
          onLine(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
        if (buf.length > 65536) buf = '';
      });
    }
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      rej(new Error(`${argv.join(' ')} exited ${code ?? signal}\n${lines.join('\n')}`));
    });
  });
  port.catch(() => {});
  const quiet = () => {
    for (const s of ['stdout', 'stderr']) {
      child[s].removeAllListeners('data');
      child[s].resume();
    }
  };
  return { child, pid: child.pid, port, lines, quiet };
}

/** SIGTERM, SIGKILL after 5 s; resolves when it exited (or after 10 s in any case). */
export function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    const give = setTimeout(res, 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      clearTimeout(give);
      res();
    });
    child.kill('SIGTERM');
  });
}

export async function stopAll() {
  for (const c of [...children]) await stop(c);
}

/** CPU time (user + system) of a process so far, in ms; /proc ticks are 10 ms. */
export function cpuMs(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

/**
 * Run time of a process so far over all its threads, in µs, from /proc/<pid>/task/<tid>/schedstat
 * (nanoseconds, where /proc/<pid>/stat counts 10 ms ticks): what paired rounds compare.
 */
export function cpuUs(pid) {
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

/** VmRSS and VmHWM (the peak RSS so far) of a process, in MB. */
export function memoryMb(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => Number(s.match(new RegExp(`${k}:\\s+(\\d+) kB`))[1]);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

/** Resets VmHWM to the current RSS (`clear_refs` 5); false where the kernel does not allow it. */
export function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The 1, 5 and 15 minute load averages (how busy the machine was around a phase). */
export const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);

/** The middle value (the mean of the middle two for an even count). */
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const PROBE_VALUE = { jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'hello' }] } };

async function probeOnce() {
  const started = process.hrtime.bigint();
  for (let i = 0; i < 2000; i++) JSON.parse(JSON.stringify(PROBE_VALUE));
  const chain = async (depth) => (depth === 0 ? 0 : (await chain(depth - 1)) + 1);
  for (let i = 0; i < 200; i++) await chain(20);
  return Number(process.hrtime.bigint() - started) / 1000;
}

/**
 * How fast the host runs a fixed piece of JavaScript (JSON and an await chain, as a call does),
 * in µs, the median of fifteen tries after fifteen that warm it up (the first ones of a process
 * run before the JIT has done its work). A virtual machine's speed drifts with what its
 * neighbours do, without any of it showing as load or steal; this says whether two runs compare.
 */
export async function speedProbeUs() {
  const tries = [];
  for (let i = 0; i < 30; i++) tries.push(await probeOnce());
  return median(tries.slice(15));
}
