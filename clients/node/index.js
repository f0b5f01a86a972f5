// index.js - a small slotd.v1 Metadata and Admin client for Node.js (@grpc/grpc-js, proto-loader).
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { makeTyped } = require('./typed');

// The .proto files: SLOTD_API_DIR / options.apiDir, else the copy an installed package ships in
// proto/ (npm pack puts it there), else the repo's api/ folder.
const PACKAGED_API_DIR = path.join(__dirname, 'proto');
const DEFAULT_API_DIR = process.env.SLOTD_API_DIR ||
  (fs.existsSync(path.join(PACKAGED_API_DIR, 'slotd', 'v1', 'metadata.proto'))
    ? PACKAGED_API_DIR : path.join(__dirname, '..', '..', 'api'));
const DEFAULT_DEADLINE_MS = 5000;
const DEFAULT_MAX_RETRIES = 4;
const BACKOFF_FIRST_MS = 50;
const BACKOFF_MAX_MS = 1000;
const PROTO_FILES = ['slotd/v1/metadata.proto', 'slotd/v1/admin.proto'];
const ERROR_DETAIL_TYPE_URL = 'type.googleapis.com/slotd.v1.ErrorDetail';
// The ErrorDetail.field of an UNAVAILABLE whose min_revision the node did not reach in time.
const MIN_REVISION_FIELD = 'min_revision';
// A lease id is hash_slot << 48 | a sequence number (>= 1) of that hash slot; TTLs 1..one year.
const LEASE_ID_SHIFT = 48n;
const LEASE_TTL_MAX = 31536000;

// Codes after which taskStatus, clusterState and route ask the next endpoint, and the one after
// which admin writes do (down, or no controller leader: the command was not sent, or a repeat
// answers NOOP). An UNAVAILABLE naming min_revision is never skipped.
const SKIP_READ_CODES = new Set([
  grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED,
]);
const SKIP_WRITE_CODES = new Set([grpc.status.UNAVAILABLE]);
// The txn compare operators by their text.
const TXN_OPS = {
  '=': 'TXN_COMPARE_OP_EQUAL', '==': 'TXN_COMPARE_OP_EQUAL', '!=': 'TXN_COMPARE_OP_NOT_EQUAL',
  '>': 'TXN_COMPARE_OP_GREATER', '<': 'TXN_COMPARE_OP_LESS',
};
// Stream ends a watch resumes from, on the next endpoint with its positions: the node went away,
// or the client read too slowly. Anything else (COMPACTED: OUT_OF_RANGE, bad input, auth) ends it.
const WATCH_RESUME_CODES = new Set([
  grpc.status.UNAVAILABLE, grpc.status.RESOURCE_EXHAUSTED, grpc.status.UNKNOWN,
  grpc.status.CANCELLED, grpc.status.DEADLINE_EXCEEDED, grpc.status.INTERNAL,
]);

// protobufjs as @grpc/proto-loader resolves it (its dependency, so the same copy), to decode the
// google.rpc.Status in a grpc-status-details-bin trailer.
const protobuf = require(require.resolve('protobufjs', {
  paths: [path.dirname(require.resolve('@grpc/proto-loader/package.json'))],
}));

// bytes fields are Buffers (proto-loader's default); uint64 fields are decimal strings so no
// precision is lost; enums are their names; unset scalars come back as their defaults.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

// {Metadata, Admin}: the service client constructors.
function loadServices(apiDir) {
  const definition = protoLoader.loadSync(PROTO_FILES, {
    ...LOADER_OPTIONS,
    includeDirs: [apiDir],
  });
  const v1 = grpc.loadPackageDefinition(definition).slotd.v1;
  return { Metadata: v1.Metadata, Admin: v1.Admin };
}

function loadMetadataService(apiDir) {
  return loadServices(apiDir).Metadata;
}

