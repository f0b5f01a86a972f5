#!/usr/bin/env node
// protos.js - npm pack's prepack/postpack step: copies the repo's .proto files into proto/ so the
// package ships them (`node scripts/protos.js copy`), and removes that copy again (`clean`).
'use strict';

const fs = require('fs');
const path = require('path');

const HERE = path.join(__dirname, '..');
const API = process.env.SLOTD_API_DIR || path.join(HERE, '..', '..', 'api');
const OUT = path.join(HERE, 'proto');
const FILES = ['slotd/v1/metadata.proto', 'slotd/v1/admin.proto', 'google/rpc/status.proto'];

const what = process.argv[2];
if (what === 'copy') {
  for (const rel of FILES) {
    fs.mkdirSync(path.dirname(path.join(OUT, rel)), { recursive: true });
    fs.copyFileSync(path.join(API, rel), path.join(OUT, rel));
  }
} else if (what === 'clean') {
  fs.rmSync(OUT, { recursive: true, force: true });
} else {
  console.error('usage: node scripts/protos.js copy|clean');
  process.exit(2);
}
