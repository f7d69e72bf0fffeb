'use strict';
// chaos/clients/node-redlock/adapter.js: node-redlock (npm redlock@4.2.0,
// over ioredis) as a client under test of the chaos harness. It speaks the
// protocol of chaos/README.md, section "Any client under test": one JSON
// request per line on stdin, one JSON reply per line on stdout; everything
// else goes to stderr. `node adapter.js --check` exits 0 when it can run.
//
// What it reports is node-redlock's own belief, uncorrected: redlock 4.2.0
// sets lock.expiration = start + ttl - drift, where start is Date.now() (the
// WALL clock) taken before the attempt's requests and drift =
// round(driftFactor * ttl) + 2; it grants when a quorum voted and
// expiration > Date.now(). validity_ms is lock.expiration - Date.now() at the
// moment of answering, and so is `remaining`.
//
// Configuration, the one a careful user writes: retryCount 0 (one attempt
// per acquire: the harness retries), the harness's drift factor, and on each
// ioredis client commandTimeout = the harness's node timeout (node-redlock
// has no timeout of its own: without one an attempt waits as long as the
// slowest node) and enableOfflineQueue false (a disconnected node fails its
// command at once instead of queueing it). Everything else is ioredis's
// default.

let Redlock = null;
let Redis = null;
let versions = null;
let missing = null;
try {
  Redlock = require('redlock');
  Redis = require('ioredis');
  versions = {
    redlock: require('redlock/package.json').version,
    ioredis: require('ioredis/package.json').version,
  };
} catch (e) {
  missing = e;
}
const fs = require('fs');
const readline = require('readline');

const kInstall =
  'node-redlock is not installed in ' + __dirname + ' (run scripts/lab-clients.sh as root: ' +
  'it runs npm ci there)';

if (process.argv.includes('--check')) {
  if (missing) {
    process.stderr.write(kInstall + ': ' + missing.message + '\n');
    process.exit(1);
  }
  process.stdout.write('node-redlock ' + versions.redlock + ' over ioredis ' + versions.ioredis + '\n');
  process.exit(0);
}

let servers = [];
let redlock = null;
const locks = new Map();  // token -> Lock
// Per-node results of the scripts of the request in progress, to classify a
// refusal the way the harness does (node-redlock's LockError does not say).
let tally = null;

function reply(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function parseNode(spec, tls) {
  if (spec.startsWith('redis+sentinel://')) {
    throw new Error('Sentinel-named nodes (' + spec + ') are not supported by this adapter');
  }
  let tlsNode = false;
  let rest = spec;
  if (rest.startsWith('rediss://')) {
    tlsNode = true;
    rest = rest.slice('rediss://'.length);
  } else if (rest.startsWith('redis://')) {
    rest = rest.slice('redis://'.length);
  }
  const colon = rest.lastIndexOf(':');
  if (colon <= 0) throw new Error('bad node "' + spec + '" (host:port expected)');
  const host = rest.slice(0, colon);
  const port = Number(rest.slice(colon + 1));
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error('bad port in node "' + spec + '"');
  }
  const options = { host, port };
  if (tlsNode) {
    if (!tls.ca) throw new Error('TLS node ' + spec + ' but no tls_ca');
    options.tls = { ca: fs.readFileSync(tls.ca), servername: tls.serverName || host };
  }
  return options;
}

async function hello(req) {
  if (missing) throw new Error(kInstall + ': ' + missing.message);
  if (req.protocol !== 1) throw new Error('protocol ' + req.protocol + ' (this adapter speaks 1)');
  if (!Array.isArray(req.nodes) || req.nodes.length === 0) throw new Error('no nodes');
  const tls = { ca: req.tls_ca || '', serverName: req.tls_server_name || '' };
  const nodeTimeout = Number(req.node_timeout_ms) > 0 ? Number(req.node_timeout_ms) : 50;
  const options = req.nodes.map((n) => parseNode(n, tls));
  servers = options.map((o) => {
    const client = new Redis({ ...o, commandTimeout: nodeTimeout, enableOfflineQueue: false });
    // ioredis reconnects by itself; without a listener it prints every
    // connection error.
    client.on('error', () => {});
    return client;
  });
  // Wait (bounded) for the first connections: with the offline queue off, a
  // command sent before a connection is up fails at once.
  await Promise.race([
    Promise.all(servers.map((s) => new Promise((resolve) => {
      if (s.status === 'ready') return resolve();
      s.once('ready', resolve);
    }))),
    new Promise((resolve) => setTimeout(resolve, 3000)),
  ]);
  redlock = new Redlock(servers, {
    driftFactor: typeof req.drift_factor === 'number' ? req.drift_factor : 0.01,
    retryCount: 0,
  });
  // Observe each node's answer to each script without changing anything:
  // redlock calls _executeScript once per node and script.
  const execute = redlock._executeScript.bind(redlock);
  redlock._executeScript = (server, name, args, callback) =>
    execute(server, name, args, (err, result) => {
      if (tally !== null) tally.push({ node: servers.indexOf(server), name, err, result });
      callback(err, result);
    });
  return {
    protocol: 1,
    name: 'node-redlock',
    version: versions.redlock,
    single_instance: false,
    fencing: false,
    validity: 'lock.expiration - Date.now() (wall clock); expiration = Date.now() before the ' +
      'attempt + ttl - (round(driftFactor*ttl) + 2); ioredis ' + versions.ioredis +
      ', commandTimeout ' + nodeTimeout + ' ms',
  };
}

