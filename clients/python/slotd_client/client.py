# client.py - Client: route-aware calls to slotd.v1.Metadata with leader hints, retries, deadlines.
"""The route-aware helper.

A call maps its key to a hash slot (``crc32(key) % 256``), the slot to a group through the cached
route's ``hash_slot_table``, the group to its observed leader and the leader to its address, and
sends the request there with ``no_forward = True``:

* ``FAILED_PRECONDITION`` + ``NOT_LEADER``: the leader hint (from the ``slotd.v1.ErrorDetail`` in
  the ``grpc-status-details-bin`` trailer) updates the cache and the call goes to the hinted
  address (at most ``max_redirects`` times; nothing was proposed, so this is always safe).
* ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``RESOURCE_EXHAUSTED``, ``CANCELLED``, ``UNKNOWN``,
  ``ABORTED``: the route is marked stale, the client backs off (50 ms doubling to 1 s, or the
  server's ``retry_after_ms``) and retries at most ``max_retries`` times, and only reads and writes
  carrying a request id. Every write gets a random 16-byte request id unless the caller passes one
  (``request_id=b""`` sends none, and such a write is never retried).
* Each attempt has its own deadline (``deadline`` seconds), so one call takes at most
  ``(1 + max_retries + max_redirects) * deadline`` plus back-off.

Read your admin writes: the client keeps ``last_revision``, the highest controller revision it has
seen (``AdminWriteResponse.revision``, ``ClusterStateResponse.revision``,
``TaskStatusResponse.revision``, ``RouteSnapshotResponse.route_revision``), and sends it as
``min_revision`` on RouteSnapshot, TaskStatus and ClusterState, so the node asked answers only once
it has applied that revision (it waits up to 3 s, then fails UNAVAILABLE with an ErrorDetail whose
field is "min_revision"). ``task_status``, ``cluster_state`` and ``admin`` go to the seed endpoints
in turn, skipping one that is down or UNAVAILABLE; a min_revision failure is raised at once.

Failures raise ``SlotdError`` (gRPC code, decoded ErrorDetail, address, attempts).
"""

import json
import os
import sys
import threading
import time
import zlib

import grpc

from . import gen

gen.ensure()
if str(gen.GEN_DIR) not in sys.path:
    sys.path.insert(0, str(gen.GEN_DIR))

from slotd.v1 import metadata_pb2 as pb  # noqa: E402
from slotd.v1 import metadata_pb2_grpc as pb_grpc  # noqa: E402
from slotd.v1 import admin_pb2 as admin_pb  # noqa: E402
from slotd.v1 import admin_pb2_grpc as admin_pb_grpc  # noqa: E402
from google.rpc import status_pb2  # noqa: E402

HASH_SLOTS = 256
REQUEST_ID_BYTES = 16
# A lease id is hash_slot << LEASE_ID_SHIFT | a sequence number (>= 1) of that hash slot.
LEASE_ID_SHIFT = 48
LEASE_TTL_MAX = 31536000
ERROR_DETAIL_TYPE_URL = "type.googleapis.com/slotd.v1.ErrorDetail"
CHANNELS_MAX = 64
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
# The ErrorDetail.field of an UNAVAILABLE whose min_revision the node did not reach in time.
MIN_REVISION_FIELD = "min_revision"

CONSISTENCY = {
    "linearizable": pb.CONSISTENCY_LINEARIZABLE,
    "leader_local": pb.CONSISTENCY_LEADER_LOCAL,
    "local": pb.CONSISTENCY_LOCAL,
}

# Codes after which the call may or may not have taken effect, or was refused before it did:
# retried only when the call is idempotent (a read, or a write with a request id).
RETRIABLE_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.ABORTED,
})

# Codes after which task_status and cluster_state ask the next endpoint (C client: the same), and
# the one after which admin writes do (down, or no controller leader: the command was not sent or
# a repeat answers NOOP). A min_revision UNAVAILABLE is never skipped.
ENDPOINT_SKIP_READ_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
})
ENDPOINT_SKIP_WRITE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.enable_retries", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def hash_slot(key):
    """crc32_ieee(key) % 256, the hash slot of key (bytes)."""
    return zlib.crc32(key) % HASH_SLOTS


def lease_hash_slot(lease_id):
    """The hash slot lease_id lives in (lease_id >> 48). Raises ValueError when lease_id is not a
    lease id (a hash slot above 255, or sequence number 0)."""
    lease_id = int(lease_id)
    slot = lease_id >> LEASE_ID_SHIFT
    if lease_id < 0 or slot >= HASH_SLOTS or lease_id & ((1 << LEASE_ID_SHIFT) - 1) == 0:
        raise ValueError("%d (%#x) is not a lease id (hash slot 0..255 << %d | sequence >= 1)"
                         % (lease_id, lease_id, LEASE_ID_SHIFT))
    return slot


