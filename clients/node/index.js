// index.js - a small slotd.v1.Metadata client for Node.js (@grpc/grpc-js + @grpc/proto-loader).
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// The .proto files come straight from the repo's api/ folder (or SLOTD_API_DIR / options.apiDir).
const DEFAULT_API_DIR = process.env.SLOTD_API_DIR || path.join(__dirname, '..', '..', 'api');
const DEFAULT_DEADLINE_MS = 5000;

// bytes fields are Buffers (proto-loader's default); uint64 fields are decimal strings so no
// precision is lost; enums are their names; unset scalars come back as their defaults.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

function loadMetadataService(apiDir) {
  const definition = protoLoader.loadSync('slotd/v1/metadata.proto', {
    ...LOADER_OPTIONS,
    includeDirs: [apiDir],
  });
  return grpc.loadPackageDefinition(definition).slotd.v1.Metadata;
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

// createClient(addr, {deadlineMs, apiDir, rootCerts, privateKey, certChain, serverName})
//   -> {put, get, close}.
// One channel to addr; the node forwards requests for groups it does not lead. Every call has a
// deadline and returns a Promise that rejects with the grpc-js ServiceError (err.code,
// err.details). TLS options: see channelSetup.
function createClient(addr, options = {}) {
  const deadlineMs = options.deadlineMs || DEFAULT_DEADLINE_MS;
  const Metadata = loadMetadataService(options.apiDir || DEFAULT_API_DIR);
  const { creds, channelOptions } = channelSetup(options);
  const stub = new Metadata(addr, creds, channelOptions);

  function unary(method, request) {
    return new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + deadlineMs);
      stub[method](request, { deadline }, (err, response) => (err ? reject(err) : resolve(response)));
    });
  }

  return {
    // Resolves to the ProposeResponse: {group_id, applied_index, deduplicated, put: {version}}.
    // requestId (Buffer or string, 1..64 bytes) makes a retry of the same put safe.
    put(key, value, { requestId } = {}) {
      const request = {
        put: { key: toBuffer(key, 'key'), value: toBuffer(value, 'value') },
      };
      if (requestId !== undefined) request.request_id = toBuffer(requestId, 'requestId');
      return unary('Propose', request);
    },
    // Resolves to the ReadResponse: {group_id, applied_index, get: {found, value, version}}.
    // consistency: 'CONSISTENCY_LINEARIZABLE' (default), 'CONSISTENCY_LEADER_LOCAL' or
    // 'CONSISTENCY_LOCAL'.
    get(key, { consistency = 'CONSISTENCY_LINEARIZABLE' } = {}) {
      return unary('Read', { consistency, get: { key: toBuffer(key, 'key') } });
    },
    close() {
      stub.close();
    },
  };
}

module.exports = { createClient, loadMetadataService, grpc };
