#!/usr/bin/env node
// example.js - one put and one linearizable get against a slotd node, printed.
'use strict';

const { createClient, grpc } = require('./index');

const USAGE = 'usage: node example.js [--addr HOST:PORT] [--key K] [--value V]\n' +
  '         [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]';

function parseArgs(argv) {
  const args = {
    addr: '127.0.0.1:7700', key: 'hello', value: 'world',
    'tls-ca': undefined, 'tls-cert': undefined, 'tls-key': undefined, 'tls-server-name': undefined,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const name = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--') || !(name in args) || i + 1 >= argv.length) {
      console.error(USAGE);
      process.exit(2);
    }
    args[name] = argv[i + 1];
    i += 1;
  }
  if ((args['tls-cert'] === undefined) !== (args['tls-key'] === undefined)) {
    console.error(`example: --tls-cert and --tls-key: give both or neither\n${USAGE}`);
    process.exit(2);
  }
  return args;
}

function clientOf(args) {
  try {
    return createClient(args.addr, {
      rootCerts: args['tls-ca'],
      certChain: args['tls-cert'],
      privateKey: args['tls-key'],
      serverName: args['tls-server-name'],
    });
  } catch (err) {
    console.error(`example: ${err.message}`);
    process.exit(2);
  }
  return null;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = clientOf(args);
  try {
    const w = await client.put(args.key, args.value);
    console.log(`put ${args.key}: group ${w.group_id}, applied index ${w.applied_index}, ` +
                `version ${w.put.version}`);
    const r = await client.get(args.key, { consistency: 'CONSISTENCY_LINEARIZABLE' });
    console.log(`get ${args.key}: found=${r.get.found} value='${r.get.value.toString('utf8')}' ` +
                `version ${r.get.version}`);
  } finally {
    client.close();
  }
}

main().catch((err) => {
  const code = Object.keys(grpc.status).find((name) => grpc.status[name] === err.code);
  console.error(`example: ${code ? `${code}: ` : ''}${err.details || err.message}`);
  process.exit(1);
});
