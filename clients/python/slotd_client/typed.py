# typed.py - typed metadata helpers of slotd_client: client.users, client.channels and the
# iterators over listings that follow cursors (docs/api.md "Listings").
"""Typed metadata helpers (``Client.users``, ``Client.channels``).

A channel is named by a ``(channel_id, channel_type)`` tuple. Writes go to the leader of the
owner's group like ``put`` (the uid for user-owned rows, the channel id for channel-owned ones)
with a request id, so retries are safe; reads are linearizable unless ``consistency`` says
otherwise. Listings are iterators that follow ``next_cursor`` page after page.
"""

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, List, Optional, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

ChannelRef = Tuple[str, int]
PAGE_LIMIT_MAX = 1000
DELETE_REPEATS_MAX = 1000  # a delete of 10,000 rows an entry: 10 M rows before giving up


def _channel(channel: Union[ChannelRef, object]) -> ChannelRef:
    """(channel_id, channel_type) from a tuple or a Channel-like message."""
    if isinstance(channel, tuple) and len(channel) == 2:
        return str(channel[0]), int(channel[1])
    if hasattr(channel, "channel_id") and hasattr(channel, "channel_type"):
        return channel.channel_id, int(channel.channel_type)
    raise TypeError("a channel is a (channel_id, channel_type) tuple, got %r" % (channel,))


class _Typed:
    def __init__(self, client: "Client"):
        self._c = client
        from .client import pb
        self._pb = pb

    def _propose(self, op: str, key: str, request_id: Optional[bytes] = None, **command):
        def fill(req):
            for name, msg in command.items():
                getattr(req, name).CopyFrom(msg)
        return getattr(self._c._write(op, key, request_id, fill), op)

    def _read(self, op: str, key: str, consistency="linearizable", **query):
        from .client import CONSISTENCY
        level = CONSISTENCY[consistency] if isinstance(consistency, str) else int(consistency)
        pb = self._pb

        def build(no_forward):
            return pb.ReadRequest(consistency=level, no_forward=no_forward, **query)
        return getattr(self._c._call(op, key, "Read", build, idempotent=True), op)

    def _pages(self, op: str, key: Optional[str], make: Callable, limit: int = 0,
               consistency="linearizable") -> Iterator:
        """Every entry of listing op: make(cursor, limit) builds its query message; key routes a
        one-owner listing (None: a spanning one, sent to a seed endpoint that merges groups)."""
        if not 0 <= limit <= PAGE_LIMIT_MAX:
            raise ValueError("limit: %d is outside 0..%d" % (limit, PAGE_LIMIT_MAX))
        from .client import CONSISTENCY, RETRIABLE_CODES
        level = CONSISTENCY[consistency] if isinstance(consistency, str) else int(consistency)
        cursor = b""
        while True:
            if key is not None:
                page = self._read(op, key, consistency, **{op: make(cursor, limit)})
            else:
                request = self._pb.ReadRequest(consistency=level, **{op: make(cursor, limit)})
                page = getattr(self._c._any_endpoint(
                    op, lambda a: self._c._stub(a).Read(request, timeout=self._c.deadline),
                    RETRIABLE_CODES, passes=self._c.max_retries + 1), op)
            yield from getattr(page, page.DESCRIPTOR.fields_by_number[1].name)
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def _repeat(self, op: str, key: str, **command) -> list:
        """A bounded delete: sent again while its result says more = true; every result."""
        results = []
        for _ in range(DELETE_REPEATS_MAX):
            results.append(self._propose(op, key, **command))
            if not results[-1].more:
                return results
        raise RuntimeError("%s %s: still more after %d repeats" % (op, key, DELETE_REPEATS_MAX))


