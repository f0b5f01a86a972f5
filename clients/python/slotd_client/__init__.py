# __init__.py - slotd_client: a route-aware Python client for slotd.v1.Metadata.
"""Route-aware Python client for slotd.

    from slotd_client import Client
    with Client(["127.0.0.1:7701", "127.0.0.1:7702"]) as c:
        w = c.put(b"k", b"v")                # ProposeResponse: w.put.version, w.group_id
        r = c.get(b"k")                      # ReadResponse: r.get.found, r.get.value

The generated protobuf modules are re-exported as ``pb`` (slotd.v1 metadata), ``pb_grpc``,
``admin_pb`` (slotd.v1 admin) and ``admin_pb_grpc``.
"""

from .client import (  # noqa: F401
    CONSISTENCY, WATCH_RESUME_CODES, Client, SlotdError, Watch, admin_pb, admin_pb_grpc,
    error_detail, hash_slot, lease_hash_slot, pb, pb_grpc, status_pb2,
)

__all__ = ["CONSISTENCY", "WATCH_RESUME_CODES", "Client", "SlotdError", "Watch", "admin_pb", "admin_pb_grpc", "error_detail",
           "hash_slot", "lease_hash_slot", "pb", "pb_grpc", "status_pb2"]