// google.rpc.Status and slotd.v1.ErrorDetail from apiDir (google/protobuf/any.proto is bundled
// with protobufjs), loaded once per directory.
const errorTypesByDir = new Map();
function errorTypes(apiDir) {
  let types = errorTypesByDir.get(apiDir);
  if (!types) {
    const root = new protobuf.Root();
    const resolvePath = root.resolvePath;
    root.resolvePath = (origin, target) => {
      const inApi = path.join(apiDir, target);
      return !path.isAbsolute(target) && fs.existsSync(inApi) ? inApi : resolvePath(origin, target);
    };
    root.loadSync(['google/rpc/status.proto', 'slotd/v1/metadata.proto'], { keepCase: true });
    types = {
      Status: root.lookupType('google.rpc.Status'),
      ErrorDetail: root.lookupType('slotd.v1.ErrorDetail'),
    };
    errorTypesByDir.set(apiDir, types);
  }
  return types;
}

// The slotd.v1.ErrorDetail (a plain object shaped like the responses: enums as names, uint64 as
// decimal strings) in a ServiceError's grpc-status-details-bin trailer, or null.
function errorDetail(err, apiDir = DEFAULT_API_DIR) {
  const values = err && err.metadata ? err.metadata.get('grpc-status-details-bin') : [];
  if (values.length === 0) return null;
  const { Status, ErrorDetail } = errorTypes(apiDir);
  try {
    const status = Status.decode(values[0]);
    const any = status.details.find((d) => d.type_url === ERROR_DETAIL_TYPE_URL);
    return any ? ErrorDetail.toObject(ErrorDetail.decode(any.value), LOADER_OPTIONS) : null;
  } catch (decodeError) {
    return null; // a trailer that does not decode carries no usable detail
  }
}

// A controller revision as a BigInt, from a BigInt, a non-negative integer Number or a decimal
// string (how uint64 fields arrive).
function toRevision(value, what) {
  if (typeof value === 'bigint' && value >= 0n) return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && /^[0-9]+$/.test(value)) return BigInt(value);
  throw new TypeError(`${what} must be a non-negative integer (BigInt, Number or decimal string)`);
}

// A lease id as a decimal string (how uint64 fields are sent), from a BigInt, a non-negative
// integer Number or a decimal or 0x-hex string. Throws RangeError when it is not a lease id (a
// hash slot above 255, or sequence number 0), so no call is made.
function toLeaseId(value, what = 'lease id') {
  let id;
  if (typeof value === 'bigint') id = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) id = BigInt(value);
  else if (typeof value === 'string' && /^([0-9]+|0[xX][0-9a-fA-F]+)$/.test(value)) {
    id = BigInt(value);
  } else throw new TypeError(`${what} must be a BigInt, integer Number or decimal/0x string`);
  if (id <= 0n || (id >> LEASE_ID_SHIFT) > 255n || (id & ((1n << LEASE_ID_SHIFT) - 1n)) === 0n) {
    throw new RangeError(`${what} ${id} (0x${id.toString(16)}) is not a lease id ` +
                         '(hash slot 0..255 << 48 | sequence >= 1)');
  }
  return id.toString();
}

// The hash slot lease id lives in (id >> 48); RangeError/TypeError as toLeaseId.
function leaseHashSlot(value) {
  return Number(BigInt(toLeaseId(value)) >> LEASE_ID_SHIFT);
}

function endpointsOf(addr) {
  const list = (Array.isArray(addr) ? addr : String(addr).split(','))
    .map((a) => String(a).trim())
    .filter((a) => a !== '');
  if (list.length === 0) throw new TypeError('createClient needs at least one endpoint');
  return list;
}

function sleep(ms) {
  return new Promise((resolve) => { setTimeout(resolve, ms); });
}

function toBuffer(value, what) {
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return Buffer.from(value);
  throw new TypeError(`${what} must be a Buffer, Uint8Array or string`);
}

// PEM text from a Buffer, or from the file a string names.
function pemOf(value, what) {
  if (value === undefined || value === null) return null;
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return fs.readFileSync(value);
  throw new TypeError(`${what} must be a Buffer (PEM text) or a string (a PEM file path)`);
}

