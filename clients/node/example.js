#!/usr/bin/env node
// example.js - one put and one linearizable get against a slotd node, printed.
'use strict';

const { createClient, grpc } = require('./index');

function parseArgs(argv) {
  const args = { addr: '127.0.0.1:7700', key: 'hello', value: 'world' };
  for (let i = 0; i < argv.length; i += 1) {
    const name = argv[i].replace(/^--/, '');
    if (!(name in args) || i + 1 >= argv.length) {
      console.error('usage: node example.js [--addr HOST:PORT] [--key K] [--value V]');
      process.exit(2);
    }
    args[name] = argv[i + 1];
    i += 1;
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = createClient(args.addr);
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