def error_detail(rpc_error):
    """The slotd.v1.ErrorDetail from an RpcError's grpc-status-details-bin trailer, or None."""
    for key, value in rpc_error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except Exception:  # a trailer that does not decode carries no usable detail
            return None
        for anything in status.details:
            if anything.type_url == ERROR_DETAIL_TYPE_URL:
                return pb.ErrorDetail.FromString(anything.value)
    return None


class SlotdError(Exception):
    """A call that failed for good.

    code: grpc.StatusCode; detail: slotd.v1.ErrorDetail or None; message: the server's text;
    address: where the last attempt went; attempts: how many attempts were made."""

    def __init__(self, op, code, message, detail=None, address=None, attempts=0):
        self.op = op
        self.code = code
        self.message = message
        self.detail = detail
        self.address = address
        self.attempts = attempts
        text = "%s: %s: %s" % (op, code.name, message)
        if detail is not None and detail.code != pb.ERROR_CODE_UNSPECIFIED:
            text += " (%s" % pb.ErrorCode.Name(detail.code)
            if detail.field:
                text += ", field %s, limit %d" % (detail.field, detail.limit)
            text += ")"
        text += " [%s, %d attempt%s]" % (address, attempts, "" if attempts == 1 else "s")
        super().__init__(text)

    @property
    def error_code(self):
        """The ErrorDetail code name (e.g. "ERROR_CODE_NOT_LEADER"), or None."""
        return pb.ErrorCode.Name(self.detail.code) if self.detail is not None else None


def _as_bytes(value, what):
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError("%s must be bytes or str, not %s" % (what, type(value).__name__))


