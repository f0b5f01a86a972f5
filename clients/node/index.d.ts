// index.d.ts - TypeScript declarations of the slotd Node client (index.js and typed.js).
import * as grpcJs from '@grpc/grpc-js';

/** uint64 values arrive as decimal strings; inputs take a BigInt, a Number or such a string. */
export type U64 = string;
export type U64In = bigint | number | string;
export type Bytes = Buffer | string;
/** A channel: [channelId, channelType], {id, type}, or a Channel-like {channel_id, channel_type}. */
export type ChannelRef = [string, number] | { id: string; type: number } |
  { channel_id: string; channel_type: number };
export type Consistency = 'CONSISTENCY_LINEARIZABLE' | 'CONSISTENCY_LEADER_LOCAL' | 'CONSISTENCY_LOCAL';
export type MigrationStatus = 'MIGRATION_STATUS_UNSPECIFIED' | 'MIGRATION_STATUS_PENDING' |
  'MIGRATION_STATUS_RUNNING' | 'MIGRATION_STATUS_DONE' | 'MIGRATION_STATUS_FAILED';

export interface ErrorDetail {
  code: string; field: string; limit: U64; retry_after_ms: number; current_version: U64;
  leader_hint: { node_id: U64; address: string; group_id: number; term: U64 } | null;
  [k: string]: unknown;
}
/** Every call rejects with grpc-js's ServiceError plus these. */
export interface SlotdError extends grpcJs.ServiceError {
  detail: ErrorDetail | null; address: string; attempts: number;
}

export interface User { uid: string; token: string; device_flag: number; device_level: number }
export interface Device { uid: string; device_flag: number; token: string; device_level: number }
export interface ChannelFlags {
  ban?: boolean; disband?: boolean; send_ban?: boolean; allow_stranger?: boolean; large?: boolean;
}
export interface Channel {
  channel_id: string; channel_type: number; flags: ChannelFlags | null; subscriber_count: U64;
  subscriber_version: U64; event_capacity: number; event_next_seq: U64;
}
export interface Membership {
  uid: string; channel_id: string; channel_type: number; join_seq: U64; read_seq: U64;
  hide_through_seq: U64; activated_at_ms: U64; hidden: boolean; left: boolean;
}
export interface ChannelRuntimeMeta {
  leader: U64; replicas: U64[]; isr: U64[]; channel_epoch: U64; leader_epoch: U64;
  write_fence: U64; retention_through_seq: U64; lease_until_ms: U64; min_isr: number;
  status: string; features: U64;
}
export interface RuntimeMetaEntry { channel_id: string; channel_type: number; meta: ChannelRuntimeMeta }
export interface ChannelMigrationTask {
  channel_id: string; channel_type: number; task_id: U64; source_node: U64; target_node: U64;
  status: MigrationStatus; last_error: string;
}
export interface ChannelEvent {
  channel_id: string; channel_type: number; event_seq: U64; message_seq: U64; event_type: string;
  payload: Buffer;
}
export interface MembersResult { changed: number; subscriber_count: U64; subscriber_version: U64 }
export interface MembershipResult { changed: boolean; membership: Membership }
export interface DeleteUserResult {
  removed: boolean; devices: number; memberships: number; cmd_bindings: number;
  plugin_binding: boolean; system_uid: boolean; more: boolean;
}
export interface DeleteChannelResult {
  removed: boolean; subscribers: number; allowlist: number; denylist: number;
  runtime_meta: boolean; migration_tasks: number; events: number; more: boolean;
}
export interface ListOptions { limit?: number }

