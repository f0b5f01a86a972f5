// typed.js - typed metadata helpers of the Node client: client.users and client.channels, with
// async iterators over listings that follow cursors (docs/api.md "Listings").
'use strict';

const PAGE_LIMIT_MAX = 1000;
const DELETE_REPEATS_MAX = 1000; // a delete removes up to 10,000 rows an entry
const LISTS = {
  subscribers: 'MEMBER_LIST_SUBSCRIBERS',
  allowlist: 'MEMBER_LIST_ALLOWLIST',
  denylist: 'MEMBER_LIST_DENYLIST',
};

// [channel_id, channel_type] from an array, {id, type} or a Channel-like {channel_id,
// channel_type}.
function channelOf(channel) {
  if (Array.isArray(channel) && channel.length === 2) return [String(channel[0]), Number(channel[1])];
  if (channel && channel.channel_id !== undefined) {
    return [channel.channel_id, Number(channel.channel_type)];
  }
  if (channel && channel.id !== undefined) return [String(channel.id), Number(channel.type)];
  throw new TypeError('a channel is [channelId, channelType]');
}

// makeTyped({propose, read, readAny}) -> {users, channels}. propose(request) and read(request)
// send a ProposeRequest / ReadRequest (plain objects) and resolve to the response; readAny is
// read for the listings that span hash slots (any endpoint merges them).
function makeTyped({ propose, read, readAny }) {
  async function command(op, body) {
    return (await propose({ [op]: body }))[op];
  }
  async function query(op, body) {
    return (await read({ [op]: body }))[op];
  }
  // Every entry of listing op (body without cursor and limit), page after page.
  async function* pages(op, body, { limit = 0, spans = false } = {}) {
    if (!Number.isInteger(limit) || limit < 0 || limit > PAGE_LIMIT_MAX) {
      throw new RangeError(`limit: ${limit} is outside 0..${PAGE_LIMIT_MAX}`);
    }
    let cursor = Buffer.alloc(0);
    for (;;) {
      const request = { [op]: { ...body, cursor, limit } };
      const page = (await (spans ? readAny(request) : read(request)))[op];
      const field = Object.keys(page).find((k) => k !== 'next_cursor');
      yield* page[field];
      if (!page.next_cursor || page.next_cursor.length === 0) return;
      cursor = page.next_cursor;
    }
  }
  // A bounded delete, sent again while its result says more; every result.
  async function repeat(op, body) {
    const results = [];
    for (let i = 0; i < DELETE_REPEATS_MAX; i += 1) {
      results.push(await command(op, body));
      if (!results[results.length - 1].more) return results;
    }
    throw new Error(`${op}: still more after ${DELETE_REPEATS_MAX} repeats`);
  }
  const found = (r, field) => (r.found ? r[field] : null);

  function devices(uid) {
    return {
      put: (deviceFlag, { token = '', deviceLevel = 0 } = {}) => command('put_device', {
        device: { uid, device_flag: deviceFlag, token, device_level: deviceLevel },
      }),
      get: async (deviceFlag) => found(await query('get_device', { uid, device_flag: deviceFlag }),
        'device'),
      remove: (deviceFlag) => command('remove_device', { uid, device_flag: deviceFlag }),
      list: ({ limit = 0 } = {}) => pages('list_devices', { uid }, { limit }),
    };
  }

  function conversations(uid) {
    const cmd = (op, channel, fields = {}) => {
      const [channel_id, channel_type] = channelOf(channel);
      return command(op, { uid, channel_id, channel_type, ...fields });
    };
    return {
      join: (channel, { activatedAtMs, joinSeq = 0 }) => cmd('join_channel', channel,
        { activated_at_ms: activatedAtMs, join_seq: joinSeq }),
      leave: (channel) => cmd('leave_channel', channel),
      markRead: (channel, readSeq) => cmd('mark_read', channel, { read_seq: readSeq }),
      hide: (channel, hideThroughSeq) => cmd('hide_conversation', channel,
        { hide_through_seq: hideThroughSeq }),
      activate: (channel, activatedAtMs) => cmd('activate_conversation', channel,
        { activated_at_ms: activatedAtMs }),
      get: async (channel) => {
        const [channel_id, channel_type] = channelOf(channel);
        return found(await query('get_membership', { uid, channel_id, channel_type }),
          'membership');
      },
      list: ({ limit = 0 } = {}) => pages('list_conversations', { uid }, { limit }),
    };
  }

  const users = {
    create: (uid, { token = '', deviceFlag = 0, deviceLevel = 0 } = {}) => command('create_user', {
      user: { uid, token, device_flag: deviceFlag, device_level: deviceLevel },
    }),
    update: (uid, { token = '', deviceFlag = 0, deviceLevel = 0 } = {}) => command('update_user', {
      user: { uid, token, device_flag: deviceFlag, device_level: deviceLevel },
    }),
    get: async (uid) => found(await query('get_user', { uid }), 'user'),
    delete: (uid) => repeat('delete_user', { uid }),
    devices,
    conversations,
    setSystem: (uid, system = true) => command('set_system_uid', { uid, system }),
    isSystem: async (uid) => (await query('is_system_uid', { uid })).system,
    systemUids: ({ limit = 0 } = {}) => pages('list_system_uids', {}, { limit, spans: true }),
  };

  function members(channel, which) {
    const [channel_id, channel_type] = channelOf(channel);
    const change = async (add, uids, expectedVersion) => {
      if (which !== 'subscribers') {
        return command(`${add ? 'add' : 'remove'}_${which}`, { channel_id, channel_type, uids });
      }
      let expected = expectedVersion;
      if (expected === undefined) { // the fence: the channel's current subscriber_version
        const current = found(await query('get_channel', { channel_id, channel_type }), 'channel');
        expected = current ? current.subscriber_version : 0;
      }
      return command(add ? 'add_subscribers' : 'remove_subscribers',
        { channel_id, channel_type, uids, expected_version: expected });
    };
    return {
      add: (uids, { expectedVersion } = {}) => change(true, uids, expectedVersion),
      remove: (uids, { expectedVersion } = {}) => change(false, uids, expectedVersion),
      has: async (uid) => (await query('check_member',
        { channel_id, channel_type, list: LISTS[which], uid })).member,
      list: ({ limit = 0 } = {}) => pages('list_members',
        { channel_id, channel_type, list: LISTS[which] }, { limit }),
    };
  }

  function events(channel) {
    const [channel_id, channel_type] = channelOf(channel);
    return {
      append: (eventType, { messageSeq = 0, payload = Buffer.alloc(0) } = {}) =>
        command('append_event', {
          channel_id, channel_type, event_type: eventType, message_seq: messageSeq, payload,
        }),
      list: ({ afterSeq = 0, limit = 0 } = {}) => pages('list_events',
        { channel_id, channel_type, after_seq: afterSeq }, { limit }),
    };
  }

  const channels = {
    create: (channel, { flags, eventCapacity = 0 } = {}) => {
      const [channel_id, channel_type] = channelOf(channel);
      return command('create_channel', { channel_id, channel_type, flags, event_capacity: eventCapacity });
    },
    get: async (channel) => {
      const [channel_id, channel_type] = channelOf(channel);
      return found(await query('get_channel', { channel_id, channel_type }), 'channel');
    },
    setFlags: (channel, flags) => {
      const [channel_id, channel_type] = channelOf(channel);
      return command('update_channel_flags', { channel_id, channel_type, flags });
    },
    delete: (channel) => {
      const [channel_id, channel_type] = channelOf(channel);
      return repeat('delete_channel', { channel_id, channel_type });
    },
    list: ({ idPrefix = '', channelType = 0, limit = 0 } = {}) => pages('list_channels',
      { id_prefix: idPrefix, channel_type: channelType }, { limit, spans: true }),
    subscribers: (channel) => members(channel, 'subscribers'),
    allowlist: (channel) => members(channel, 'allowlist'),
    denylist: (channel) => members(channel, 'denylist'),
    events,
    runtimeMeta: async (channel) => {
      const [channel_id, channel_type] = channelOf(channel);
      return found(await query('get_runtime_meta', { channel_id, channel_type }), 'meta');
    },
    runtimeMetaLedBy: (leader, { limit = 0 } = {}) => pages('list_runtime_meta', { leader },
      { limit, spans: true }),
    migrationTasks: ({ status = 'MIGRATION_STATUS_UNSPECIFIED', channel, limit = 0 } = {}) => {
      const [channel_id, channel_type] = channel === undefined ? ['', 0] : channelOf(channel);
      return pages('list_migration_tasks', { channel_id, channel_type, status },
        { limit, spans: channel === undefined });
    },
  };
  return { users, channels };
}

module.exports = { makeTyped, channelOf };