def _pem(name, value):
    """PEM bytes from bytes, str, or a pathlib.Path / os.PathLike naming the file."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, os.PathLike):
        with open(value, "rb") as f:
            return f.read()
    raise TypeError("%s must be bytes, str or a path, not %s" % (name, type(value).__name__))


def _ssl_credentials(root_certificates, private_key, certificate_chain):
    """grpc.ssl_channel_credentials for the given PEM values, or None (plaintext) when all three
    are None. private_key and certificate_chain go together (mTLS)."""
    if (private_key is None) != (certificate_chain is None):
        raise ValueError("private_key and certificate_chain: give both or neither")
    if root_certificates is None and certificate_chain is None:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_pem("root_certificates", root_certificates),
        private_key=_pem("private_key", private_key),
        certificate_chain=_pem("certificate_chain", certificate_chain))


class Client:
    """Route-aware client over one or more slotd endpoints ("host:port" strings, or one
    comma-separated string). Thread-safe; close() (or a with block) closes its channels.

    deadline: seconds per attempt; max_retries: retries of idempotent calls after a retriable
    code; max_redirects: NOT_LEADER hints followed per call; route_refresh: seconds after which
    the cached route is fetched again (None: only when a call fails in a way a newer route may
    fix)."""

    def __init__(self, endpoints, deadline=5.0, max_retries=4, max_redirects=8,
                 route_refresh=None, channel_options=None, root_certificates=None,
                 private_key=None, certificate_chain=None, server_name=None, token=None):
        if isinstance(endpoints, str):
            endpoints = [e for e in endpoints.split(",") if e]
        self.endpoints = [e.strip() for e in endpoints if e.strip()]
        if not self.endpoints:
            raise ValueError("Client needs at least one endpoint")
        if deadline <= 0 or max_retries < 0 or max_redirects < 0:
            raise ValueError("deadline must be > 0, max_retries and max_redirects >= 0")
        self.deadline = float(deadline)
        self.max_retries = int(max_retries)
        self.max_redirects = int(max_redirects)
        self.route_refresh = route_refresh
        self._options = list(channel_options if channel_options is not None else CHANNEL_OPTIONS)
        self._credentials = _ssl_credentials(root_certificates, private_key, certificate_chain)
        if server_name is not None:
            if self._credentials is None:
                raise ValueError("server_name needs root_certificates or certificate_chain")
            self._options.append(("grpc.ssl_target_name_override", server_name))
        self._lock = threading.Lock()
        self._channels = {}          # address -> (channel, stub)
        self._route = None           # RouteSnapshotResponse
        self._route_at = 0.0
        self._route_stale = True
        self._leaders = {}           # group_id -> node_id (0 = unknown)
        self._addresses = {}         # node_id -> address
        self._preferred_endpoint = 0
        self._last_revision = 0      # the highest controller revision seen (read your admin writes)
        # Counters, for callers and tests: calls sent, NOT_LEADER redirects followed, retries
        # after a retriable code, route fetches.
        self.stats = {"attempts": 0, "redirects": 0, "retries": 0, "route_fetches": 0}
        # Servers started with --auth 1: the token from authenticate() (or given), sent as
        # "authorization: Bearer <token>" on every call.
        self.token = token

    # -- life cycle --

    def close(self):
        with self._lock:
            channels, self._channels = self._channels, {}
        for channel, _, _ in channels.values():
            channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- channels --

    def _entry(self, address):
        """(channel, Metadata stub, Admin stub) for address, opened on first use."""
        with self._lock:
            entry = self._channels.get(address)
            if entry is None:
                if len(self._channels) >= CHANNELS_MAX:
                    _, (old, _, _) = self._channels.popitem()
                    old.close()
                if self._credentials is None:
                    channel = grpc.insecure_channel(address, options=self._options)
                else:
                    channel = grpc.secure_channel(address, self._credentials,
                                                  options=self._options)
                channel = grpc.intercept_channel(channel, _TokenInterceptor(self))
                entry = (channel, pb_grpc.MetadataStub(channel), admin_pb_grpc.AdminStub(channel))
                self._channels[address] = entry
            return entry

    def _stub(self, address):
        return self._entry(address)[1]

    def _admin_stub(self, address):
        return self._entry(address)[2]

    # -- controller revision (read your admin writes) --

    @property
    def last_revision(self):
        """The highest controller revision this client has seen (0: none yet)."""
        with self._lock:
            return self._last_revision

    def observe_revision(self, revision):
        """Raises last_revision to revision (never lowers it), e.g. one another client saw.
        Returns the new last_revision."""
        revision = int(revision)
        if revision < 0:
            raise ValueError("revision must be >= 0")
        with self._lock:
            if revision > self._last_revision:
                self._last_revision = revision
            return self._last_revision

    def _min_revision(self, min_revision):
        """The min_revision to send: last_revision for None, else the caller's value."""
        if min_revision is None:
            return self.last_revision
        if int(min_revision) < 0:
            raise ValueError("min_revision must be >= 0")
        return int(min_revision)

    # -- route --

    def route(self, refresh=False):
        """The cached RouteSnapshotResponse, fetched first when there is none, it is stale or
        refresh is true. Tries the endpoint that answered last, the other endpoints, then every
        node the cached route names, asking for a route built from last_revision or later
        (min_revision); raises last_revision to its route_revision. Raises SlotdError when none
        answers."""
        with self._lock:
            expired = (self.route_refresh is not None and
                       time.monotonic() - self._route_at > self.route_refresh)
            if self._route is not None and not refresh and not self._route_stale and not expired:
                return self._route
            order = self.endpoints[self._preferred_endpoint:] + \
                self.endpoints[:self._preferred_endpoint]
            order += [a for a in self._addresses.values() if a not in order]
            # a route built from the newest cluster state this client has seen, or later
            request = pb.RouteSnapshotRequest(min_revision=self._last_revision)
        last = None
        for address in order:
            self.stats["route_fetches"] += 1
            try:
                route = self._stub(address).RouteSnapshot(request, timeout=self.deadline)
            except grpc.RpcError as err:
                last = (err, address)
                continue
            self._install_route(route, address)
            return route
        err, address = last
        raise SlotdError("route", err.code(), err.details(), error_detail(err), address,
                         len(order))

    def _install_route(self, route, address):
        with self._lock:
            self._route = route
            self._route_at = time.monotonic()
            self._route_stale = False
            self._last_revision = max(self._last_revision, route.route_revision)
            self._leaders = {g.group_id: g.leader for g in route.groups}
            self._addresses = {n.node_id: n.address for n in route.nodes}
            if address in self.endpoints:
                self._preferred_endpoint = self.endpoints.index(address)

    def group_of(self, key):
        """The group owning key's hash slot in the cached route."""
        table = self.route().hash_slot_table
        return table[hash_slot(_as_bytes(key, "key"))]

    def leader_address(self, group_id):
        """(node_id, address) of the group's observed leader, or (0, None) when unknown."""
        with self._lock:
            node = self._leaders.get(group_id, 0)
            return node, (self._addresses.get(node) if node else None)

    def _target(self, slot):
        """(group_id, address, no_forward) for a hash slot: its group's leader, else an endpoint
        (which forwards)."""
        group_id = self.route().hash_slot_table[slot]
        node, address = self.leader_address(group_id)
        if address:
            return group_id, address, True
        with self._lock:
            return group_id, self.endpoints[self._preferred_endpoint], False

    def _follow_hint(self, group_id, hint):
        """Records a NOT_LEADER hint; True when it names a usable leader."""
        if hint is None or hint.node_id == 0 or not hint.address:
            return False
        with self._lock:
            self._leaders[hint.group_id or group_id] = hint.node_id
            self._addresses[hint.node_id] = hint.address
        return True

    def _mark_stale(self):
        with self._lock:
            self._route_stale = True

    # -- the call loop --

    def _call(self, op, key, method, build, idempotent, slot=None):
        """Sends build(no_forward) to the leader of key's hash slot (or of slot, when given) with
        redirects and retries (see module doc)."""
        if slot is None:
            slot = hash_slot(_as_bytes(key, "key"))
        redirects = retries = attempts = 0
        backoff = BACKOFF_FIRST_S
        hinted = None  # address from the last NOT_LEADER hint, used for the next attempt
        while True:
            try:
                group_id, address, no_forward = self._target(slot)
            except SlotdError as err:
                if not (idempotent and err.code in RETRIABLE_CODES and retries < self.max_retries):
                    raise
                retries += 1
                self.stats["retries"] += 1
                time.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            if hinted is not None:
                address, no_forward, hinted = hinted, True, None
            attempts += 1
            self.stats["attempts"] += 1
            try:
                return getattr(self._stub(address), method)(build(no_forward),
                                                            timeout=self.deadline)
            except grpc.RpcError as err:
                code, message, detail = err.code(), err.details(), error_detail(err)
            not_leader = (code == grpc.StatusCode.FAILED_PRECONDITION and detail is not None and
                          detail.code == pb.ERROR_CODE_NOT_LEADER)
            if not_leader and redirects < self.max_redirects:
                redirects += 1
                self.stats["redirects"] += 1
                if self._follow_hint(group_id, detail.leader_hint):
                    hinted = detail.leader_hint.address
                    continue
                # No usable hint: nothing was proposed, so a refreshed route is safe to try.
                self._mark_stale()
                time.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            if code in RETRIABLE_CODES and idempotent and retries < self.max_retries:
                retries += 1
                self.stats["retries"] += 1
                self._mark_stale()
                wait = backoff
                if detail is not None and detail.retry_after_ms:
                    wait = detail.retry_after_ms / 1000.0
                time.sleep(min(wait, BACKOFF_MAX_S))
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            if code in RETRIABLE_CODES or not_leader:
                self._mark_stale()
            raise SlotdError(op, code, message, detail, address, attempts)

    def _write(self, op, key, request_id, fill, slot=None):
        if request_id is None:
            request_id = os.urandom(REQUEST_ID_BYTES)
        request_id = _as_bytes(request_id, "request_id")

        def build(no_forward):
            req = pb.ProposeRequest(request_id=request_id, no_forward=no_forward)
            fill(req)
            return req
        return self._call(op, key, "Propose", build, idempotent=bool(request_id), slot=slot)

    def _any_endpoint(self, op, invoke, skip_codes, passes=1):
        """invoke(address) on the seed endpoints in turn, the one that answered last first. A code
        in skip_codes moves on to the next endpoint, unless it is an UNAVAILABLE naming
        min_revision (the node did not reach the revision asked for in its 3 s wait), which is
        raised at once; after a whole pass of skipped endpoints the client backs off and makes at
        most passes - 1 more. Anything else raises SlotdError."""
        with self._lock:
            order = self.endpoints[self._preferred_endpoint:] + \
                self.endpoints[:self._preferred_endpoint]
        attempts = 0
        backoff = BACKOFF_FIRST_S
        last = None
        for pass_index in range(passes):
            if pass_index > 0:
                self.stats["retries"] += 1
                wait = backoff
                if last[2] is not None and last[2].retry_after_ms:
                    wait = last[2].retry_after_ms / 1000.0
                time.sleep(min(wait, BACKOFF_MAX_S))
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            for address in order:
                attempts += 1
                self.stats["attempts"] += 1
                try:
                    response = invoke(address)
                except grpc.RpcError as err:
                    code, message, detail = err.code(), err.details(), error_detail(err)
                    not_reached = (code == grpc.StatusCode.UNAVAILABLE and detail is not None and
                                   detail.field == MIN_REVISION_FIELD)
                    if code in skip_codes and not not_reached:
                        last = (code, message, detail, address)
                        continue
                    raise SlotdError(op, code, message, detail, address, attempts)
                with self._lock:
                    self._preferred_endpoint = self.endpoints.index(address)
                return response
        code, message, detail, address = last
        raise SlotdError(op, code, message, detail, address, attempts)

    # -- the API --

    def put(self, key, value, request_id=None, lease=0):
        """Sets key to value. Returns the ProposeResponse (.put.version, .group_id,
        .deduplicated). request_id: None = a random one; b"" = none (then never retried).
        lease: a lease id (lease_grant) the key is attached to, deleted with it; it must live in
        the key's hash slot (SlotdError FAILED_PRECONDITION otherwise, nothing written). 0 = none,
        which also detaches the key from a lease it had."""
        key, value = _as_bytes(key, "key"), _as_bytes(value, "value")

        def fill(req):
            req.put.key, req.put.value, req.put.lease = key, value, int(lease)
        return self._write("put", key, request_id, fill)

    def delete(self, key, request_id=None):
        """Removes key. Returns the ProposeResponse (.delete.deleted, .delete.prev_version)."""
        key = _as_bytes(key, "key")

        def fill(req):
            req.delete.key = key
        return self._write("delete", key, request_id, fill)

    def cas(self, key, expected_version, value=b"", delete=False, request_id=None):
        """Writes value (or deletes) only if key's version is expected_version (0 = absent).
        Returns the ProposeResponse (.compare_and_set.succeeded, .version, .current_value)."""
        key, value = _as_bytes(key, "key"), _as_bytes(value, "value")

        def fill(req):
            req.compare_and_set.key = key
            req.compare_and_set.expected_version = int(expected_version)
            req.compare_and_set.value = value
            req.compare_and_set.delete = bool(delete)
        return self._write("cas", key, request_id, fill)

    def get(self, key, consistency="linearizable", min_applied_index=0):
        """Reads key. consistency: "linearizable" (default), "leader_local", "local" or a
        pb.Consistency value. Returns the ReadResponse (.get.found, .get.value, .get.version,
        .group_id, .applied_index)."""
        key = _as_bytes(key, "key")
        level = CONSISTENCY[consistency] if isinstance(consistency, str) else int(consistency)

        def build(no_forward):
            return pb.ReadRequest(consistency=level, min_applied_index=int(min_applied_index),
                                  no_forward=no_forward, get=pb.GetQuery(key=key))
        return self._call("get", key, "Read", build, idempotent=True)

    def range_page(self, prefix=b"", start=b"", end=b"", limit=0, keys_only=False,
                   count_only=False, cursor=b"", consistency="linearizable"):
        """One page of a range query (prefix, or [start, end); none: every key; limit 0 = 100,
        at most 1000). The cursor is opaque: the request goes to a seed endpoint with
        forwarding allowed, which merges the page from the next runs' groups (the endpoint that answered last first; retriable
        failures move on to the next). Returns the ReadResponse (.range.entries, .range.count,
        .range.more, .range.cursor; .group_id, .applied_index)."""
        level = CONSISTENCY[consistency] if isinstance(consistency, str) else int(consistency)
        request = pb.ReadRequest(consistency=level, range=pb.RangeQuery(
            prefix=_as_bytes(prefix, "prefix"), start=_as_bytes(start, "start"),
            end=_as_bytes(end, "end"), limit=int(limit), keys_only=bool(keys_only),
            count_only=bool(count_only), cursor=_as_bytes(cursor, "cursor")))
        return self._any_endpoint(
            "range", lambda address: self._stub(address).Read(request, timeout=self.deadline),
            RETRIABLE_CODES, passes=self.max_retries + 1)

    def range(self, prefix=b"", start=b"", end=b"", page_limit=0, keys_only=False,
              consistency="linearizable"):
        """Every entry of the range, page after page (range_page), as RangeEntry messages (.key,
        .value, .version) in hash-slot order, then key order within a hash slot."""
        cursor = b""
        while True:
            page = self.range_page(prefix, start, end, page_limit, keys_only, False, cursor,
                                   consistency).range
            yield from page.entries
            if not page.more:
                return
            cursor = page.cursor

    # -- leases: keys deleted when their lease expires or is revoked --

    def lease_grant(self, key, ttl, request_id=None):
        """Grants a lease of ttl seconds (1..31536000) in the hash slot of key (the key is not
        written), sent to that group's leader like a put. The lease expires ttl seconds after its
        grant or last keep-alive; its keys are then deleted. Returns (id, ttl granted); the id's
        hash slot is id >> 48. Raises ValueError for a ttl out of range (no call)."""
        key, ttl = _as_bytes(key, "key"), int(ttl)
        if not 1 <= ttl <= LEASE_TTL_MAX:
            raise ValueError("lease_grant.ttl_seconds: %d is not in 1..%d" % (ttl, LEASE_TTL_MAX))

        def fill(req):
            req.lease_grant.key, req.lease_grant.ttl_seconds = key, ttl
        r = self._write("lease_grant", key, request_id, fill)
        return r.lease_grant.id, r.lease_grant.ttl_seconds

    def lease_keepalive(self, lease_id, request_id=None):
        """Restarts lease lease_id's TTL, routed to the leader of the group owning its hash slot.
        Returns (ttl seconds, keys attached). A lease that expired or was revoked: SlotdError
        NOT_FOUND. Raises ValueError when lease_id is not a lease id (no call)."""
        lease_id = int(lease_id)
        slot = lease_hash_slot(lease_id)

        def fill(req):
            req.lease_keep_alive.id = lease_id
        r = self._write("lease_keepalive", b"", request_id, fill, slot=slot)
        return r.lease_keep_alive.ttl_seconds, r.lease_keep_alive.keys

    def lease_revoke(self, lease_id, request_id=None):
        """Deletes lease lease_id and every key attached to it in one entry (routed like
        lease_keepalive). Returns the number of keys deleted. Gone already: SlotdError
        NOT_FOUND."""
        lease_id = int(lease_id)
        slot = lease_hash_slot(lease_id)

        def fill(req):
            req.lease_revoke.id = lease_id
        return self._write("lease_revoke", b"", request_id, fill, slot=slot).lease_revoke.keys_deleted

    def txn(self, request_id=None):
        """A Txn builder: add compares with if_*(), ops with then_*() / else_*(), then commit()."""
        return Txn(self, request_id)

    # -- controller: tasks, cluster state, admin writes (any seed endpoint) --

    def watch(self, key=b"", prefix=b"", resume=None, keys_only=False, progress_interval=None,
              max_resumes=None, typed=None):
        """A Watch (see the class) of one key or of every key under prefix (both empty: every
        key); resume: {group_id: index} from an earlier Watch's positions; progress_interval:
        seconds between progress messages on an idle watch (None: none). typed: instead of
        keys, the typed rows of one id, as (kind, id) with kind "user", "channel" or
        "subscribers" (events then carry .table and the row's primary key and message)."""
        ms = 0 if progress_interval is None else int(progress_interval * 1000)
        req = pb.WatchRequest(key=key, prefix=prefix, keys_only=keys_only,
                              progress_interval_ms=ms)
        if typed is not None:
            kind, typed_id = typed
            if isinstance(kind, str):
                if kind not in TYPED_WATCH_KINDS:
                    raise ValueError("typed watch kind %r is not one of %s"
                                     % (kind, sorted(TYPED_WATCH_KINDS)))
                kind = TYPED_WATCH_KINDS[kind]
            req.typed.kind, req.typed.id = int(kind), typed_id
        return Watch(self, req, resume, max_resumes)

    def task_status(self, task_id=0, min_revision=None, active_only=False):
        """Metadata.TaskStatus: the task task_id (.task), or with 0 every kept task (.tasks; only
        pending and running ones with active_only). min_revision: None sends last_revision, a
        number (0 included) is sent instead. Returns the TaskStatusResponse and raises
        last_revision to its .revision. A node that has not reached min_revision within 3 s:
        SlotdError UNAVAILABLE, detail.field "min_revision"."""
        request = pb.TaskStatusRequest(task_id=int(task_id), active_only=bool(active_only),
                                       min_revision=self._min_revision(min_revision))
        response = self._any_endpoint(
            "task_status", lambda address: self._stub(address).TaskStatus(
                request, timeout=self.deadline), ENDPOINT_SKIP_READ_CODES)
        self.observe_revision(response.revision)
        return response

    def cluster_state(self, min_revision=None, known_revision=0, known_checksum=""):
        """Admin.ClusterState: the controller state the answering node holds (.revision,
        .checksum, .state_json; .not_modified when known_revision and known_checksum match it).
        min_revision as in task_status. Returns the ClusterStateResponse and raises
        last_revision to its .revision."""
        request = admin_pb.ClusterStateRequest(known_revision=int(known_revision),
                                               known_checksum=known_checksum,
                                               min_revision=self._min_revision(min_revision))
        response = self._any_endpoint(
            "cluster_state", lambda address: self._admin_stub(address).ClusterState(
                request, timeout=self.deadline), ENDPOINT_SKIP_READ_CODES)
        self.observe_revision(response.revision)
        return response

    def authenticate(self, user, password):
        """Admin.Authenticate on the endpoints in turn; keeps the token (self.token) so every
        later call sends it. Returns the AuthenticateResponse (.token, .expires_at_ms,
        .user_revision). A wrong user or password: SlotdError UNAUTHENTICATED."""
        request = admin_pb.AuthenticateRequest(user=user, password=password)
        response = self._any_endpoint(
            "authenticate", lambda address: self._admin_stub(address).Authenticate(
                request, timeout=self.deadline), ENDPOINT_SKIP_READ_CODES)
        self.token = response.token
        return response

    def admin(self, method, request):
        """An Admin write RPC by name, e.g. admin("SetPreferredLeader",
        admin_pb.SetPreferredLeaderRequest(group_id=1, node_id=2)) or admin("MoveReplica",
        admin_pb.MoveReplicaRequest(...)). Endpoints answering UNAVAILABLE are skipped, with at
        most max_retries more passes after back-off; nothing else is retried (a timed-out command
        may have been applied). Returns the AdminWriteResponse (.outcome, .reason, .revision,
        .task_id) and raises last_revision to its .revision."""
        service = admin_pb.DESCRIPTOR.services_by_name["Admin"]
        spec = service.methods_by_name.get(method)
        if spec is None or spec.output_type.full_name != "slotd.v1.AdminWriteResponse":
            raise ValueError("%r is not an Admin write method (one answering "
                             "AdminWriteResponse)" % (method,))
        if request.DESCRIPTOR.full_name != spec.input_type.full_name:
            raise TypeError("Admin.%s takes a %s, not a %s" % (
                method, spec.input_type.full_name, request.DESCRIPTOR.full_name))
        response = self._any_endpoint(
            method, lambda address: getattr(self._admin_stub(address), method)(
                request, timeout=self.deadline), ENDPOINT_SKIP_WRITE_CODES,
            passes=1 + self.max_retries)
        self.observe_revision(response.revision)
        return response

    # -- typed metadata (typed.py) --

    @property
    def users(self):
        """Typed helpers for users, devices, system uids and conversations (typed.Users)."""
        from .typed import Users
        return Users(self)

    @property
    def channels(self):
        """Typed helpers for channels, members, events and runtime meta (typed.Channels)."""
        from .typed import Channels
        return Channels(self)

    def set_feature(self, name, enabled):
        """Admin.SetFeature: a switch in the replicated cluster state (name "hash_slot_migration"),
        honoured by every node. Returns the AdminWriteResponse (OUTCOME_NOOP when already so)."""
        return self.admin("SetFeature", admin_pb.SetFeatureRequest(name=name, enabled=enabled))

    def features(self):
        """The cluster state's features as a dict ({"hash_slot_migration": False}), from the
        node answering cluster_state() (a state written before features existed: {})."""
        state = json.loads(self.cluster_state().state_json)
        return dict(state.get("features", {}))