class Users(_Typed):
    """``client.users``: users, their devices, system uids and conversations."""

    def create(self, uid: str, token: str = "", device_flag: int = 0, device_level: int = 0,
               request_id: Optional[bytes] = None):
        """Creates the user (an existing one is left as it is: changed = False). UserResult."""
        user = self._pb.User(uid=uid, token=token, device_flag=device_flag,
                             device_level=device_level)
        return self._propose("create_user", uid, request_id,
                             create_user=self._pb.CreateUserCommand(user=user))

    def update(self, uid: str, token: str = "", device_flag: int = 0, device_level: int = 0):
        """Replaces token, device flag and level of an existing user (NOT_FOUND otherwise)."""
        user = self._pb.User(uid=uid, token=token, device_flag=device_flag,
                             device_level=device_level)
        return self._propose("update_user", uid, update_user=self._pb.UpdateUserCommand(user=user))

    def get(self, uid: str, consistency="linearizable"):
        """The User, or None."""
        r = self._read("get_user", uid, consistency, get_user=self._pb.GetUserQuery(uid=uid))
        return r.user if r.found else None

    def delete(self, uid: str) -> list:
        """Deletes the user and every row it owns (repeated while more); the DeleteUserResults."""
        return self._repeat("delete_user", uid, delete_user=self._pb.DeleteUserCommand(uid=uid))

    def devices(self, uid: str) -> "Devices":
        return Devices(self._c, uid)

    def conversations(self, uid: str) -> "Conversations":
        return Conversations(self._c, uid)

    def set_system(self, uid: str, system: bool = True):
        """Adds (or removes) uid in the system uid registry. SystemUidResult."""
        return self._propose("set_system_uid", uid, set_system_uid=self._pb.SetSystemUidCommand(
            uid=uid, system=system))

    def is_system(self, uid: str) -> bool:
        return self._read("is_system_uid", uid,
                          is_system_uid=self._pb.IsSystemUidQuery(uid=uid)).system

    def system_uids(self, limit: int = 0) -> Iterator[str]:
        """Every system uid, in hash-slot order, then uid order."""
        return self._pages("list_system_uids", None, lambda c, n: self._pb.ListSystemUidsQuery(
            cursor=c, limit=n), limit)


class Devices(_Typed):
    """``client.users.devices(uid)``: one user's devices, keyed by device flag."""

    def __init__(self, client: "Client", uid: str):
        super().__init__(client)
        self.uid = uid

    def put(self, device_flag: int, token: str = "", device_level: int = 0):
        """Creates or replaces the device. DeviceResult (created)."""
        device = self._pb.Device(uid=self.uid, device_flag=device_flag, token=token,
                                 device_level=device_level)
        return self._propose("put_device", self.uid,
                             put_device=self._pb.PutDeviceCommand(device=device))

    def get(self, device_flag: int):
        r = self._read("get_device", self.uid, get_device=self._pb.GetDeviceQuery(
            uid=self.uid, device_flag=device_flag))
        return r.device if r.found else None

    def remove(self, device_flag: int):
        """RemoveResult: removed, and the device removed."""
        return self._propose("remove_device", self.uid, remove_device=self._pb.RemoveDeviceCommand(
            uid=self.uid, device_flag=device_flag))

    def __iter__(self) -> Iterator:
        return self.list()

    def list(self, limit: int = 0) -> Iterator:
        """The user's Devices in device flag order."""
        return self._pages("list_devices", self.uid, lambda c, n: self._pb.ListDevicesQuery(
            uid=self.uid, cursor=c, limit=n), limit)