// Channel credentials and options for createClient's TLS options: plaintext when neither
// rootCerts nor certChain is given; otherwise grpc.credentials.createSsl(rootCerts, privateKey,
// certChain) (privateKey and certChain together, for servers started with --tls-client-auth 1),
// and serverName overrides the name checked in the server certificate.
function channelSetup(options) {
  const rootCerts = pemOf(options.rootCerts, 'rootCerts');
  const privateKey = pemOf(options.privateKey, 'privateKey');
  const certChain = pemOf(options.certChain, 'certChain');
  if ((privateKey === null) !== (certChain === null)) {
    throw new TypeError('privateKey and certChain: give both or neither');
  }
  if (rootCerts === null && certChain === null) {
    if (options.serverName) throw new TypeError('serverName needs rootCerts or certChain');
    return { creds: grpc.credentials.createInsecure(), channelOptions: {} };
  }
  const channelOptions = {};
  if (options.serverName) channelOptions['grpc.ssl_target_name_override'] = options.serverName;
  return { creds: grpc.credentials.createSsl(rootCerts, privateKey, certChain), channelOptions };
}

// createClient(addr, {deadlineMs, maxRetries, apiDir, rootCerts, privateKey, certChain,
//   serverName}) -> {users, channels, put, get, leaseGrant, leaseKeepAlive, leaseRevoke, range,
//   rangePage, txn, watch, route, taskStatus, clusterState, admin, lastRevision,
//   observeRevision, close}.
// addr: "host:port", a comma-separated list of them, or an array. put and get go to the first
// one, which forwards requests for groups it does not lead; route, taskStatus, clusterState and
// admin go to the endpoints in turn (the one that answered last first). Every call has a deadline
// and returns a Promise that rejects with the grpc-js ServiceError (err.code, err.details), plus
// err.detail (the decoded slotd.v1.ErrorDetail or null), err.address and err.attempts. TLS
// options: see channelSetup.
//
// Read your admin writes: the client keeps the highest controller revision it has seen (admin
// write answers, cluster states, task status answers, routes) and sends it as min_revision on
// route, taskStatus and clusterState unless the call passes its own minRevision.
function createClient(addr, options = {}) {
  const deadlineMs = options.deadlineMs || DEFAULT_DEADLINE_MS;
  const maxRetries = options.maxRetries === undefined ? DEFAULT_MAX_RETRIES : options.maxRetries;
  if (!Number.isInteger(maxRetries) || maxRetries < 0) {
    throw new TypeError('maxRetries must be an integer >= 0');
  }
  const apiDir = options.apiDir || DEFAULT_API_DIR;
  const endpoints = endpointsOf(addr);
  const { Metadata, Admin } = loadServices(apiDir);
  const { creds, channelOptions } = channelSetup(options);
  const channels = new Map(); // address -> {channel, metadata, admin}, opened on first use
  let preferred = 0; // index into endpoints: the one that answered last
  let lastRevision = 0n; // the highest controller revision seen

  function stubs(address) {
    let entry = channels.get(address);
    if (!entry) {
      const channel = new grpc.Channel(address, creds, channelOptions);
      entry = {
        channel,
        metadata: new Metadata(address, creds, { channelOverride: channel }),
        admin: new Admin(address, creds, { channelOverride: channel }),
      };
      channels.set(address, entry);
    }
    return entry;
  }

  function unary(address, service, method, request) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + deadlineMs);
      stubs(address)[service][method](request, { deadline }, (err, response) => {
        if (!err) {
          resolve(response);
          return;
        }
        err.detail = errorDetail(err, apiDir);
        err.address = address;
        err.attempts = 1;
        reject(err);
      });
    });
  }

  function observe(revision) {
    const r = toRevision(revision, 'revision');
    if (r > lastRevision) lastRevision = r;
    return lastRevision.toString();
  }

  // A read of service/method on any endpoint (those answering UNAVAILABLE skipped) whose answer's
  // revisionField (a revision) is observed; resolves to the answer.
  async function observedRead(service, method, request, revisionField = 'revision') {
    const response = await anyEndpoint(service, method, request, SKIP_READ_CODES);
    observe(response[revisionField]);
    return response;
  }

  // The min_revision to send: lastRevision when minRevision is undefined or null.
  function minRevisionOf(minRevision) {
    if (minRevision === undefined || minRevision === null) return lastRevision.toString();
    return toRevision(minRevision, 'minRevision').toString();
  }

  // service.method(request) on the endpoints in turn. A code in skipCodes moves on to the next
  // endpoint, unless it is an UNAVAILABLE naming min_revision (the node did not reach the
  // revision asked for in its 3 s wait), which rejects at once; after a whole pass of skipped
  // endpoints the client backs off and makes at most passes - 1 more.
  async function anyEndpoint(service, method, request, skipCodes, passes = 1) {
    const order = endpoints.slice(preferred).concat(endpoints.slice(0, preferred));
    let attempts = 0;
    let backoff = BACKOFF_FIRST_MS;
    let last = null;
    for (let pass = 0; pass < passes; pass += 1) {
      if (pass > 0) {
        const hinted = last.detail && last.detail.retry_after_ms;
        await sleep(Math.min(hinted || backoff, BACKOFF_MAX_MS));
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
      for (const address of order) {
        attempts += 1;
        try {
          const response = await unary(address, service, method, request);
          preferred = endpoints.indexOf(address);
          return response;
        } catch (err) {
          err.attempts = attempts;
          const notReached = err.code === grpc.status.UNAVAILABLE && err.detail !== null &&
            err.detail.field === MIN_REVISION_FIELD;
          if (!skipCodes.has(err.code) || notReached) throw err;
          last = err;
        }
      }
    }
    throw last;
  }

  // Typed metadata (typed.js): writes and one owner's reads go to the first address (which
  // forwards), spanning listings to any endpoint, like range pages.
  const typed = makeTyped({
    propose: (request) => unary(endpoints[0], 'metadata', 'Propose', request),
    read: (request) => unary(endpoints[0], 'metadata', 'Read', request),
    readAny: (request) => anyEndpoint('metadata', 'Read', request, SKIP_READ_CODES,
      1 + maxRetries),
  });

  return {
    users: typed.users,
    channels: typed.channels,
    // Resolves to the ProposeResponse: {group_id, applied_index, deduplicated, put: {version}}.
    // requestId (Buffer or string, 1..64 bytes) makes a retry of the same put safe. lease (an
    // id from leaseGrant) attaches the key to that lease, which must live in the key's hash
    // slot (FAILED_PRECONDITION otherwise, nothing written); none also detaches the key.
    put(key, value, { requestId, lease } = {}) {
      const request = {
        put: { key: toBuffer(key, 'key'), value: toBuffer(value, 'value') },
      };
      if (lease !== undefined && lease !== 0 && lease !== '0' && lease !== 0n) {
        request.put.lease = toLeaseId(lease, 'lease');
      }
      if (requestId !== undefined) request.request_id = toBuffer(requestId, 'requestId');
      return unary(endpoints[0], 'metadata', 'Propose', request);
    },
    // Leases: keys deleted when their lease expires or is revoked. Like put, these go to the
    // first address, which forwards them to the leader of the lease's hash slot. Each resolves
    // to the ProposeResponse.
    // leaseGrant(key, ttlSeconds): a lease in key's hash slot (the key is not written) of
    // 1..31536000 s; {lease_grant: {id (decimal string), ttl_seconds}}. RangeError for a TTL
    // out of range (no call).
    leaseGrant(key, ttlSeconds, { requestId } = {}) {
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > LEASE_TTL_MAX) {
        throw new RangeError(`lease_grant.ttl_seconds ${ttlSeconds} is not in 1..${LEASE_TTL_MAX}`);
      }
      const request = { lease_grant: { key: toBuffer(key, 'key'), ttl_seconds: ttlSeconds } };
      if (requestId !== undefined) request.request_id = toBuffer(requestId, 'requestId');
      return unary(endpoints[0], 'metadata', 'Propose', request);
    },
    // leaseKeepAlive(id): restarts the lease's TTL; {lease_keep_alive: {ttl_seconds, keys}}.
    // Rejects NOT_FOUND when the lease expired or was revoked. id: BigInt, Number or a decimal
    // or 0x string (RangeError when it is not a lease id; no call).
    leaseKeepAlive(id, { requestId } = {}) {
      const request = { lease_keep_alive: { id: toLeaseId(id) } };
      if (requestId !== undefined) request.request_id = toBuffer(requestId, 'requestId');
      return unary(endpoints[0], 'metadata', 'Propose', request);
    },
    // leaseRevoke(id): deletes the lease and every key attached to it; {lease_revoke:
    // {keys_deleted}}. Rejects NOT_FOUND when it is gone already.
    leaseRevoke(id, { requestId } = {}) {
      const request = { lease_revoke: { id: toLeaseId(id) } };
      if (requestId !== undefined) request.request_id = toBuffer(requestId, 'requestId');
      return unary(endpoints[0], 'metadata', 'Propose', request);
    },
    // Resolves to the ReadResponse: {group_id, applied_index, get: {found, value, version}}.
    // consistency: 'CONSISTENCY_LINEARIZABLE' (default), 'CONSISTENCY_LEADER_LOCAL' or
    // 'CONSISTENCY_LOCAL'.
    get(key, { consistency = 'CONSISTENCY_LINEARIZABLE' } = {}) {
      return unary(endpoints[0], 'metadata', 'Read',
        { consistency, get: { key: toBuffer(key, 'key') } });
    },
    // Resolves to one page of a range query, the ReadResponse {group_id, applied_index, range:
    // {entries: [{key, value, version}], count, more, cursor}}: every key under prefix, or in
    // [start, end) (none: every key), limit entries (0 = 100, at most 1000). The cursor is
    // opaque: any endpoint merges the page from the next runs' groups (forwarding); UNAVAILABLE and
    // the like move on to the next endpoint, at most maxRetries more passes.
    rangePage({ prefix, start, end, limit = 0, keysOnly = false, countOnly = false, cursor,
      consistency = 'CONSISTENCY_LINEARIZABLE' } = {}) {
      const range = { limit, keys_only: keysOnly, count_only: countOnly };
      if (prefix !== undefined) range.prefix = toBuffer(prefix, 'prefix');
      if (start !== undefined) range.start = toBuffer(start, 'start');
      if (end !== undefined) range.end = toBuffer(end, 'end');
      if (cursor !== undefined) range.cursor = toBuffer(cursor, 'cursor');
      return anyEndpoint('metadata', 'Read', { consistency, range }, SKIP_READ_CODES,
        1 + maxRetries);
    },
    // Every entry {key, value, version} of the range, page after page (an async iterator):
    // hash-slot order, then key order within a hash slot. pageLimit: entries per page.
    async* range({ prefix, start, end, pageLimit = 0, keysOnly = false,
      consistency = 'CONSISTENCY_LINEARIZABLE' } = {}) {
      let cursor;
      for (;;) {
        const page = (await this.rangePage({ prefix, start, end, limit: pageLimit, keysOnly,
          cursor, consistency })).range;
        yield* page.entries;
        if (!page.more) return;
        cursor = page.cursor;
      }
    },
    // A txn builder: ifValue(key, op, value), ifVersion(key, op, version), ifExists(key),
    // ifAbsent(key) (op one of = == != > <), thenPut/thenDelete/thenGet and
    // elsePut/elseDelete/elseGet, then commit(): resolves to the ProposeResponse {txn:
    // {succeeded, results}} (one result per op of the branch that ran). Every key must map to
    // the slot group of the first key (INVALID_ARGUMENT otherwise); the txn is atomic there.
    txn({ requestId } = {}) {
      const command = { compares: [], success: [], failure: [] };
      const compare = (key, target, op, extra) => {
        if (op !== undefined && !Object.prototype.hasOwnProperty.call(TXN_OPS, op)) {
          throw new TypeError(`compare operator ${op} is not one of ${Object.keys(TXN_OPS)}`);
        }
        command.compares.push({ key: toBuffer(key, 'key'), target,
          op: op === undefined ? 'TXN_COMPARE_OP_UNSPECIFIED' : TXN_OPS[op], ...extra });
      };
      const op = (branch, kind, key, value, lease) => {
        const k = toBuffer(key, 'key');
        const put = kind === 'put' ? { key: k, value: toBuffer(value, 'value') } : null;
        if (put && lease !== undefined && lease !== 0 && lease !== '0' && lease !== 0n) {
          put.lease = toLeaseId(lease, 'lease');
        }
        branch.push(put ? { put } : kind === 'delete' ? { delete: { key: k } } : { get: { key: k } });
      };
      const builder = {
        ifValue(key, o, value) {
          compare(key, 'TXN_TARGET_VALUE', o, { value: toBuffer(value, 'value') });
          return builder;
        },
        ifVersion(key, o, version) {
          compare(key, 'TXN_TARGET_VERSION', o, { version: String(version) });
          return builder;
        },
        ifExists(key) { compare(key, 'TXN_TARGET_EXISTS'); return builder; },
        ifAbsent(key) { compare(key, 'TXN_TARGET_ABSENT'); return builder; },
        thenPut(key, value, { lease } = {}) {
          op(command.success, 'put', key, value, lease);
          return builder;
        },
        thenDelete(key) { op(command.success, 'delete', key); return builder; },
        thenGet(key) { op(command.success, 'get', key); return builder; },
        elsePut(key, value, { lease } = {}) {
          op(command.failure, 'put', key, value, lease);
          return builder;
        },
        elseDelete(key) { op(command.failure, 'delete', key); return builder; },
        elseGet(key) { op(command.failure, 'get', key); return builder; },
        command,
        commit() {
          const request = { txn: command };
          if (requestId !== undefined) request.request_id = toBuffer(requestId, 'requestId');
          return unary(endpoints[0], 'metadata', 'Propose', request);
        },
      };
      return builder;
    },
    // Resolves to the RouteSnapshotResponse {route_revision, hash_slot_table, groups, nodes},
    // built from lastRevision or later.
    async route() {
      return observedRead('metadata', 'RouteSnapshot', { min_revision: lastRevision.toString() },
        'route_revision');
    },
    // Resolves to the TaskStatusResponse {task, tasks, revision}: task taskId, or with 0 every
    // kept task (activeOnly: pending and running ones). minRevision (BigInt, Number or decimal
    // string; 0 included) replaces lastRevision for this call. A node that has not reached it
    // within 3 s rejects with UNAVAILABLE and err.detail.field 'min_revision'.
    async taskStatus(taskId = 0, { minRevision, activeOnly = false } = {}) {
      return observedRead('metadata', 'TaskStatus', {
        task_id: toRevision(taskId, 'taskId').toString(),
        active_only: activeOnly,
        min_revision: minRevisionOf(minRevision),
      });
    },
    // Resolves to the ClusterStateResponse {not_modified, revision, checksum, applied_raft_index,
    // state_json (Buffer), from_voter}; minRevision as in taskStatus.
    async clusterState({ minRevision, knownRevision = 0, knownChecksum = '' } = {}) {
      return observedRead('admin', 'ClusterState', {
        known_revision: toRevision(knownRevision, 'knownRevision').toString(),
        known_checksum: knownChecksum,
        min_revision: minRevisionOf(minRevision),
      });
    },
    // An Admin write by name with its request object, e.g. admin('SetPreferredLeader',
    // {group_id: 1, node_id: 2}) or admin('MoveReplica', {group_id, from_node, to_node}).
    // Resolves to the AdminWriteResponse {outcome, reason, revision, applied_index, task_id}.
    // Endpoints answering UNAVAILABLE are skipped, with at most maxRetries more passes after
    // back-off; nothing else is retried (a timed-out command may have been applied).
    async admin(method, request) {
      const spec = Object.prototype.hasOwnProperty.call(Admin.service, method) ?
        Admin.service[method] : null;
      if (spec === null || spec.responseType.type.name !== 'AdminWriteResponse') {
        throw new TypeError(`${method} is not an Admin write method (one answering ` +
                            'AdminWriteResponse)');
      }
      const response = await anyEndpoint('admin', method, request, SKIP_WRITE_CODES,
        1 + maxRetries);
      observe(response.revision);
      return response;
    },
    // Metadata/Watch of key, or of every key under prefix (both empty: every key), that
    // resumes by itself. onMessage(WatchResponse) gets the created message first, then events
    // ({type, key, value, version, group_id, index}) and progress messages. Returns
    // {positions, resumes, cancel(), done}: positions (Map group_id -> index as a decimal
    // string) is where the last message left each group; a stream ending with a code in
    // WATCH_RESUME_CODES starts again on the next endpoint with resume = positions, so no event
    // is lost or repeated (at most maxResumes in a row without a message; default unbounded).
    // done resolves after cancel(), and rejects with the error that ended the watch otherwise
    // (err.detail: a COMPACTED one names detail.compacted). typed ({kind:
    // 'TYPED_WATCH_KIND_SUBSCRIBERS' | 'TYPED_WATCH_KIND_CHANNEL' | 'TYPED_WATCH_KIND_USER', id})
    // follows one id's typed rows instead of keys (events then carry table).
    watch({ key, prefix, resume, keysOnly = false, progressIntervalMs = 0,
      maxResumes = Infinity, typed } = {}, onMessage = () => {}) {
      const positions = new Map(Object.entries(resume || {}).map(([g, i]) => [Number(g),
        String(i)]));
      const handle = { positions, resumes: 0, cancelled: false, call: null };
      let at = preferred;
      let inARow = 0;
      let backoff = BACKOFF_FIRST_MS;
      handle.done = new Promise((resolve, reject) => {
        const start = () => {
          if (handle.cancelled) {
            resolve();
            return;
          }
          const address = endpoints[at % endpoints.length];
          const request = {
            key: key === undefined ? Buffer.alloc(0) : toBuffer(key, 'key'),
            prefix: prefix === undefined ? Buffer.alloc(0) : toBuffer(prefix, 'prefix'),
            keys_only: keysOnly,
            progress_interval_ms: progressIntervalMs,
            resume: [...positions].map(([g, i]) => ({ group_id: g, index: i })),
          };
          if (typed !== undefined) request.typed = typed;
          const call = stubs(address).metadata.Watch(request);
          handle.call = call;
          let ended = false;
          call.on('data', (msg) => {
            inARow = 0;
            backoff = BACKOFF_FIRST_MS;
            for (const p of msg.positions) positions.set(p.group_id, String(p.index));
            onMessage(msg);
          });
          const end = (err) => {
            if (ended) return;
            ended = true;
            if (handle.cancelled) {
              resolve();
              return;
            }
            if (err && WATCH_RESUME_CODES.has(err.code) && inARow < maxResumes) {
              inARow += 1;
              handle.resumes += 1;
              at += 1;
              const wait = backoff;
              backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
              setTimeout(start, wait);
              return;
            }
            if (err) {
              err.detail = errorDetail(err, apiDir);
              err.address = address;
              reject(err);
            } else {
              resolve();
            }
          };
          call.on('error', end);
          call.on('end', () => end(null));
        };
        start();
      });
      handle.cancel = () => {
        handle.cancelled = true;
        if (handle.call) handle.call.cancel();
      };
      return handle;
    },
    // The highest controller revision this client has seen, a decimal string ('0': none yet).
    get lastRevision() {
      return lastRevision.toString();
    },
    // Raises lastRevision to revision (never lowers it), e.g. one another client saw; returns
    // the new lastRevision.
    observeRevision(revision) {
      return observe(revision);
    },
    close() {
      for (const { metadata, admin, channel } of channels.values()) {
        metadata.close();
        admin.close();
        channel.close();
      }
      channels.clear();
    },
  };
}

module.exports = {
  createClient, errorDetail, leaseHashSlot, loadMetadataService, loadServices, grpc,
  WATCH_RESUME_CODES,
};