class _TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds "authorization: Bearer <client.token>" to every unary call and Watch stream while a
    token is set."""

    def __init__(self, client):
        self._client = client

    def _details(self, details):
        token = self._client.token
        if token:
            metadata = list(details.metadata or []) + [("authorization", "Bearer " + token)]
            details = _CallDetails(details.method, details.timeout, metadata,
                                   details.credentials, details.wait_for_ready,
                                   details.compression)
        return details

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)


TYPED_WATCH_KINDS = {
    "user": pb.TYPED_WATCH_KIND_USER,
    "channel": pb.TYPED_WATCH_KIND_CHANNEL,
    "subscribers": pb.TYPED_WATCH_KIND_SUBSCRIBERS,
}

_TXN_OPS = {"=": pb.TXN_COMPARE_OP_EQUAL, "==": pb.TXN_COMPARE_OP_EQUAL,
            "!=": pb.TXN_COMPARE_OP_NOT_EQUAL, ">": pb.TXN_COMPARE_OP_GREATER,
            "<": pb.TXN_COMPARE_OP_LESS}


class Txn:
    """Compares, then the success ops when all hold, else the failure ops; atomic within one
    slot group (every key must map to the first key's group: INVALID_ARGUMENT otherwise).
    Builder methods return the Txn; commit() sends it like a write (routed by the first key,
    with a request id so retries are safe) and returns the ProposeResponse (.txn.succeeded,
    .txn.results: one per op of the branch that ran)."""

    def __init__(self, client, request_id=None):
        self._client = client
        self._request_id = request_id
        self.command = pb.TxnCommand()

    def _compare(self, key, target, op=None, **fields):
        if op is not None and op not in _TXN_OPS:
            raise ValueError("compare operator %r is not one of %s" % (op, sorted(_TXN_OPS)))
        self.command.compares.add(key=_as_bytes(key, "key"), target=target,
                                  op=_TXN_OPS[op] if op else pb.TXN_COMPARE_OP_UNSPECIFIED,
                                  **fields)
        return self

    def if_value(self, key, op, value):
        return self._compare(key, pb.TXN_TARGET_VALUE, op, value=_as_bytes(value, "value"))

    def if_version(self, key, op, version):
        return self._compare(key, pb.TXN_TARGET_VERSION, op, version=int(version))

    def if_exists(self, key):
        return self._compare(key, pb.TXN_TARGET_EXISTS)

    def if_absent(self, key):
        return self._compare(key, pb.TXN_TARGET_ABSENT)

    @staticmethod
    def _op(branch, kind, key, value=None, lease=0):
        op = branch.add()
        key = _as_bytes(key, "key")
        if kind == "put":
            op.put.key, op.put.value, op.put.lease = key, _as_bytes(value, "value"), int(lease)
        elif kind == "delete":
            op.delete.key = key
        else:
            op.get.key = key

    def then_put(self, key, value, lease=0):
        """lease: as Client.put's (0 = none)."""
        self._op(self.command.success, "put", key, value, lease)
        return self

    def then_delete(self, key):
        self._op(self.command.success, "delete", key)
        return self

    def then_get(self, key):
        self._op(self.command.success, "get", key)
        return self

    def else_put(self, key, value, lease=0):
        self._op(self.command.failure, "put", key, value, lease)
        return self

    def else_delete(self, key):
        self._op(self.command.failure, "delete", key)
        return self

    def else_get(self, key):
        self._op(self.command.failure, "get", key)
        return self

    def first_key(self):
        """The key the txn is routed by: the first compare's, else the first success op's,
        else the first failure op's (b"" when there is none; the server refuses it)."""
        if self.command.compares:
            return self.command.compares[0].key
        for branch in (self.command.success, self.command.failure):
            if branch:
                op = branch[0]
                return getattr(op, op.WhichOneof("op")).key
        return b""

    def commit(self):
        command = self.command

        def fill(req):
            req.txn.CopyFrom(command)
        return self._client._write("txn", self.first_key(), self._request_id, fill)


# Stream ends a Watch resumes from (on the next endpoint): the node went away, or the client read
# too slowly. Anything else (COMPACTED: OUT_OF_RANGE, INVALID_ARGUMENT, auth) is raised.
WATCH_RESUME_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL,
})