class Conversations(_Typed):
    """``client.users.conversations(uid)``: the user's memberships (conversations)."""

    def __init__(self, client: "Client", uid: str):
        super().__init__(client)
        self.uid = uid

    def _cmd(self, op: str, cls: str, channel, **fields):
        cid, ctype = _channel(channel)
        msg = getattr(self._pb, cls)(uid=self.uid, channel_id=cid, channel_type=ctype, **fields)
        return self._propose(op, self.uid, **{op: msg})

    def join(self, channel, activated_at_ms: int, join_seq: int = 0):
        """Joins (re-joins after leave); MembershipResult."""
        return self._cmd("join_channel", "JoinChannelCommand", channel, join_seq=join_seq,
                         activated_at_ms=activated_at_ms)

    def leave(self, channel):
        return self._cmd("leave_channel", "LeaveChannelCommand", channel)

    def mark_read(self, channel, read_seq: int):
        return self._cmd("mark_read", "MarkReadCommand", channel, read_seq=read_seq)

    def hide(self, channel, hide_through_seq: int):
        return self._cmd("hide_conversation", "HideConversationCommand", channel,
                         hide_through_seq=hide_through_seq)

    def activate(self, channel, activated_at_ms: int):
        return self._cmd("activate_conversation", "ActivateConversationCommand", channel,
                         activated_at_ms=activated_at_ms)

    def get(self, channel):
        """The Membership (tombstones included), or None."""
        cid, ctype = _channel(channel)
        r = self._read("get_membership", self.uid, get_membership=self._pb.GetMembershipQuery(
            uid=self.uid, channel_id=cid, channel_type=ctype))
        return r.membership if r.found else None

    def __iter__(self) -> Iterator:
        return self.list()

    def list(self, limit: int = 0) -> Iterator:
        """The visible conversations (Membership), newest activation first."""
        return self._pages("list_conversations", self.uid,
                           lambda c, n: self._pb.ListConversationsQuery(
                               uid=self.uid, cursor=c, limit=n), limit)


class Channels(_Typed):
    """``client.channels``: channels, their member lists, events and runtime meta."""

    def create(self, channel, flags=None, event_capacity: int = 0,
               request_id: Optional[bytes] = None):
        """Creates the channel (an existing one is left as it is). ChannelResult."""
        cid, ctype = _channel(channel)
        cmd = self._pb.CreateChannelCommand(channel_id=cid, channel_type=ctype,
                                            event_capacity=event_capacity)
        if flags is not None:
            cmd.flags.CopyFrom(flags if not isinstance(flags, dict)
                               else self._pb.ChannelFlags(**flags))
        return self._propose("create_channel", cid, request_id, create_channel=cmd)

    def get(self, channel):
        """The Channel, or None."""
        cid, ctype = _channel(channel)
        r = self._read("get_channel", cid, get_channel=self._pb.GetChannelQuery(
            channel_id=cid, channel_type=ctype))
        return r.channel if r.found else None

    def set_flags(self, channel, **flags):
        cid, ctype = _channel(channel)
        return self._propose("update_channel_flags", cid,
                             update_channel_flags=self._pb.UpdateChannelFlagsCommand(
                                 channel_id=cid, channel_type=ctype,
                                 flags=self._pb.ChannelFlags(**flags)))

    def delete(self, channel) -> list:
        """Disbands the channel: deletes it and every row it owns (repeated while more)."""
        cid, ctype = _channel(channel)
        return self._repeat("delete_channel", cid, delete_channel=self._pb.DeleteChannelCommand(
            channel_id=cid, channel_type=ctype))

    def list(self, id_prefix: str = "", channel_type: int = 0, limit: int = 0) -> Iterator:
        """Channels whose id starts with id_prefix (of channel_type, 0 = any), in hash-slot
        order."""
        return self._pages("list_channels", None, lambda c, n: self._pb.ListChannelsQuery(
            id_prefix=id_prefix, channel_type=channel_type, cursor=c, limit=n), limit)

    def subscribers(self, channel) -> "Members":
        return Members(self._c, channel, "subscribers")

    def allowlist(self, channel) -> "Members":
        return Members(self._c, channel, "allowlist")

    def denylist(self, channel) -> "Members":
        return Members(self._c, channel, "denylist")

    def events(self, channel) -> "Events":
        return Events(self._c, channel)

    def runtime_meta(self, channel):
        """The channel's ChannelRuntimeMeta, or None."""
        cid, ctype = _channel(channel)
        r = self._read("get_runtime_meta", cid, get_runtime_meta=self._pb.GetRuntimeMetaQuery(
            channel_id=cid, channel_type=ctype))
        return r.meta if r.found else None

    def runtime_meta_led_by(self, leader: int, limit: int = 0) -> Iterator:
        """RuntimeMetaEntry of every channel whose leader is node `leader` (0: every channel)."""
        return self._pages("list_runtime_meta", None, lambda c, n: self._pb.ListRuntimeMetaQuery(
            leader=leader, cursor=c, limit=n), limit)

    def migration_tasks(self, status: int = 0, channel=None, limit: int = 0) -> Iterator:
        """ChannelMigrationTask records in `status` (0: any), of one channel or of every one."""
        cid, ctype = _channel(channel) if channel is not None else ("", 0)
        return self._pages("list_migration_tasks", cid or None,
                           lambda c, n: self._pb.ListMigrationTasksQuery(
                               channel_id=cid, channel_type=ctype, status=status, cursor=c,
                               limit=n), limit)