export interface Devices {
  put(deviceFlag: number, o?: { token?: string; deviceLevel?: number }): Promise<{ created: boolean; device: Device }>;
  get(deviceFlag: number): Promise<Device | null>;
  remove(deviceFlag: number): Promise<{ removed: boolean; device: Device | null }>;
  /** The user's devices in device flag order. */
  list(o?: ListOptions): AsyncIterable<Device>;
}
export interface Conversations {
  join(channel: ChannelRef, o: { activatedAtMs: U64In; joinSeq?: U64In }): Promise<MembershipResult>;
  leave(channel: ChannelRef): Promise<MembershipResult>;
  markRead(channel: ChannelRef, readSeq: U64In): Promise<MembershipResult>;
  hide(channel: ChannelRef, hideThroughSeq: U64In): Promise<MembershipResult>;
  activate(channel: ChannelRef, activatedAtMs: U64In): Promise<MembershipResult>;
  get(channel: ChannelRef): Promise<Membership | null>;
  /** Visible conversations, newest activation first. */
  list(o?: ListOptions): AsyncIterable<Membership>;
}
export interface Users {
  create(uid: string, o?: { token?: string; deviceFlag?: number; deviceLevel?: number }): Promise<{ changed: boolean; user: User }>;
  update(uid: string, o?: { token?: string; deviceFlag?: number; deviceLevel?: number }): Promise<{ changed: boolean; user: User }>;
  get(uid: string): Promise<User | null>;
  /** Repeated while more: every result. */
  delete(uid: string): Promise<DeleteUserResult[]>;
  devices(uid: string): Devices;
  conversations(uid: string): Conversations;
  setSystem(uid: string, system?: boolean): Promise<{ changed: boolean; system: boolean }>;
  isSystem(uid: string): Promise<boolean>;
  /** Every system uid: hash-slot order, then uid order. */
  systemUids(o?: ListOptions): AsyncIterable<string>;
}
export interface Members {
  /** At most 1000 uids, atomically; subscribers are fenced by expectedVersion (default: current). */
  add(uids: string[], o?: { expectedVersion?: U64In }): Promise<MembersResult>;
  remove(uids: string[], o?: { expectedVersion?: U64In }): Promise<MembersResult>;
  has(uid: string): Promise<boolean>;
  list(o?: ListOptions): AsyncIterable<string>;
}
export interface Events {
  append(eventType: string, o?: { messageSeq?: U64In; payload?: Buffer }): Promise<{ event_seq: U64; evicted: number }>;
  /** Events with event_seq > afterSeq, newest first. */
  list(o?: { afterSeq?: U64In; limit?: number }): AsyncIterable<ChannelEvent>;
}
export interface Channels {
  create(channel: ChannelRef, o?: { flags?: ChannelFlags; eventCapacity?: number }): Promise<{ changed: boolean; channel: Channel }>;
  get(channel: ChannelRef): Promise<Channel | null>;
  setFlags(channel: ChannelRef, flags: ChannelFlags): Promise<{ changed: boolean; channel: Channel }>;
  /** Disbands: repeated while more, every result. */
  delete(channel: ChannelRef): Promise<DeleteChannelResult[]>;
  /** Channels by id prefix and type (0: any): hash-slot order. */
  list(o?: { idPrefix?: string; channelType?: number; limit?: number }): AsyncIterable<Channel>;
  subscribers(channel: ChannelRef): Members;
  allowlist(channel: ChannelRef): Members;
  denylist(channel: ChannelRef): Members;
  events(channel: ChannelRef): Events;
  runtimeMeta(channel: ChannelRef): Promise<ChannelRuntimeMeta | null>;
  runtimeMetaLedBy(leader: U64In, o?: ListOptions): AsyncIterable<RuntimeMetaEntry>;
  migrationTasks(o?: { status?: MigrationStatus; channel?: ChannelRef; limit?: number }): AsyncIterable<ChannelMigrationTask>;
}

export interface ClientOptions {
  deadlineMs?: number; maxRetries?: number; apiDir?: string; rootCerts?: Buffer | string;
  privateKey?: Buffer | string; certChain?: Buffer | string; serverName?: string;
}
export interface WatchHandle { positions: Map<string, string>; resumes: number; cancel(): void; done: Promise<void> }
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Message = any;
export interface Client {
  users: Users;
  channels: Channels;
  put(key: Bytes, value: Bytes, o?: { requestId?: Bytes; lease?: U64In }): Promise<Message>;
  get(key: Bytes, o?: { consistency?: Consistency }): Promise<Message>;
  leaseGrant(key: Bytes, ttlSeconds: number, o?: { requestId?: Bytes }): Promise<Message>;
  leaseKeepAlive(id: U64In, o?: { requestId?: Bytes }): Promise<Message>;
  leaseRevoke(id: U64In, o?: { requestId?: Bytes }): Promise<Message>;
  rangePage(o?: { prefix?: Bytes; start?: Bytes; end?: Bytes; limit?: number; keysOnly?: boolean;
    countOnly?: boolean; cursor?: Bytes; consistency?: Consistency }): Promise<Message>;
  range(o?: { prefix?: Bytes; start?: Bytes; end?: Bytes; pageLimit?: number; keysOnly?: boolean;
    consistency?: Consistency }): AsyncIterable<Message>;
  txn(o?: { requestId?: Bytes }): Message;
  watch(o: Message, onMessage: (msg: Message) => void): WatchHandle;
  route(): Promise<Message>;
  taskStatus(taskId?: U64In, o?: { minRevision?: U64In; activeOnly?: boolean }): Promise<Message>;
  clusterState(o?: { minRevision?: U64In; knownRevision?: U64In; knownChecksum?: string }): Promise<Message>;
  admin(method: string, request: Message): Promise<Message>;
  readonly lastRevision: string;
  observeRevision(revision: U64In): string;
  close(): void;
}

export function createClient(addr: string | string[], options?: ClientOptions): Client;
export function errorDetail(err: unknown, apiDir?: string): ErrorDetail | null;
export function leaseHashSlot(id: U64In): number;
export function loadServices(apiDir: string): { Metadata: grpcJs.ServiceClientConstructor; Admin: grpcJs.ServiceClientConstructor };
export function loadMetadataService(apiDir: string): grpcJs.ServiceClientConstructor;
export const grpc: typeof grpcJs;
export const WATCH_RESUME_CODES: Set<number>;
