#!/bin/sh
# gen.sh - generates the Python gRPC stubs into slotd_client/_gen/ from the repo's api/ folder.
# Usage: clients/python/gen.sh [API_DIR]   (default: $SLOTD_API_DIR, else ../../api from here)
# Runs gen.py as a script, so it works before any stubs exist.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ]; then
  exec /usr/bin/python3 "$here/slotd_client/gen.py" --api "$1" --force
fi
exec /usr/bin/python3 "$here/slotd_client/gen.py" --force