class Watch:
    """A Metadata/Watch that resumes by itself: iterate it for WatchResponse messages (the
    ``created`` one first, then events and progress). ``positions`` ({group_id: index}) is where
    the last message received left every group; when a stream ends with a code in
    WATCH_RESUME_CODES a new one starts on the next endpoint with ``resume`` = positions, so no
    event is lost or repeated; at most ``max_resumes`` resumes in a row without a message in
    between (None: unbounded). cancel() ends the iteration. Other ends raise SlotdError (a
    resume behind a group's history: OUT_OF_RANGE, ``error_code`` COMPACTED, ``detail.compacted``
    the oldest position)."""

    def __init__(self, client, request, resume, max_resumes):
        self._client = client
        self._request = request
        self.positions = dict(resume or {})
        self.max_resumes = max_resumes
        self.resumes = 0  # streams restarted so far
        self._lock = threading.Lock()
        self._call = None
        self._cancelled = False

    def cancel(self):
        with self._lock:
            self._cancelled = True
            call = self._call
        if call is not None:
            call.cancel()

    def __iter__(self):
        client = self._client
        with client._lock:
            order = client.endpoints[client._preferred_endpoint:] + \
                client.endpoints[:client._preferred_endpoint]
        at, in_a_row, backoff = 0, 0, BACKOFF_FIRST_S
        while True:
            address = order[at % len(order)]
            req = pb.WatchRequest()
            req.CopyFrom(self._request)
            req.resume.extend(pb.WatchPosition(group_id=g, index=i)
                              for g, i in sorted(self.positions.items()))
            with self._lock:
                if self._cancelled:
                    return
                self._call = client._stub(address).Watch(req)
                call = self._call
            try:
                for msg in call:
                    in_a_row, backoff = 0, BACKOFF_FIRST_S
                    for p in msg.positions:
                        self.positions[p.group_id] = p.index
                    yield msg
                return
            except grpc.RpcError as err:
                with self._lock:
                    if self._cancelled:
                        return
                code, message, detail = err.code(), err.details(), error_detail(err)
                if code not in WATCH_RESUME_CODES or (
                        self.max_resumes is not None and in_a_row >= self.max_resumes):
                    raise SlotdError("watch", code, message, detail, address,
                                     self.resumes + 1) from None
                in_a_row += 1
                self.resumes += 1
                at += 1
                time.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


__all__ = ["CONSISTENCY", "Client", "SlotdError", "Watch", "WATCH_RESUME_CODES", "admin_pb", "admin_pb_grpc", "error_detail",
           "hash_slot", "lease_hash_slot", "pb", "pb_grpc", "status_pb2"]