// How many nodes granted, refused, failed for `script` in the tally.
function votes(script) {
  const v = { granted: [], refused: 0, failed: 0 };
  for (const t of tally) {
    if (t.name !== script) continue;
    if (t.err) v.failed++;
    else if (Number(t.result) >= 1) v.granted.push(t.node);
    else v.refused++;
  }
  return v;
}

function classify(script, err) {
  if (!(err instanceof Redlock.LockError)) return 'other';
  const quorum = Math.floor(servers.length / 2) + 1;
  const v = votes(script);
  if (v.granted.length >= quorum) return 'expired';  // a quorum, but no validity left
  if (servers.length - v.failed < quorum) return 'unavailable';
  return script === 'lockScript' ? 'held' : 'lost';
}

async function acquire(req) {
  tally = [];
  try {
    const lock = await redlock.lock(req.resource, req.ttl_ms);
    const validity = lock.expiration - Date.now();
    locks.set(lock.value, lock);
    return {
      granted: true,
      token: lock.value,
      validity_ms: validity,
      drift_ms: Math.round(redlock.driftFactor * req.ttl_ms) + 2,
      nodes: votes('lockScript').granted.sort((a, b) => a - b),
    };
  } catch (err) {
    return { granted: false, class: classify('lockScript', err), error: String(err.message || err) };
  } finally {
    tally = null;
  }
}

function remaining(req) {
  const lock = locks.get(req.token);
  return { validity_ms: lock ? lock.expiration - Date.now() : 0 };
}

async function extend(req) {
  const lock = locks.get(req.token);
  if (!lock) return { extended: false, class: 'lost', error: 'no such lock here' };
  tally = [];
  try {
    await lock.extend(req.ttl_ms);
    return { extended: true, token: lock.value, validity_ms: lock.expiration - Date.now() };
  } catch (err) {
    let cls = classify('extendScript', err);
    if (/already expired/.test(String(err.message))) cls = 'expired';
    return { extended: false, class: cls, error: String(err.message || err) };
  } finally {
    tally = null;
  }
}

async function release(req) {
  const lock = locks.get(req.token);
  locks.delete(req.token);
  if (!lock) return { released: false, class: 'lost', error: 'no such lock here' };
  tally = [];
  try {
    await lock.unlock();
    return { released: true };
  } catch (err) {
    const quorum = Math.floor(servers.length / 2) + 1;
    const v = votes('unlockScript');
    const cls = !(err instanceof Redlock.LockError) ? 'other'
      : servers.length - v.failed < quorum ? 'unavailable' : 'lost';
    return { released: false, class: cls, error: String(err.message || err) };
  } finally {
    tally = null;
  }
}

const handlers = { hello, acquire, remaining, extend, release };

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    reply({ id: null, ok: false, error: 'not JSON: ' + line.slice(0, 200) });
    return;
  }
  const handler = handlers[req.op];
  if (!handler) {
    reply({ id: req.id, ok: false, error: 'unknown op "' + req.op + '"' });
    return;
  }
  if (req.op !== 'hello' && redlock === null) {
    reply({ id: req.id, ok: false, error: 'hello first' });
    return;
  }
  try {
    reply({ id: req.id, ok: true, ...(await handler(req)) });
  } catch (e) {
    reply({ id: req.id, ok: false, error: String((e && e.message) || e) });
  }
}

async function shutdown() {
  await Promise.race([
    Promise.all(servers.map((s) => s.quit().catch(() => {}))),
    new Promise((resolve) => setTimeout(resolve, 1000)),
  ]);
  process.exit(0);
}

// One request at a time, in order.
let chain = Promise.resolve();
const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on('line', (line) => {
  chain = chain.then(() => handle(line));
});
rl.on('close', () => {
  chain = chain.then(shutdown);
});