class Members(_Typed):
    """``client.channels.subscribers(channel)`` (also ``allowlist``, ``denylist``)."""

    LISTS = {"subscribers": 1, "allowlist": 2, "denylist": 3}

    def __init__(self, client: "Client", channel, which: str):
        super().__init__(client)
        self.channel = _channel(channel)
        self.which = which
        self.list_number = self.LISTS[which]

    def _change(self, add: bool, uids: Iterable[str], expected_version: Optional[int]):
        cid, ctype = self.channel
        uids = list(uids)
        if self.which == "subscribers":
            op = "add_subscribers" if add else "remove_subscribers"
            if expected_version is None:  # the fence: the channel's current subscriber_version
                current = Channels(self._c).get(self.channel)
                expected_version = current.subscriber_version if current is not None else 0
            msg = self._pb.SubscribersCommand(channel_id=cid, channel_type=ctype, uids=uids,
                                              expected_version=expected_version)
        else:
            op = ("add_" if add else "remove_") + self.which
            msg = self._pb.ChannelListCommand(channel_id=cid, channel_type=ctype, uids=uids)
        return self._propose(op, cid, **{op: msg})

    def add(self, uids: Iterable[str], expected_version: Optional[int] = None):
        """Adds at most 1000 uids at once, atomically (subscribers: fenced by expected_version,
        by default the channel's current one). MembersResult."""
        return self._change(True, uids, expected_version)

    def remove(self, uids: Iterable[str], expected_version: Optional[int] = None):
        return self._change(False, uids, expected_version)

    def __contains__(self, uid: str) -> bool:
        cid, ctype = self.channel
        return self._read("check_member", cid, check_member=self._pb.CheckMemberQuery(
            channel_id=cid, channel_type=ctype, list=self.list_number, uid=uid)).member

    def __iter__(self) -> Iterator[str]:
        return self.list()

    def list(self, limit: int = 0) -> Iterator[str]:
        """The uids in byte order."""
        cid, ctype = self.channel
        return self._pages("list_members", cid, lambda c, n: self._pb.ListMembersQuery(
            channel_id=cid, channel_type=ctype, list=self.list_number, cursor=c, limit=n), limit)


class Events(_Typed):
    """``client.channels.events(channel)``: the channel's message-event projection."""

    def __init__(self, client: "Client", channel):
        super().__init__(client)
        self.channel = _channel(channel)

    def append(self, event_type: str, message_seq: int = 0, payload: bytes = b""):
        """AppendEventResult: event_seq, evicted."""
        cid, ctype = self.channel
        return self._propose("append_event", cid, append_event=self._pb.AppendEventCommand(
            channel_id=cid, channel_type=ctype, event_type=event_type, message_seq=message_seq,
            payload=payload))

    def list(self, after_seq: int = 0, limit: int = 0) -> Iterator:
        """The kept ChannelEvents with event_seq > after_seq, newest first."""
        cid, ctype = self.channel
        return self._pages("list_events", cid, lambda c, n: self._pb.ListEventsQuery(
            channel_id=cid, channel_type=ctype, after_seq=after_seq, cursor=c, limit=n), limit)


__all__: List[str] = ["ChannelRef", "Channels", "Conversations", "Devices", "Events", "Members",
                      "Users"]
