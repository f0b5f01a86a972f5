/* test_meta.c - CUnit tests of the typed metadata tables: round trips, invariants (monotonic,
 * fenced, bounded, idempotent), cursors, dedupe, and bad input leaving the fsm keyspace unchanged.
 */
#include <CUnit/Basic.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/rpc/status.pb-c.h"
#include "service/route/route.h"
#include "service/slot/meta.h"
#include "service/slot/slot.h"
#include "store/keys.h"

#define P(name) SLOTD__V1__PROPOSE_REQUEST__COMMAND_##name
#define Q(name) SLOTD__V1__READ_REQUEST__QUERY_##name

static struct store *st;
static struct slot_fsm *fsm;
static struct slot_group_state gs;
static uint64_t next_index;
static bool in_batch; /* entries go into one open batch (same-batch visibility tests) */

/* Group 1 owns every hash slot. */
static void setup(void)
{
    uint32_t table[256];
    CU_ASSERT_FATAL(store_open_memory(&st) == 0);
    CU_ASSERT_FATAL(slot_fsm_new(st, &fsm) == 0);
    CU_ASSERT_FATAL(route_split_ranges(1, table) == 0);
    CU_ASSERT_FATAL(slot_fsm_load_group(fsm, 1, &gs) == 0);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_group_init(1, table, &data, &len) == 0);
    slot_fsm_begin(fsm);
    CU_ASSERT(slot_fsm_apply(fsm, &gs, 1, 1, data, len, NULL) == 0);
    slot_fsm_set_applied(fsm, 1, 1);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    free(data);
    next_index = 2;
    in_batch = false;
}

static void teardown(void)
{
    slot_fsm_free(fsm);
    store_close(st);
}

/* crc32 over every row of the hash slots (group records excluded), and the row count. */
static uint64_t keyspace_digest(void)
{
    uint8_t hi[2] = {0xFF, 0xFF};
    struct store_iter *it;
    CU_ASSERT_FATAL(store_fsm_iter_new(st, NULL, 0, hi, 2, &it) == 0);
    uint32_t crc = 0;
    uint64_t n = 0;
    for (; store_iter_valid(it); store_iter_next(it)) {
        size_t kl, vl;
        const uint8_t *k = store_iter_key(it, &kl);
        const uint8_t *v = store_iter_value(it, &vl);
        crc = route_crc32(k, kl) ^ (crc * 31u);
        crc = route_crc32(v, vl) ^ (crc * 31u);
        n++;
    }
    store_iter_free(it);
    return n << 32 | crc;
}

/* Applies an encoded entry; returns the response (NULL with *err on a rejection). */
static Slotd__V1__ProposeResponse *apply_entry(uint8_t *data, size_t len, struct slotd_error *err)
{
    struct slot_result res;
    if (!in_batch)
        slot_fsm_begin(fsm);
    uint64_t index = next_index++;
    CU_ASSERT_FATAL(slot_fsm_apply(fsm, &gs, index, 3, data, len, &res) == 0);
    slot_fsm_set_applied(fsm, 1, index);
    if (!in_batch)
        CU_ASSERT_FATAL(slot_fsm_commit(fsm) == 0);
    free(data);
    *err = res.err;
    if (res.err.code != SLOTD_OK)
        return NULL;
    Slotd__V1__ProposeResponse *resp =
        slotd__v1__propose_response__unpack(NULL, res.resp_len, res.resp);
    free(res.resp);
    CU_ASSERT_FATAL(resp != NULL);
    return resp;
}

/* Validates, encodes and applies typed command `num`; NULL and *err when rejected (either by
 * validation or at apply). */
static Slotd__V1__ProposeResponse *propose(unsigned num, const ProtobufCMessage *cmd,
                                           const char *rid, struct slotd_error *err)
{
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    slot__oneof_set(&req.base, num, cmd);
    if (rid != NULL) {
        req.request_id.data = (uint8_t *)rid;
        req.request_id.len = strlen(rid);
    }
    const ProtobufCBinaryData *key;
    if (slot_validate_propose(&req, &key, err) != 0)
        return NULL;
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_command(&req, route_hash_slot(key->data, key->len), &data, &len) ==
                    0);
    return apply_entry(data, len, err);
}

/* Applies a typed command WITHOUT validating it first (a bad entry in the log). */
static Slotd__V1__ProposeResponse *apply_unvalidated(unsigned num, const ProtobufCMessage *cmd,
                                                     uint16_t hs, struct slotd_error *err)
{
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    slot__oneof_set(&req.base, num, cmd);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_command(&req, hs, &data, &len) == 0);
    return apply_entry(data, len, err);
}

/* Proposes, expects success, returns the typed result (the response in *keep: free it). */
static const void *ok(unsigned num, const ProtobufCMessage *cmd, Slotd__V1__ProposeResponse **keep)
{
    struct slotd_error err;
    *keep = propose(num, cmd, NULL, &err);
    CU_ASSERT_FATAL(*keep != NULL);
    if (*keep == NULL)
        return NULL;
    const void *r = slot__oneof_get(&(*keep)->base, num);
    CU_ASSERT_FATAL(r != NULL);
    return r;
}

/* Proposes, expects a rejection with code (and field when non-NULL), and no change. */
static void rejected(unsigned num, const ProtobufCMessage *cmd, int code, const char *field,
                     struct slotd_error *out)
{
    struct slotd_error err;
    uint64_t before = keyspace_digest();
    Slotd__V1__ProposeResponse *r = propose(num, cmd, NULL, &err);
    CU_ASSERT(r == NULL);
    if (r != NULL)
        slotd__v1__propose_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(err.code, code);
    if (field != NULL)
        CU_ASSERT_STRING_EQUAL(err.field, field);
    CU_ASSERT(keyspace_digest() == before);
    if (out != NULL)
        *out = err;
}

#define FREE_RESP(r) slotd__v1__propose_response__free_unpacked((r), NULL)

/* Serves typed query `num` at its routing key's hash slot for a group owning `owned` (NULL:
 * that hash slot alone); returns the response (caller frees) or NULL with *err. */
static Slotd__V1__ReadResponse *query_owned(unsigned num, const ProtobufCMessage *q,
                                            const uint8_t *owned, struct slotd_error *err)
{
    Slotd__V1__ReadRequest req = SLOTD__V1__READ_REQUEST__INIT;
    slot__oneof_set(&req.base, num, q);
    const ProtobufCBinaryData *key;
    if (slot_validate_read(&req, &key, err) != 0)
        return NULL;
    uint16_t hs = route_hash_slot(key->data, key->len);
    size_t len = slotd__v1__read_request__get_packed_size(&req);
    uint8_t *buf = malloc(len ? len : 1);
    slotd__v1__read_request__pack(&req, buf);
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = slot_serve_read(st, owned, hs, buf, len, 1, next_index - 1, 3, &out, &out_len, err);
    free(buf);
    if (rc != 0)
        return NULL;
    Slotd__V1__ReadResponse *resp = slotd__v1__read_response__unpack(NULL, out_len, out);
    free(out);
    CU_ASSERT_FATAL(resp != NULL);
    return resp;
}

static Slotd__V1__ReadResponse *query(unsigned num, const ProtobufCMessage *q,
                                      struct slotd_error *err)
{
    return query_owned(num, q, NULL, err);
}

static const void *qok(unsigned num, const ProtobufCMessage *q, Slotd__V1__ReadResponse **keep)
{
    struct slotd_error err;
    *keep = query(num, q, &err);
    CU_ASSERT_FATAL(*keep != NULL);
    const void *r = slot__oneof_get(&(*keep)->base, num);
    CU_ASSERT_FATAL(r != NULL);
    return r;
}

#define FREE_READ(r) slotd__v1__read_response__free_unpacked((r), NULL)

/* ---- users, devices, system uids ---- */

static void test_users(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    struct slotd_error err;
    Slotd__V1__User u = SLOTD__V1__USER__INIT;
    u.uid = "u1";
    u.token = "tok-1";
    u.device_flag = 1;
    u.device_level = 2;
    Slotd__V1__CreateUserCommand cu = SLOTD__V1__CREATE_USER_COMMAND__INIT;
    cu.user = &u;
    const Slotd__V1__UserResult *ur = ok(P(CREATE_USER), &cu.base, &r);
    CU_ASSERT(ur->changed && strcmp(ur->user->token, "tok-1") == 0);
    FREE_RESP(r);
    /* Idempotent create: the second one changes nothing and returns the stored user. */
    Slotd__V1__User u2 = u;
    u2.token = "other";
    cu.user = &u2;
    uint64_t before = keyspace_digest();
    ur = ok(P(CREATE_USER), &cu.base, &r);
    CU_ASSERT(!ur->changed && strcmp(ur->user->token, "tok-1") == 0);
    CU_ASSERT(keyspace_digest() == before);
    FREE_RESP(r);
    /* Round trip through the store. */
    Slotd__V1__GetUserQuery gq = SLOTD__V1__GET_USER_QUERY__INIT;
    gq.uid = "u1";
    const Slotd__V1__GetUserResult *gr = qok(Q(GET_USER), &gq.base, &rr);
    CU_ASSERT(gr->found && strcmp(gr->user->uid, "u1") == 0 &&
              strcmp(gr->user->token, "tok-1") == 0 && gr->user->device_flag == 1 &&
              gr->user->device_level == 2);
    FREE_READ(rr);
    /* Update: changes; a repeat does not; an absent user is NOT_FOUND and changes nothing. */
    Slotd__V1__UpdateUserCommand uu = SLOTD__V1__UPDATE_USER_COMMAND__INIT;
    uu.user = &u2;
    ur = ok(P(UPDATE_USER), &uu.base, &r);
    CU_ASSERT(ur->changed);
    FREE_RESP(r);
    ur = ok(P(UPDATE_USER), &uu.base, &r);
    CU_ASSERT(!ur->changed);
    FREE_RESP(r);
    Slotd__V1__User ghost = u;
    ghost.uid = "ghost";
    uu.user = &ghost;
    rejected(P(UPDATE_USER), &uu.base, SLOTD_ENOT_FOUND, NULL, NULL);
    /* Bad input: named field and limit, nothing stored. */
    Slotd__V1__User bad = u;
    bad.device_level = 256;
    cu.user = &bad;
    rejected(P(CREATE_USER), &cu.base, SLOTD_EINVALID_FIELD, "create_user.user.device_level", &err);
    CU_ASSERT(err.limit == 255);
    bad = u;
    bad.uid = "";
    rejected(P(CREATE_USER), &cu.base, SLOTD_EINVALID_FIELD, "create_user.user.uid", NULL);
    char long_uid[80];
    memset(long_uid, 'x', 65);
    long_uid[65] = '\0';
    bad.uid = long_uid;
    rejected(P(CREATE_USER), &cu.base, SLOTD_EINVALID_FIELD, "create_user.user.uid", &err);
    CU_ASSERT(err.limit == SLOT_UID_MAX);
    cu.user = NULL;
    rejected(P(CREATE_USER), &cu.base, SLOTD_EINVALID_FIELD, "create_user.user", NULL);
    /* The same bad command straight from the log is rejected at apply too. */
    cu.user = &bad;
    before = keyspace_digest();
    CU_ASSERT(apply_unvalidated(P(CREATE_USER), &cu.base, 7, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && keyspace_digest() == before);

    teardown();
}

static void test_devices_system_uids(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    Slotd__V1__Device d = SLOTD__V1__DEVICE__INIT;
    d.uid = "u1";
    d.device_flag = 0;
    d.token = "app";
    d.device_level = 1;
    Slotd__V1__PutDeviceCommand pd = SLOTD__V1__PUT_DEVICE_COMMAND__INIT;
    pd.device = &d;
    const Slotd__V1__DeviceResult *dr = ok(P(PUT_DEVICE), &pd.base, &r);
    CU_ASSERT(dr->created);
    FREE_RESP(r);
    d.token = "app-2";
    dr = ok(P(PUT_DEVICE), &pd.base, &r);
    CU_ASSERT(!dr->created);
    FREE_RESP(r);
    Slotd__V1__GetDeviceQuery gd = SLOTD__V1__GET_DEVICE_QUERY__INIT;
    gd.uid = "u1";
    const Slotd__V1__GetDeviceResult *gdr = qok(Q(GET_DEVICE), &gd.base, &rr);
    CU_ASSERT(gdr->found && strcmp(gdr->device->token, "app-2") == 0);
    FREE_READ(rr);
    gd.device_flag = 1;
    gdr = qok(Q(GET_DEVICE), &gd.base, &rr);
    CU_ASSERT(!gdr->found);
    FREE_READ(rr);
    Slotd__V1__RemoveDeviceCommand rd = SLOTD__V1__REMOVE_DEVICE_COMMAND__INIT;
    rd.uid = "u1";
    const Slotd__V1__RemoveResult *rm = ok(P(REMOVE_DEVICE), &rd.base, &r);
    CU_ASSERT(rm->removed);
    FREE_RESP(r);
    rm = ok(P(REMOVE_DEVICE), &rd.base, &r);
    CU_ASSERT(!rm->removed);
    FREE_RESP(r);
    rd.device_flag = 300;
    rejected(P(REMOVE_DEVICE), &rd.base, SLOTD_EINVALID_FIELD, "remove_device.device_flag", NULL);

    /* System uids. */
    Slotd__V1__SetSystemUidCommand ss = SLOTD__V1__SET_SYSTEM_UID_COMMAND__INIT;
    ss.uid = "sys";
    ss.system = true;
    const Slotd__V1__SystemUidResult *sr = ok(P(SET_SYSTEM_UID), &ss.base, &r);
    CU_ASSERT(sr->changed && sr->system);
    FREE_RESP(r);
    sr = ok(P(SET_SYSTEM_UID), &ss.base, &r);
    CU_ASSERT(!sr->changed);
    FREE_RESP(r);
    Slotd__V1__IsSystemUidQuery iq = SLOTD__V1__IS_SYSTEM_UID_QUERY__INIT;
    iq.uid = "sys";
    const Slotd__V1__IsSystemUidResult *ir = qok(Q(IS_SYSTEM_UID), &iq.base, &rr);
    CU_ASSERT(ir->system);
    FREE_READ(rr);
    ss.system = false;
    sr = ok(P(SET_SYSTEM_UID), &ss.base, &r);
    CU_ASSERT(sr->changed && !sr->system);
    FREE_RESP(r);
    ir = qok(Q(IS_SYSTEM_UID), &iq.base, &rr);
    CU_ASSERT(!ir->system);
    FREE_READ(rr);
    teardown();
}

/* ---- channels, subscribers, lists ---- */

static void create_channel(const char *id, uint32_t capacity)
{
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
    cc.channel_id = (char *)id;
    cc.channel_type = 2;
    cc.event_capacity = capacity;
    const Slotd__V1__ChannelResult *cr = ok(P(CREATE_CHANNEL), &cc.base, &r);
    CU_ASSERT(cr->changed);
    FREE_RESP(r);
}

static const Slotd__V1__MembersResult *subs(unsigned num, const char *ch, uint64_t expected,
                                            size_t n, char **uids, Slotd__V1__ProposeResponse **r)
{
    Slotd__V1__SubscribersCommand sc = SLOTD__V1__SUBSCRIBERS_COMMAND__INIT;
    sc.channel_id = (char *)ch;
    sc.channel_type = 2;
    sc.expected_version = expected;
    sc.n_uids = n;
    sc.uids = uids;
    return ok(num, &sc.base, r);
}

static void test_channels(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    struct slotd_error err;
    create_channel("g1", 0);
    Slotd__V1__ChannelFlags fl = SLOTD__V1__CHANNEL_FLAGS__INIT;
    fl.ban = true;
    fl.large = true;
    Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
    cc.channel_id = "g1";
    cc.channel_type = 2;
    cc.flags = &fl;
    const Slotd__V1__ChannelResult *cr = ok(P(CREATE_CHANNEL), &cc.base, &r);
    CU_ASSERT(!cr->changed && cr->channel->channel_type == 2 && !cr->channel->flags->ban);
    FREE_RESP(r);        /* idempotent */
    cc.channel_type = 3; /* (id, type) is the key: the same id with another type is another row */
    cr = ok(P(CREATE_CHANNEL), &cc.base, &r);
    CU_ASSERT(cr->changed && cr->channel->channel_type == 3 && cr->channel->flags->ban);
    FREE_RESP(r);
    Slotd__V1__UpdateChannelFlagsCommand uf = SLOTD__V1__UPDATE_CHANNEL_FLAGS_COMMAND__INIT;
    uf.channel_id = "g1";
    uf.channel_type = 2;
    uf.flags = &fl;
    cr = ok(P(UPDATE_CHANNEL_FLAGS), &uf.base, &r);
    CU_ASSERT(cr->changed);
    FREE_RESP(r);
    cr = ok(P(UPDATE_CHANNEL_FLAGS), &uf.base, &r);
    CU_ASSERT(!cr->changed);
    FREE_RESP(r);
    Slotd__V1__GetChannelQuery gq = SLOTD__V1__GET_CHANNEL_QUERY__INIT;
    gq.channel_id = "g1";
    gq.channel_type = 2;
    const Slotd__V1__GetChannelResult *gr = qok(Q(GET_CHANNEL), &gq.base, &rr);
    CU_ASSERT(gr->found && gr->channel->channel_type == 2 && gr->channel->flags->ban &&
              gr->channel->flags->large && !gr->channel->flags->disband &&
              gr->channel->event_capacity == SLOT_EVENT_CAPACITY_DEFAULT &&
              gr->channel->subscriber_count == 0 && gr->channel->subscriber_version == 0);
    FREE_READ(rr);
    uf.channel_id = "nope";
    uf.channel_type = 2;
    rejected(P(UPDATE_CHANNEL_FLAGS), &uf.base, SLOTD_ENOT_FOUND, NULL, NULL);
    cc.channel_id = "g2";
    cc.channel_type = 0;
    rejected(P(CREATE_CHANNEL), &cc.base, SLOTD_EINVALID_FIELD, "create_channel.channel_type",
             NULL);
    cc.channel_type = 1;
    cc.event_capacity = 1001;
    rejected(P(CREATE_CHANNEL), &cc.base, SLOTD_EINVALID_FIELD, "create_channel.event_capacity",
             &err);
    CU_ASSERT(err.limit == 1000);

    teardown();
}

/* Subscribers: fenced, counted exactly, bounded batches, paged listing, membership test. */
static void test_subscribers(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    struct slotd_error err;
    create_channel("g1", 0);
    char *three[] = {"a", "b", "c"};
    const Slotd__V1__MembersResult *mr = subs(P(ADD_SUBSCRIBERS), "g1", 0, 3, three, &r);
    CU_ASSERT(mr->changed == 3 && mr->subscriber_count == 3 && mr->subscriber_version == 1);
    FREE_RESP(r);
    Slotd__V1__SubscribersCommand sc = SLOTD__V1__SUBSCRIBERS_COMMAND__INIT;
    sc.channel_id = "g1";
    sc.channel_type = 2;
    sc.expected_version = 0; /* stale */
    sc.n_uids = 3;
    sc.uids = three;
    rejected(P(ADD_SUBSCRIBERS), &sc.base, SLOTD_ESTALE_FENCE, NULL, &err);
    CU_ASSERT(err.has_current_version && err.current_version == 1);
    CU_ASSERT(slotd_error_grpc_code(err.code) == GRPC_STATUS_ABORTED);
    /* Present uids and in-batch repeats are not counted twice. */
    char *mixed[] = {"a", "d", "d", "e"};
    mr = subs(P(ADD_SUBSCRIBERS), "g1", 1, 4, mixed, &r);
    CU_ASSERT(mr->changed == 2 && mr->subscriber_count == 5 && mr->subscriber_version == 2);
    FREE_RESP(r);
    char *gone[] = {"zz", "b"};
    mr = subs(P(REMOVE_SUBSCRIBERS), "g1", 2, 2, gone, &r);
    CU_ASSERT(mr->changed == 1 && mr->subscriber_count == 4 && mr->subscriber_version == 3);
    FREE_RESP(r);
    char *absent[] = {"zz"};
    mr = subs(P(REMOVE_SUBSCRIBERS), "g1", 3, 1, absent, &r);
    CU_ASSERT(mr->changed == 0 && mr->subscriber_count == 4 && mr->subscriber_version == 3);
    FREE_RESP(r);
    /* Batch bound: 1001 uids. */
    char **many = calloc(1001, sizeof(char *));
    char(*names)[16] = calloc(1001, 16);
    for (int i = 0; i < 1001; i++) {
        sprintf(names[i], "m%d", i);
        many[i] = names[i];
    }
    sc.expected_version = 3;
    sc.n_uids = 1001;
    sc.uids = many;
    rejected(P(ADD_SUBSCRIBERS), &sc.base, SLOTD_EINVALID_FIELD, "add_subscribers.uids", &err);
    CU_ASSERT(err.limit == 1000);
    CU_ASSERT(strstr(err.message, "1001 entries") != NULL);
    sc.n_uids = 0;
    rejected(P(ADD_SUBSCRIBERS), &sc.base, SLOTD_EINVALID_FIELD, "add_subscribers.uids", NULL);
    /* 1000 is fine; then page through 1004 subscribers in pages of 300. */
    mr = subs(P(ADD_SUBSCRIBERS), "g1", 3, 1000, many, &r);
    CU_ASSERT(mr->changed == 1000 && mr->subscriber_count == 1004);
    FREE_RESP(r);
    Slotd__V1__ListMembersQuery lq = SLOTD__V1__LIST_MEMBERS_QUERY__INIT;
    lq.channel_id = "g1";
    lq.channel_type = 2;
    lq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS;
    lq.limit = 300;
    size_t total = 0, pages = 0;
    char last[80] = "";
    uint8_t cursor[2048];
    for (;;) {
        const Slotd__V1__ListMembersResult *lr = qok(Q(LIST_MEMBERS), &lq.base, &rr);
        for (size_t i = 0; i < lr->n_uids; i++) {
            CU_ASSERT(strcmp(last, lr->uids[i]) < 0); /* strictly ordered, no repeats */
            snprintf(last, sizeof(last), "%s", lr->uids[i]);
        }
        total += lr->n_uids;
        pages++;
        bool more = lr->next_cursor.len > 0;
        CU_ASSERT_FATAL(lr->next_cursor.len <= sizeof(cursor));
        if (lr->next_cursor.len > 0)
            memcpy(cursor, lr->next_cursor.data, lr->next_cursor.len);
        lq.cursor.data = cursor;
        lq.cursor.len = lr->next_cursor.len;
        FREE_READ(rr);
        if (!more || pages > 10)
            break;
    }
    CU_ASSERT(total == 1004 && pages == 4);
    free(many);
    free(names);
    /* Membership test. */
    Slotd__V1__CheckMemberQuery cq = SLOTD__V1__CHECK_MEMBER_QUERY__INIT;
    cq.channel_id = "g1";
    cq.channel_type = 2;
    cq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS;
    cq.uid = "d";
    const Slotd__V1__CheckMemberResult *ck = qok(Q(CHECK_MEMBER), &cq.base, &rr);
    CU_ASSERT(ck->member);
    FREE_READ(rr);
    cq.uid = "b";
    ck = qok(Q(CHECK_MEMBER), &cq.base, &rr);
    CU_ASSERT(!ck->member);
    FREE_READ(rr);
    teardown();
}

/* Allowlist and denylist: separate lists, no fence, subscriber count untouched. */
/* Counts the events taken from the fsm: rows of table, puts and deletes; frees them. */
static void take_events(uint8_t table, int *puts, int *dels)
{
    *puts = *dels = 0;
    struct slot_event *list = slot_fsm_take_events(fsm);
    for (struct slot_event *e = list; e != NULL; e = e->next)
        if (e->table == table)
            (*(e->deleted ? dels : puts))++;
    slot_events_free(list);
}

/* With events on, typed rows are recorded: a subscriber added or removed once each (a uid
 * already there or never there makes no event), the channel row with its new count. */
static void test_typed_events(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    slot_fsm_set_events(fsm, true);
    create_channel("g1", 0);
    int puts, dels;
    take_events(SLOT_TABLE_CHANNEL, &puts, &dels);
    CU_ASSERT(puts == 1 && dels == 0);
    char *two[] = {"a", "b"};
    (void)subs(P(ADD_SUBSCRIBERS), "g1", 0, 2, two, &r);
    FREE_RESP(r);
    struct slot_event *list = slot_fsm_take_events(fsm);
    int members = 0, channel = 0;
    for (struct slot_event *e = list; e != NULL; e = e->next) {
        if (e->table == SLOT_TABLE_CHANNEL_MEMBER) {
            members++;
            CU_ASSERT(
                slot_typed_watch_match(SLOTD__V1__TYPED_WATCH_KIND__TYPED_WATCH_KIND_SUBSCRIBERS,
                                       (const uint8_t *)"g1", 2, e->table, e->key, e->key_len));
            CU_ASSERT(e->value_len == 0 && !e->deleted);
        } else if (e->table == SLOT_TABLE_CHANNEL) {
            channel++;
            Slotd__V1__Channel *c = slotd__v1__channel__unpack(NULL, e->value_len, e->value);
            CU_ASSERT(c != NULL && c->subscriber_count == 2);
            slotd__v1__channel__free_unpacked(c, NULL);
        }
    }
    slot_events_free(list);
    CU_ASSERT(members == 2 && channel == 1);
    char *again[] = {"a", "zz"};
    subs(P(REMOVE_SUBSCRIBERS), "g1", 1, 2, again, &r);
    FREE_RESP(r);
    take_events(SLOT_TABLE_CHANNEL_MEMBER, &puts, &dels);
    CU_ASSERT(puts == 0 && dels == 1); /* zz was never a member */
    slot_fsm_set_events(fsm, false);
    teardown();
}

static void test_allow_deny_lists(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    create_channel("g1", 0);
    char *three[] = {"a", "b", "c"}, *one[] = {"s"};
    const Slotd__V1__MembersResult *mr = subs(P(ADD_SUBSCRIBERS), "g1", 0, 1, one, &r);
    FREE_RESP(r);
    Slotd__V1__ChannelListCommand al = SLOTD__V1__CHANNEL_LIST_COMMAND__INIT;
    al.channel_id = "g1";
    al.channel_type = 2;
    al.n_uids = 2;
    al.uids = three;
    mr = ok(P(ADD_ALLOWLIST), &al.base, &r);
    CU_ASSERT(mr->changed == 2 && mr->subscriber_count == 1 && mr->subscriber_version == 1);
    FREE_RESP(r);
    mr = ok(P(ADD_DENYLIST), &al.base, &r);
    CU_ASSERT(mr->changed == 2);
    FREE_RESP(r);
    al.n_uids = 1;
    mr = ok(P(REMOVE_DENYLIST), &al.base, &r);
    CU_ASSERT(mr->changed == 1);
    FREE_RESP(r);
    mr = ok(P(REMOVE_ALLOWLIST), &al.base, &r);
    CU_ASSERT(mr->changed == 1);
    FREE_RESP(r);
    Slotd__V1__CheckMemberQuery cq = SLOTD__V1__CHECK_MEMBER_QUERY__INIT;
    cq.channel_id = "g1";
    cq.channel_type = 2;
    cq.uid = "b";
    cq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_DENYLIST;
    const Slotd__V1__CheckMemberResult *ck = qok(Q(CHECK_MEMBER), &cq.base, &rr); /* still denied */
    CU_ASSERT(ck->member);
    FREE_READ(rr);
    cq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_ALLOWLIST;
    ck = qok(Q(CHECK_MEMBER), &cq.base, &rr);
    CU_ASSERT(ck->member);
    FREE_READ(rr);
    cq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS;
    ck = qok(Q(CHECK_MEMBER), &cq.base, &rr);
    CU_ASSERT(!ck->member);
    FREE_READ(rr);
    Slotd__V1__ListMembersQuery lq = SLOTD__V1__LIST_MEMBERS_QUERY__INIT;
    lq.channel_id = "g1";
    lq.channel_type = 2;
    lq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_ALLOWLIST;
    const Slotd__V1__ListMembersResult *lr = qok(Q(LIST_MEMBERS), &lq.base, &rr);
    CU_ASSERT(lr->n_uids == 1 && strcmp(lr->uids[0], "b") == 0 && lr->next_cursor.len == 0);
    FREE_READ(rr);
    al.channel_id = "nope";
    al.channel_type = 2;
    rejected(P(ADD_ALLOWLIST), &al.base, SLOTD_ENOT_FOUND, NULL, NULL);
    teardown();
}

/* Cursors, page sizes and enums are validated; a forged but well-formed cursor is a position. */
static void test_cursors(void)
{
    setup();
    Slotd__V1__ReadResponse *rr;
    struct slotd_error err;
    create_channel("c", 0);
    Slotd__V1__ListMembersQuery lq = SLOTD__V1__LIST_MEMBERS_QUERY__INIT;
    lq.channel_id = "c";
    lq.channel_type = 2;
    lq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS;
    uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7};
    lq.cursor.data = junk;
    lq.cursor.len = sizeof(junk);
    CU_ASSERT(query(Q(LIST_MEMBERS), &lq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "list_members.cursor") == 0);
    uint8_t forged[9] = {1, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF};
    store_put_u32(forged + 1, route_crc32(forged + 5, 4));
    lq.cursor.data = forged;
    lq.cursor.len = sizeof(forged);
    const Slotd__V1__ListMembersResult *lr = qok(Q(LIST_MEMBERS), &lq.base, &rr);
    CU_ASSERT(lr->n_uids == 0);
    FREE_READ(rr);
    lq.cursor.len = 0;
    lq.limit = 1001;
    CU_ASSERT(query(Q(LIST_MEMBERS), &lq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "list_members.limit") == 0 &&
              err.limit == 1000);
    lq.limit = 0;
    lq.list = (Slotd__V1__MemberList)7;
    CU_ASSERT(query(Q(LIST_MEMBERS), &lq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "list_members.list") == 0);
    lq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_UNSPECIFIED;
    CU_ASSERT(query(Q(LIST_MEMBERS), &lq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD);
    /* Every hash slot has a routing key for list_plugin_users. */
    for (uint16_t hs = 0; hs < 256; hs++) {
        char kb[32];
        slot__hash_slot_key(hs, kb);
        CU_ASSERT(kb[0] != '\0' && route_hash_slot(kb, strlen(kb)) == hs);
    }
    Slotd__V1__ListPluginUsersQuery pq = SLOTD__V1__LIST_PLUGIN_USERS_QUERY__INIT;
    pq.hash_slot = 256;
    pq.plugin_no = "p";
    CU_ASSERT(query(Q(LIST_PLUGIN_USERS), &pq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_plugin_users.hash_slot") == 0 && err.limit == 255);
    teardown();
}

/* ---- memberships (conversations) ---- */

static const Slotd__V1__MembershipResult *member_cmd(unsigned num, const char *uid, const char *ch,
                                                     uint64_t v, Slotd__V1__ProposeResponse **r)
{
    Slotd__V1__JoinChannelCommand j = SLOTD__V1__JOIN_CHANNEL_COMMAND__INIT;
    Slotd__V1__MarkReadCommand mr = SLOTD__V1__MARK_READ_COMMAND__INIT;
    Slotd__V1__HideConversationCommand h = SLOTD__V1__HIDE_CONVERSATION_COMMAND__INIT;
    Slotd__V1__ActivateConversationCommand a = SLOTD__V1__ACTIVATE_CONVERSATION_COMMAND__INIT;
    Slotd__V1__LeaveChannelCommand l = SLOTD__V1__LEAVE_CHANNEL_COMMAND__INIT;
    switch (num) {
    case P(JOIN_CHANNEL):
        j.uid = (char *)uid, j.channel_id = (char *)ch, j.channel_type = 2, j.join_seq = 1,
        j.activated_at_ms = v;
        return ok(num, &j.base, r);
    case P(MARK_READ):
        mr.uid = (char *)uid, mr.channel_id = (char *)ch, mr.channel_type = 2, mr.read_seq = v;
        return ok(num, &mr.base, r);
    case P(HIDE_CONVERSATION):
        h.uid = (char *)uid, h.channel_id = (char *)ch, h.channel_type = 2, h.hide_through_seq = v;
        return ok(num, &h.base, r);
    case P(ACTIVATE_CONVERSATION):
        a.uid = (char *)uid, a.channel_id = (char *)ch, a.channel_type = 2, a.activated_at_ms = v;
        return ok(num, &a.base, r);
    default:
        l.uid = (char *)uid, l.channel_id = (char *)ch, l.channel_type = 2;
        return ok(num, &l.base, r);
    }
}

/* Lists uid's conversations in pages of `limit` into out (channel ids); returns the count. */
static size_t conversations(const char *uid, uint32_t limit, char out[][16], size_t max)
{
    Slotd__V1__ListConversationsQuery q = SLOTD__V1__LIST_CONVERSATIONS_QUERY__INIT;
    q.uid = (char *)uid;
    q.limit = limit;
    uint8_t cursor[2048];
    size_t n = 0;
    for (int page = 0; page < 50; page++) {
        Slotd__V1__ReadResponse *rr;
        const Slotd__V1__ListConversationsResult *r = qok(Q(LIST_CONVERSATIONS), &q.base, &rr);
        CU_ASSERT(r->n_conversations <= limit);
        for (size_t i = 0; i < r->n_conversations && n < max; i++)
            snprintf(out[n++], 16, "%s", r->conversations[i]->channel_id);
        bool more = r->next_cursor.len > 0;
        if (r->next_cursor.len > 0)
            memcpy(cursor, r->next_cursor.data, r->next_cursor.len);
        q.cursor.data = cursor;
        q.cursor.len = r->next_cursor.len;
        FREE_READ(rr);
        if (!more)
            break;
    }
    return n;
}

static void test_memberships(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    const Slotd__V1__MembershipResult *m;
    char got[16][16];
    /* Five conversations activated at 100..500: listed newest first across pages of 2. */
    const char *chs[] = {"c1", "c2", "c3", "c4", "c5"};
    for (int i = 0; i < 5; i++) {
        m = member_cmd(P(JOIN_CHANNEL), "alice", chs[i], 100 * (uint64_t)(i + 1), &r);
        CU_ASSERT(m->changed);
        FREE_RESP(r);
    }
    m = member_cmd(P(JOIN_CHANNEL), "alice", "c1", 999, &r); /* idempotent */
    CU_ASSERT(!m->changed && m->membership->activated_at_ms == 100);
    FREE_RESP(r);
    CU_ASSERT(conversations("alice", 2, got, 16) == 5);
    CU_ASSERT(strcmp(got[0], "c5") == 0 && strcmp(got[4], "c1") == 0);
    /* Read sequence only moves forward. */
    m = member_cmd(P(MARK_READ), "alice", "c2", 10, &r);
    CU_ASSERT(m->changed && m->membership->read_seq == 10);
    FREE_RESP(r);
    uint64_t before = keyspace_digest();
    m = member_cmd(P(MARK_READ), "alice", "c2", 5, &r);
    CU_ASSERT(!m->changed && m->membership->read_seq == 10);
    CU_ASSERT(keyspace_digest() == before);
    FREE_RESP(r);
    /* Hide: unlisted; hide-through only moves forward. */
    m = member_cmd(P(HIDE_CONVERSATION), "alice", "c5", 20, &r);
    CU_ASSERT(m->changed && m->membership->hidden && m->membership->hide_through_seq == 20);
    FREE_RESP(r);
    m = member_cmd(P(HIDE_CONVERSATION), "alice", "c5", 15, &r);
    CU_ASSERT(!m->changed && m->membership->hide_through_seq == 20);
    FREE_RESP(r);
    CU_ASSERT(conversations("alice", 100, got, 16) == 4);
    CU_ASSERT(strcmp(got[0], "c4") == 0);
    /* Re-activation moves the entry: c1 becomes the newest, c5 comes back at 600. */
    m = member_cmd(P(ACTIVATE_CONVERSATION), "alice", "c1", 700, &r);
    CU_ASSERT(m->changed && m->membership->activated_at_ms == 700);
    FREE_RESP(r);
    m = member_cmd(P(ACTIVATE_CONVERSATION), "alice", "c5", 600, &r);
    CU_ASSERT(m->changed && !m->membership->hidden && m->membership->activated_at_ms == 600);
    FREE_RESP(r);
    m = member_cmd(P(ACTIVATE_CONVERSATION), "alice", "c1", 650, &r); /* regression */
    CU_ASSERT(!m->changed && m->membership->activated_at_ms == 700);
    FREE_RESP(r);
    CU_ASSERT(conversations("alice", 1, got, 16) == 5);
    CU_ASSERT(strcmp(got[0], "c1") == 0 && strcmp(got[1], "c5") == 0 && strcmp(got[2], "c4") == 0 &&
              strcmp(got[4], "c2") == 0);
    /* Leave: a tombstone, unlisted; commands on it are NOT_FOUND and change nothing. */
    m = member_cmd(P(LEAVE_CHANNEL), "alice", "c4", 0, &r);
    CU_ASSERT(m->changed && m->membership->left);
    FREE_RESP(r);
    m = member_cmd(P(LEAVE_CHANNEL), "alice", "c4", 0, &r);
    CU_ASSERT(!m->changed);
    FREE_RESP(r);
    CU_ASSERT(conversations("alice", 100, got, 16) == 4);
    Slotd__V1__MarkReadCommand mr = SLOTD__V1__MARK_READ_COMMAND__INIT;
    mr.uid = "alice";
    mr.channel_id = "c4";
    mr.channel_type = 2;
    mr.read_seq = 50;
    rejected(P(MARK_READ), &mr.base, SLOTD_ENOT_FOUND, NULL, NULL);
    Slotd__V1__GetMembershipQuery gq = SLOTD__V1__GET_MEMBERSHIP_QUERY__INIT;
    gq.uid = "alice";
    gq.channel_id = "c4";
    gq.channel_type = 2;
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__GetMembershipResult *gr = qok(Q(GET_MEMBERSHIP), &gq.base, &rr);
    CU_ASSERT(gr->found && gr->membership->left && gr->membership->activated_at_ms == 400);
    FREE_READ(rr);
    /* Re-join keeps the read floor and lists again. */
    m = member_cmd(P(JOIN_CHANNEL), "alice", "c2", 800, &r);
    CU_ASSERT(!m->changed); /* c2 is live: idempotent */
    FREE_RESP(r);
    m = member_cmd(P(JOIN_CHANNEL), "alice", "c4", 900, &r);
    CU_ASSERT(m->changed && !m->membership->left && m->membership->activated_at_ms == 900);
    FREE_RESP(r);
    CU_ASSERT(conversations("alice", 3, got, 16) == 5 && strcmp(got[0], "c4") == 0);
    /* Another user's conversations are separate. */
    CU_ASSERT(conversations("bob", 10, got, 16) == 0);
    Slotd__V1__JoinChannelCommand j = SLOTD__V1__JOIN_CHANNEL_COMMAND__INIT;
    j.uid = "bob";
    j.channel_id = "c1";
    j.channel_type = 2;
    rejected(P(JOIN_CHANNEL), &j.base, SLOTD_EINVALID_FIELD, "join_channel.activated_at_ms", NULL);
    teardown();
}

/* Later entries of one batch see earlier ones (the fsm overlay). */
static void test_same_batch(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    create_channel("b", 0);
    in_batch = true;
    slot_fsm_begin(fsm);
    char *one[] = {"x"}, *two[] = {"x", "y"};
    const Slotd__V1__MembersResult *mr = subs(P(ADD_SUBSCRIBERS), "b", 0, 1, one, &r);
    CU_ASSERT(mr->changed == 1 && mr->subscriber_version == 1);
    FREE_RESP(r);
    mr = subs(P(ADD_SUBSCRIBERS), "b", 1, 2, two, &r);
    CU_ASSERT(mr->changed == 1 && mr->subscriber_count == 2 && mr->subscriber_version == 2);
    FREE_RESP(r);
    member_cmd(P(JOIN_CHANNEL), "u", "b", 10, &r);
    FREE_RESP(r);
    member_cmd(P(ACTIVATE_CONVERSATION), "u", "b", 20, &r);
    FREE_RESP(r);
    CU_ASSERT(slot_fsm_commit(fsm) == 0);
    in_batch = false;
    char got[4][16];
    CU_ASSERT(conversations("u", 10, got, 4) == 1); /* the moved entry is not listed twice */
    teardown();
}

/* ---- CMD bindings ---- */

static void test_cmd_bindings(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__BindCmdCommand b = SLOTD__V1__BIND_CMD_COMMAND__INIT;
    b.uid = "u";
    b.channel_id = "cmd";
    b.channel_type = 2;
    b.start_seq = 5;
    const Slotd__V1__CmdBindingResult *cr = ok(P(BIND_CMD), &b.base, &r);
    CU_ASSERT(cr->changed && cr->binding->start_seq == 5);
    FREE_RESP(r);
    b.start_seq = 9;
    cr = ok(P(BIND_CMD), &b.base, &r);
    CU_ASSERT(!cr->changed && cr->binding->start_seq == 5);
    FREE_RESP(r);
    Slotd__V1__AckCmdCommand a = SLOTD__V1__ACK_CMD_COMMAND__INIT;
    a.uid = "u";
    a.channel_id = "cmd";
    a.channel_type = 2;
    a.ack_seq = 7;
    cr = ok(P(ACK_CMD), &a.base, &r);
    CU_ASSERT(cr->changed && cr->binding->ack_seq == 7);
    FREE_RESP(r);
    a.ack_seq = 6;
    cr = ok(P(ACK_CMD), &a.base, &r);
    CU_ASSERT(!cr->changed && cr->binding->ack_seq == 7);
    FREE_RESP(r);
    Slotd__V1__UnbindCmdCommand u = SLOTD__V1__UNBIND_CMD_COMMAND__INIT;
    u.uid = "u";
    u.channel_id = "cmd";
    u.channel_type = 2;
    cr = ok(P(UNBIND_CMD), &u.base, &r);
    CU_ASSERT(cr->changed && cr->binding->unbound);
    FREE_RESP(r);
    a.ack_seq = 100;
    rejected(P(ACK_CMD), &a.base, SLOTD_ENOT_FOUND, NULL, NULL);
    Slotd__V1__GetCmdBindingQuery q = SLOTD__V1__GET_CMD_BINDING_QUERY__INIT;
    q.uid = "u";
    q.channel_id = "cmd";
    q.channel_type = 2;
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__GetCmdBindingResult *gr = qok(Q(GET_CMD_BINDING), &q.base, &rr);
    CU_ASSERT(gr->found && gr->binding->unbound && gr->binding->ack_seq == 7);
    FREE_READ(rr);
    b.start_seq = 20;
    cr = ok(P(BIND_CMD), &b.base, &r); /* re-bind keeps the ack floor */
    CU_ASSERT(cr->changed && !cr->binding->unbound && cr->binding->ack_seq == 7 &&
              cr->binding->start_seq == 20);
    FREE_RESP(r);
    u.channel_id = "none";
    u.channel_type = 2;
    rejected(P(UNBIND_CMD), &u.base, SLOTD_ENOT_FOUND, NULL, NULL);
    teardown();
}

/* ---- runtime meta ---- */

/* The leader in ErrorDetail.current_runtime_meta of a packed google.rpc.Status (0 if none). */
static uint64_t detail_current_leader(const uint8_t *buf, size_t len)
{
    Google__Rpc__Status *st_msg = google__rpc__status__unpack(NULL, len, buf);
    CU_ASSERT_FATAL(st_msg != NULL && st_msg->n_details == 1);
    CU_ASSERT(st_msg->code == GRPC_STATUS_ABORTED);
    Slotd__V1__ErrorDetail *d = slotd__v1__error_detail__unpack(NULL, st_msg->details[0]->value.len,
                                                                st_msg->details[0]->value.data);
    CU_ASSERT_FATAL(d != NULL);
    CU_ASSERT(d->code == SLOTD__V1__ERROR_CODE__ERROR_CODE_STALE_FENCE);
    uint64_t leader = d->current_runtime_meta != NULL ? d->current_runtime_meta->leader : 0;
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st_msg, NULL);
    return leader;
}

static void test_runtime_meta(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    struct slotd_error err;
    uint64_t replicas[] = {1, 2, 3}, isr[] = {1, 2};
    Slotd__V1__ChannelRuntimeMeta meta = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    meta.leader = 1;
    meta.n_replicas = 3;
    meta.replicas = replicas;
    meta.n_isr = 2;
    meta.isr = isr;
    meta.channel_epoch = 1;
    meta.leader_epoch = 1;
    meta.write_fence = 4;
    meta.retention_through_seq = 100;
    Slotd__V1__UpdateRuntimeMetaCommand u = SLOTD__V1__UPDATE_RUNTIME_META_COMMAND__INIT;
    u.channel_id = "rt";
    u.channel_type = 2;
    u.meta = &meta;
    const Slotd__V1__RuntimeMetaResult *mr = ok(P(UPDATE_RUNTIME_META), &u.base, &r);
    CU_ASSERT(mr->changed && mr->retention_advanced && mr->meta->n_isr == 2);
    FREE_RESP(r);
    /* Stale expectation: ABORTED with the current values, nothing changes. */
    Slotd__V1__ChannelRuntimeMeta next = meta;
    next.leader = 2;
    next.leader_epoch = 2;
    u.meta = &next;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_ESTALE_FENCE, NULL, &err);
    CU_ASSERT_FATAL(err.current_runtime_meta_len > 0);
    Slotd__V1__ChannelRuntimeMeta *cur = slotd__v1__channel_runtime_meta__unpack(
        NULL, err.current_runtime_meta_len, err.current_runtime_meta);
    CU_ASSERT_FATAL(cur != NULL);
    CU_ASSERT(cur->leader == 1 && cur->channel_epoch == 1 && cur->leader_epoch == 1 &&
              cur->n_replicas == 3 && cur->retention_through_seq == 100);
    slotd__v1__channel_runtime_meta__free_unpacked(cur, NULL);
    uint8_t *details;
    size_t dlen;
    CU_ASSERT_FATAL(slotd_error_encode_details(&err, &details, &dlen) == SLOTD_OK);
    CU_ASSERT(detail_current_leader(details, dlen) == 1); /* ErrorDetail.current_runtime_meta */
    free(details);
    /* Current expectation: accepted; a lower retention keeps the current one. */
    u.expected_channel_epoch = 1;
    u.expected_leader_epoch = 1;
    u.expected_leader = 1;
    next.retention_through_seq = 50;
    mr = ok(P(UPDATE_RUNTIME_META), &u.base, &r);
    CU_ASSERT(mr->changed && !mr->retention_advanced && mr->meta->leader == 2 &&
              mr->meta->retention_through_seq == 100);
    FREE_RESP(r);
    Slotd__V1__AdvanceRetentionCommand ar = SLOTD__V1__ADVANCE_RETENTION_COMMAND__INIT;
    ar.channel_id = "rt";
    ar.channel_type = 2;
    ar.retention_through_seq = 90;
    mr = ok(P(ADVANCE_RETENTION), &ar.base, &r);
    CU_ASSERT(!mr->retention_advanced && mr->meta->retention_through_seq == 100);
    FREE_RESP(r);
    ar.retention_through_seq = 120;
    mr = ok(P(ADVANCE_RETENTION), &ar.base, &r);
    CU_ASSERT(mr->retention_advanced && mr->meta->retention_through_seq == 120);
    FREE_RESP(r);
    ar.channel_id = "none";
    ar.channel_type = 2;
    rejected(P(ADVANCE_RETENTION), &ar.base, SLOTD_ENOT_FOUND, NULL, NULL);
    Slotd__V1__GetRuntimeMetaQuery q = SLOTD__V1__GET_RUNTIME_META_QUERY__INIT;
    q.channel_id = "rt";
    q.channel_type = 2;
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__GetRuntimeMetaResult *gr = qok(Q(GET_RUNTIME_META), &q.base, &rr);
    CU_ASSERT(gr->found && gr->meta->leader == 2 && gr->meta->leader_epoch == 2 &&
              gr->meta->retention_through_seq == 120 && gr->meta->write_fence == 4);
    FREE_READ(rr);
    teardown();
}

static void test_runtime_meta_invalid(void)
{
    setup();
    struct slotd_error err;
    uint64_t replicas[] = {1, 2, 3}, isr[] = {1, 2};
    Slotd__V1__ChannelRuntimeMeta next = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    next.leader = 2;
    next.n_replicas = 3;
    next.replicas = replicas;
    next.n_isr = 2;
    next.isr = isr;
    next.channel_epoch = 1;
    next.leader_epoch = 2;
    Slotd__V1__UpdateRuntimeMetaCommand u = SLOTD__V1__UPDATE_RUNTIME_META_COMMAND__INIT;
    u.channel_id = "rt";
    u.channel_type = 2;
    u.meta = &next;
    u.expected_channel_epoch = 1;
    u.expected_leader = 2;
    u.expected_leader_epoch = 2;
    uint64_t bad_isr[] = {9};
    next.isr = bad_isr;
    next.n_isr = 1;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EINVALID_FIELD, "update_runtime_meta.meta.isr",
             NULL);
    next.isr = isr;
    next.n_isr = 2;
    next.leader = 7;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EINVALID_FIELD,
             "update_runtime_meta.meta.leader", NULL);
    next.leader = 2;
    uint64_t seventeen[17];
    for (int i = 0; i < 17; i++)
        seventeen[i] = (uint64_t)i + 1;
    next.replicas = seventeen;
    next.n_replicas = 17;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EINVALID_FIELD,
             "update_runtime_meta.meta.replicas", &err);
    CU_ASSERT(err.limit == 16);
    next.replicas = replicas;
    next.n_replicas = 3;
    next.leader_epoch = 1; /* below the expected 2 */
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EINVALID_FIELD,
             "update_runtime_meta.meta.leader_epoch", NULL);
    teardown();
}

/* The monotonic fields of ChannelRuntimeMeta: each one moving back is FAILED_PRECONDITION
 * naming the field and both values, and changes nothing; min_isr and status are bounded. */
static void test_runtime_meta_rules(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    struct slotd_error err;
    uint64_t replicas[] = {1, 2, 3};
    Slotd__V1__ChannelRuntimeMeta meta = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    meta.leader = 1;
    meta.n_replicas = 3;
    meta.replicas = replicas;
    meta.channel_epoch = 1;
    meta.leader_epoch = 1;
    meta.write_fence = 5;
    meta.lease_until_ms = 1000;
    meta.min_isr = 2;
    meta.status = SLOTD__V1__CHANNEL_STATUS__CHANNEL_STATUS_ACTIVE;
    meta.features = 0x3;
    Slotd__V1__UpdateRuntimeMetaCommand u = SLOTD__V1__UPDATE_RUNTIME_META_COMMAND__INIT;
    u.channel_id = "rules";
    u.channel_type = 1;
    u.meta = &meta;
    const Slotd__V1__RuntimeMetaResult *mr = ok(P(UPDATE_RUNTIME_META), &u.base, &r);
    CU_ASSERT(mr->changed && mr->meta->lease_until_ms == 1000 && mr->meta->min_isr == 2 &&
              mr->meta->status == SLOTD__V1__CHANNEL_STATUS__CHANNEL_STATUS_ACTIVE &&
              mr->meta->features == 0x3);
    FREE_RESP(r);
    u.expected_channel_epoch = 1;
    u.expected_leader_epoch = 1;
    u.expected_leader = 1;
    Slotd__V1__ChannelRuntimeMeta next = meta;
    next.write_fence = 4;
    u.meta = &next;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EPRECONDITION,
             "update_runtime_meta.meta.write_fence", &err);
    CU_ASSERT(strstr(err.message, "4, current 5") != NULL);
    CU_ASSERT(slotd_error_grpc_code(err.code) == GRPC_STATUS_FAILED_PRECONDITION);
    next = meta;
    next.status = SLOTD__V1__CHANNEL_STATUS__CHANNEL_STATUS_CREATING;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EPRECONDITION,
             "update_runtime_meta.meta.status", &err);
    CU_ASSERT(strstr(err.message, "1, current 2") != NULL);
    next = meta;
    next.lease_until_ms = 999; /* same leader_epoch: the lease only moves forward */
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EPRECONDITION,
             "update_runtime_meta.meta.lease_until_ms", &err);
    CU_ASSERT(strstr(err.message, "999, current 1000") != NULL);
    next = meta;
    next.features = 0x1;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EPRECONDITION,
             "update_runtime_meta.meta.features", NULL);
    next = meta;
    next.min_isr = 4; /* more than the 3 replicas */
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EINVALID_FIELD,
             "update_runtime_meta.meta.min_isr", &err);
    CU_ASSERT(err.limit == 3);
    next = meta;
    next.status = (Slotd__V1__ChannelStatus)9;
    rejected(P(UPDATE_RUNTIME_META), &u.base, SLOTD_EINVALID_FIELD,
             "update_runtime_meta.meta.status", NULL);
    /* A new leader epoch starts a new lease (any value); status and fence move forward. */
    next = meta;
    next.leader = 2;
    next.leader_epoch = 2;
    next.lease_until_ms = 10;
    next.write_fence = 6;
    next.status = SLOTD__V1__CHANNEL_STATUS__CHANNEL_STATUS_DELETING;
    next.features = 0x7;
    mr = ok(P(UPDATE_RUNTIME_META), &u.base, &r);
    CU_ASSERT(mr->changed && mr->meta->lease_until_ms == 10 && mr->meta->leader_epoch == 2 &&
              mr->meta->status == SLOTD__V1__CHANNEL_STATUS__CHANNEL_STATUS_DELETING);
    FREE_RESP(r);
    teardown();
}

/* (channel_id, channel_type) keys every channel row: the same id with two types shares nothing
 * but its hash slot. */
static void test_channel_type_isolation(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    for (uint32_t type = 1; type <= 2; type++) {
        Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
        cc.channel_id = "same";
        cc.channel_type = type;
        const Slotd__V1__ChannelResult *cr = ok(P(CREATE_CHANNEL), &cc.base, &r);
        CU_ASSERT(cr->changed && cr->channel->channel_type == type);
        CU_ASSERT(r->applied_index > 0);
        FREE_RESP(r);
    }
    char *uids[] = {"u1", "u2", "u3"};
    Slotd__V1__SubscribersCommand sc = SLOTD__V1__SUBSCRIBERS_COMMAND__INIT;
    sc.channel_id = "same";
    sc.channel_type = 1;
    sc.n_uids = 3;
    sc.uids = uids;
    const Slotd__V1__MembersResult *m = ok(P(ADD_SUBSCRIBERS), &sc.base, &r);
    CU_ASSERT(m->changed == 3 && m->subscriber_count == 3);
    FREE_RESP(r);
    Slotd__V1__GetChannelQuery gq = SLOTD__V1__GET_CHANNEL_QUERY__INIT;
    gq.channel_id = "same";
    gq.channel_type = 2;
    const Slotd__V1__GetChannelResult *gr = qok(Q(GET_CHANNEL), &gq.base, &rr);
    CU_ASSERT(gr->found && gr->channel->subscriber_count == 0 &&
              gr->channel->subscriber_version == 0);
    FREE_READ(rr);
    Slotd__V1__CheckMemberQuery cq = SLOTD__V1__CHECK_MEMBER_QUERY__INIT;
    cq.channel_id = "same";
    cq.channel_type = 2;
    cq.list = SLOTD__V1__MEMBER_LIST__MEMBER_LIST_SUBSCRIBERS;
    cq.uid = "u1";
    const Slotd__V1__CheckMemberResult *ck = qok(Q(CHECK_MEMBER), &cq.base, &rr);
    CU_ASSERT(!ck->member);
    FREE_READ(rr);
    cq.channel_type = 1;
    ck = qok(Q(CHECK_MEMBER), &cq.base, &rr);
    CU_ASSERT(ck->member);
    FREE_READ(rr);
    /* channel_type 0 names no channel. */
    sc.channel_type = 0;
    rejected(P(ADD_SUBSCRIBERS), &sc.base, SLOTD_EINVALID_FIELD, "add_subscribers.channel_type",
             NULL);
    teardown();
}

/* ---- deletes ---- */

static void simple_cmd(unsigned num, const ProtobufCMessage *cmd)
{
    Slotd__V1__ProposeResponse *r;
    ok(num, cmd, &r);
    FREE_RESP(r);
}

/* delete_user removes exactly the rows the user owns: afterwards the keyspace is what it was
 * before the user existed (another user's rows stay); a repeat removes nothing. */
static void test_delete_user(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    Slotd__V1__User other = SLOTD__V1__USER__INIT;
    other.uid = "keep";
    Slotd__V1__CreateUserCommand cu = SLOTD__V1__CREATE_USER_COMMAND__INIT;
    cu.user = &other;
    simple_cmd(P(CREATE_USER), &cu.base);
    uint64_t before = keyspace_digest();
    Slotd__V1__User u = SLOTD__V1__USER__INIT;
    u.uid = "gone";
    cu.user = &u;
    simple_cmd(P(CREATE_USER), &cu.base);
    Slotd__V1__Device d = SLOTD__V1__DEVICE__INIT;
    d.uid = "gone";
    Slotd__V1__PutDeviceCommand pd = SLOTD__V1__PUT_DEVICE_COMMAND__INIT;
    pd.device = &d;
    for (d.device_flag = 0; d.device_flag < 3; d.device_flag++)
        simple_cmd(P(PUT_DEVICE), &pd.base);
    const char *chs[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        member_cmd(P(JOIN_CHANNEL), "gone", chs[i], 10 + (uint64_t)i, &r);
        FREE_RESP(r);
    }
    member_cmd(P(HIDE_CONVERSATION), "gone", "b", 5, &r); /* no index entry */
    FREE_RESP(r);
    member_cmd(P(LEAVE_CHANNEL), "gone", "c", 0, &r); /* a tombstone */
    FREE_RESP(r);
    Slotd__V1__BindCmdCommand bc = SLOTD__V1__BIND_CMD_COMMAND__INIT;
    bc.uid = "gone";
    bc.channel_id = "cmd";
    bc.channel_type = 2;
    simple_cmd(P(BIND_CMD), &bc.base);
    Slotd__V1__BindPluginCommand bp = SLOTD__V1__BIND_PLUGIN_COMMAND__INIT;
    bp.uid = "gone";
    bp.plugin_no = "p1";
    simple_cmd(P(BIND_PLUGIN), &bp.base);
    Slotd__V1__SetSystemUidCommand su = SLOTD__V1__SET_SYSTEM_UID_COMMAND__INIT;
    su.uid = "gone";
    su.system = true;
    simple_cmd(P(SET_SYSTEM_UID), &su.base);
    CU_ASSERT(keyspace_digest() != before);
    Slotd__V1__DeleteUserCommand du = SLOTD__V1__DELETE_USER_COMMAND__INIT;
    du.uid = "gone";
    const Slotd__V1__DeleteUserResult *dr = ok(P(DELETE_USER), &du.base, &r);
    CU_ASSERT(dr->removed && dr->devices == 3 && dr->memberships == 3 && dr->cmd_bindings == 1 &&
              dr->plugin_binding && dr->system_uid && !dr->more);
    FREE_RESP(r);
    CU_ASSERT(keyspace_digest() == before); /* exactly its rows, index entries included */
    dr = ok(P(DELETE_USER), &du.base, &r);
    CU_ASSERT(!dr->removed && dr->devices == 0 && dr->memberships == 0 && !dr->more);
    FREE_RESP(r);
    Slotd__V1__GetUserQuery gq = SLOTD__V1__GET_USER_QUERY__INIT;
    gq.uid = "keep";
    const Slotd__V1__GetUserResult *gr = qok(Q(GET_USER), &gq.base, &rr);
    CU_ASSERT(gr->found);
    FREE_READ(rr);
    du.uid = "";
    rejected(P(DELETE_USER), &du.base, SLOTD_EINVALID_FIELD, "delete_user.uid", NULL);
    teardown();
}

/* delete_channel removes the channel's rows of its type only; over SLOT_DELETE_ROWS_MAX rows it
 * stops, keeps the channel disbanded with an exact count, and a repeat finishes. */
static void test_delete_channel(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
    cc.channel_id = "big";
    cc.channel_type = 1; /* same id, another type: untouched */
    simple_cmd(P(CREATE_CHANNEL), &cc.base);
    uint64_t before = keyspace_digest();
    create_channel("big", 0);
    enum { N = SLOT_DELETE_ROWS_MAX + 5, BATCH = SLOT_BATCH_UIDS_MAX };
    static char names[N][16];
    char *uids[BATCH];
    uint64_t version = 0;
    for (size_t at = 0; at < N; at += BATCH) {
        size_t n = N - at < BATCH ? N - at : BATCH;
        for (size_t i = 0; i < n; i++) {
            snprintf(names[at + i], sizeof(names[0]), "s%06zu", at + i);
            uids[i] = names[at + i];
        }
        const Slotd__V1__MembersResult *m = subs(P(ADD_SUBSCRIBERS), "big", version, n, uids, &r);
        version = m->subscriber_version;
        FREE_RESP(r);
    }
    Slotd__V1__ChannelListCommand al = SLOTD__V1__CHANNEL_LIST_COMMAND__INIT;
    al.channel_id = "big";
    al.channel_type = 2;
    al.n_uids = 2;
    al.uids = uids;
    simple_cmd(P(ADD_DENYLIST), &al.base);
    Slotd__V1__AppendEventCommand ev = SLOTD__V1__APPEND_EVENT_COMMAND__INIT;
    ev.channel_id = "big";
    ev.channel_type = 2;
    ev.event_type = "e";
    simple_cmd(P(APPEND_EVENT), &ev.base);
    simple_cmd(P(APPEND_EVENT), &ev.base);
    uint64_t replicas[] = {1};
    Slotd__V1__ChannelRuntimeMeta meta = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    meta.n_replicas = 1;
    meta.replicas = replicas;
    Slotd__V1__UpdateRuntimeMetaCommand um = SLOTD__V1__UPDATE_RUNTIME_META_COMMAND__INIT;
    um.channel_id = "big";
    um.channel_type = 2;
    um.meta = &meta;
    simple_cmd(P(UPDATE_RUNTIME_META), &um.base);
    Slotd__V1__DeleteChannelCommand dc = SLOTD__V1__DELETE_CHANNEL_COMMAND__INIT;
    dc.channel_id = "big";
    dc.channel_type = 2;
    const Slotd__V1__DeleteChannelResult *dr = ok(P(DELETE_CHANNEL), &dc.base, &r);
    uint32_t first = dr->subscribers;
    CU_ASSERT(dr->more && !dr->removed && dr->events == 2 && dr->runtime_meta &&
              dr->denylist == 2 && dr->subscribers == SLOT_DELETE_ROWS_MAX - 5);
    FREE_RESP(r);
    Slotd__V1__GetChannelQuery gq = SLOTD__V1__GET_CHANNEL_QUERY__INIT;
    gq.channel_id = "big";
    gq.channel_type = 2;
    const Slotd__V1__GetChannelResult *gr = qok(Q(GET_CHANNEL), &gq.base, &rr);
    CU_ASSERT(gr->found && gr->channel->flags->disband &&
              gr->channel->subscriber_count == N - first &&
              gr->channel->subscriber_version == version + 1);
    FREE_READ(rr);
    dr = ok(P(DELETE_CHANNEL), &dc.base, &r);
    CU_ASSERT(!dr->more && dr->removed && dr->subscribers == N - first && dr->events == 0);
    FREE_RESP(r);
    CU_ASSERT(keyspace_digest() == before);
    rejected(P(DELETE_CHANNEL), &dc.base, SLOTD_ENOT_FOUND, NULL, NULL);
    gq.channel_type = 1;
    gr = qok(Q(GET_CHANNEL), &gq.base, &rr);
    CU_ASSERT(gr->found);
    FREE_READ(rr);
    teardown();
}

/* ---- migration tasks, plugins, events ---- */

static void test_migration_tasks(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ChannelMigrationTask t = SLOTD__V1__CHANNEL_MIGRATION_TASK__INIT;
    t.channel_id = "mc";
    t.channel_type = 2;
    t.task_id = 1;
    t.source_node = 1;
    t.target_node = 2;
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING;
    Slotd__V1__PutMigrationTaskCommand p = SLOTD__V1__PUT_MIGRATION_TASK_COMMAND__INIT;
    p.task = &t;
    const Slotd__V1__MigrationTaskResult *mr = ok(P(PUT_MIGRATION_TASK), &p.base, &r);
    CU_ASSERT(mr->changed);
    FREE_RESP(r);
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_RUNNING;
    t.target_node = 9; /* fixed at creation */
    mr = ok(P(PUT_MIGRATION_TASK), &p.base, &r);
    CU_ASSERT(mr->changed && mr->task->target_node == 2);
    FREE_RESP(r);
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING;
    mr = ok(P(PUT_MIGRATION_TASK), &p.base, &r);
    CU_ASSERT(!mr->changed &&
              mr->task->status == SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_RUNNING);
    FREE_RESP(r);
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_DONE;
    mr = ok(P(PUT_MIGRATION_TASK), &p.base, &r);
    CU_ASSERT(mr->changed);
    FREE_RESP(r);
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_FAILED;
    mr = ok(P(PUT_MIGRATION_TASK), &p.base, &r);
    CU_ASSERT(!mr->changed); /* terminal */
    FREE_RESP(r);
    t.task_id = 2;
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING;
    mr = ok(P(PUT_MIGRATION_TASK), &p.base, &r);
    FREE_RESP(r);
    t.status = (Slotd__V1__MigrationStatus)9;
    rejected(P(PUT_MIGRATION_TASK), &p.base, SLOTD_EINVALID_FIELD, "put_migration_task.task.status",
             NULL);
    t.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING;
    t.task_id = 0;
    rejected(P(PUT_MIGRATION_TASK), &p.base, SLOTD_EINVALID_FIELD,
             "put_migration_task.task.task_id", NULL);
    Slotd__V1__ListMigrationTasksQuery q = SLOTD__V1__LIST_MIGRATION_TASKS_QUERY__INIT;
    q.channel_id = "mc";
    q.channel_type = 2;
    q.limit = 1;
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__ListMigrationTasksResult *lr = qok(Q(LIST_MIGRATION_TASKS), &q.base, &rr);
    CU_ASSERT_FATAL(lr->n_tasks == 1 && lr->next_cursor.len > 0);
    CU_ASSERT(lr->tasks[0]->task_id == 1 &&
              lr->tasks[0]->status == SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_DONE);
    uint8_t cursor[64];
    if (lr->next_cursor.len > 0)
        memcpy(cursor, lr->next_cursor.data, lr->next_cursor.len);
    q.cursor.data = cursor;
    q.cursor.len = lr->next_cursor.len;
    FREE_READ(rr);
    lr = qok(Q(LIST_MIGRATION_TASKS), &q.base, &rr);
    CU_ASSERT(lr->n_tasks == 1 && lr->tasks[0]->task_id == 2 && lr->next_cursor.len == 0);
    FREE_READ(rr);
    teardown();
}

/* The uids bound to plugin over every hash slot (as a client iterates 0..255). */
static size_t plugin_users(const char *plugin, char out[][16], size_t max)
{
    size_t n = 0;
    for (uint32_t hs = 0; hs < 256; hs++) {
        Slotd__V1__ListPluginUsersQuery q = SLOTD__V1__LIST_PLUGIN_USERS_QUERY__INIT;
        q.hash_slot = hs;
        q.plugin_no = (char *)plugin;
        Slotd__V1__ReadResponse *rr;
        const Slotd__V1__ListPluginUsersResult *r = qok(Q(LIST_PLUGIN_USERS), &q.base, &rr);
        for (size_t i = 0; i < r->n_uids && n < max; i++) {
            CU_ASSERT(route_hash_slot(r->uids[i], strlen(r->uids[i])) == hs);
            snprintf(out[n++], 16, "%s", r->uids[i]);
        }
        FREE_READ(rr);
    }
    return n;
}

static void test_plugins(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    char got[8][16];
    Slotd__V1__BindPluginCommand b = SLOTD__V1__BIND_PLUGIN_COMMAND__INIT;
    const char *uids[] = {"p-u1", "p-u2", "p-u3"};
    for (int i = 0; i < 3; i++) {
        b.uid = (char *)uids[i];
        b.plugin_no = i < 2 ? "ai" : "bot";
        const Slotd__V1__PluginBindingResult *pr = ok(P(BIND_PLUGIN), &b.base, &r);
        CU_ASSERT(pr->changed);
        FREE_RESP(r);
    }
    b.uid = "p-u1";
    b.plugin_no = "ai";
    const Slotd__V1__PluginBindingResult *pr = ok(P(BIND_PLUGIN), &b.base, &r);
    CU_ASSERT(!pr->changed);
    FREE_RESP(r);
    CU_ASSERT(plugin_users("ai", got, 8) == 2);
    CU_ASSERT(plugin_users("bot", got, 8) == 1);
    b.plugin_no = "bot"; /* re-binding moves the reverse index entry */
    pr = ok(P(BIND_PLUGIN), &b.base, &r);
    CU_ASSERT(pr->changed);
    FREE_RESP(r);
    CU_ASSERT(plugin_users("ai", got, 8) == 1 && strcmp(got[0], "p-u2") == 0);
    CU_ASSERT(plugin_users("bot", got, 8) == 2);
    Slotd__V1__UnbindPluginCommand u = SLOTD__V1__UNBIND_PLUGIN_COMMAND__INIT;
    u.uid = "p-u2";
    pr = ok(P(UNBIND_PLUGIN), &u.base, &r);
    CU_ASSERT(pr->changed);
    FREE_RESP(r);
    pr = ok(P(UNBIND_PLUGIN), &u.base, &r);
    CU_ASSERT(!pr->changed);
    FREE_RESP(r);
    CU_ASSERT(plugin_users("ai", got, 8) == 0);
    Slotd__V1__GetPluginBindingQuery q = SLOTD__V1__GET_PLUGIN_BINDING_QUERY__INIT;
    q.uid = "p-u1";
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__GetPluginBindingResult *gr = qok(Q(GET_PLUGIN_BINDING), &q.base, &rr);
    CU_ASSERT(gr->found && strcmp(gr->binding->plugin_no, "bot") == 0);
    FREE_READ(rr);
    b.plugin_no = "";
    rejected(P(BIND_PLUGIN), &b.base, SLOTD_EINVALID_FIELD, "bind_plugin.plugin_no", NULL);
    teardown();
}

static void append(const char *ch, uint64_t msg_seq, Slotd__V1__ProposeResponse **r)
{
    Slotd__V1__AppendEventCommand a = SLOTD__V1__APPEND_EVENT_COMMAND__INIT;
    a.channel_id = (char *)ch;
    a.channel_type = 2;
    a.message_seq = msg_seq;
    a.event_type = "edit";
    a.payload.data = (uint8_t *)"p";
    a.payload.len = 1;
    ok(P(APPEND_EVENT), &a.base, r);
}

static void test_events(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    create_channel("ev", 3);
    for (uint64_t i = 1; i <= 5; i++) {
        append("ev", 1000 + i, &r);
        CU_ASSERT(r->append_event->event_seq == i);
        CU_ASSERT(r->append_event->evicted == (i > 3 ? 1u : 0u));
        FREE_RESP(r);
    }
    Slotd__V1__ListEventsQuery q = SLOTD__V1__LIST_EVENTS_QUERY__INIT;
    q.channel_id = "ev";
    q.channel_type = 2;
    q.limit = 2;
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__ListEventsResult *lr = qok(Q(LIST_EVENTS), &q.base, &rr);
    CU_ASSERT_FATAL(lr->n_events == 2 && lr->next_cursor.len > 0);
    CU_ASSERT(lr->events[0]->event_seq == 5 && lr->events[1]->event_seq == 4 &&
              lr->events[0]->message_seq == 1005 && strcmp(lr->events[0]->event_type, "edit") == 0);
    uint8_t cursor[64];
    if (lr->next_cursor.len > 0)
        memcpy(cursor, lr->next_cursor.data, lr->next_cursor.len);
    q.cursor.data = cursor;
    q.cursor.len = lr->next_cursor.len;
    FREE_READ(rr);
    lr = qok(Q(LIST_EVENTS), &q.base, &rr);
    CU_ASSERT(lr->n_events == 1 && lr->events[0]->event_seq == 3 && lr->next_cursor.len == 0);
    FREE_READ(rr);
    Slotd__V1__AppendEventCommand a = SLOTD__V1__APPEND_EVENT_COMMAND__INIT;
    a.channel_id = "nochan";
    a.channel_type = 2;
    a.event_type = "edit";
    rejected(P(APPEND_EVENT), &a.base, SLOTD_ENOT_FOUND, NULL, NULL);
    a.channel_id = "ev";
    a.channel_type = 2;
    uint8_t big[SLOT_EVENT_PAYLOAD_MAX + 1] = {0};
    a.payload.data = big;
    a.payload.len = sizeof(big);
    rejected(P(APPEND_EVENT), &a.base, SLOTD_EINVALID_FIELD, "append_event.payload", NULL);
    teardown();
}

/* ---- encoding, dedupe, routing ---- */

static void test_encoding_and_dedupe(void)
{
    setup();
    struct slotd_error err;
    create_channel("dd", 0);
    char *uids[] = {"a", "b"};
    Slotd__V1__SubscribersCommand sc = SLOTD__V1__SUBSCRIBERS_COMMAND__INIT;
    sc.channel_id = "dd";
    sc.channel_type = 2;
    sc.n_uids = 2;
    sc.uids = uids;
    /* Round trip: the LogCommand carries the same message at the same number. */
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    slot__oneof_set(&req.base, P(ADD_SUBSCRIBERS), &sc.base);
    const ProtobufCBinaryData *key;
    CU_ASSERT_FATAL(slot_validate_propose(&req, &key, &err) == 0);
    CU_ASSERT(key->len == 2 && memcmp(key->data, "dd", 2) == 0);
    uint8_t *data;
    size_t len;
    CU_ASSERT_FATAL(slot_encode_command(&req, route_hash_slot("dd", 2), &data, &len) == 0);
    Slotd__Internal__V1__LogCommand *lc = slotd__internal__v1__log_command__unpack(NULL, len, data);
    CU_ASSERT_FATAL(lc != NULL);
    CU_ASSERT(lc->command_case == SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_ADD_SUBSCRIBERS);
    CU_ASSERT(lc->add_subscribers->n_uids == 2 && strcmp(lc->add_subscribers->uids[1], "b") == 0);
    slotd__internal__v1__log_command__free_unpacked(lc, NULL);
    free(data);
    /* Dedupe: a retry with the request id returns the first result and applies nothing. */
    Slotd__V1__ProposeResponse *r1 = propose(P(ADD_SUBSCRIBERS), &sc.base, "rid-1", &err);
    CU_ASSERT_FATAL(r1 != NULL);
    uint64_t before = keyspace_digest();
    Slotd__V1__ProposeResponse *r2 = propose(P(ADD_SUBSCRIBERS), &sc.base, "rid-1", &err);
    CU_ASSERT_FATAL(r2 != NULL);
    CU_ASSERT(r2->deduplicated && !r1->deduplicated);
    CU_ASSERT(r2->add_subscribers->changed == 2 && r2->add_subscribers->subscriber_version == 1);
    CU_ASSERT(r2->applied_index == r1->applied_index);
    CU_ASSERT(keyspace_digest() == before);
    FREE_RESP(r1);
    FREE_RESP(r2);
    /* A fence failure is not remembered: the same id later applies with the right version. */
    sc.expected_version = 0;
    CU_ASSERT(propose(P(ADD_SUBSCRIBERS), &sc.base, "rid-2", &err) == NULL);
    CU_ASSERT(err.code == SLOTD_ESTALE_FENCE);
    sc.expected_version = 1;
    r1 = propose(P(ADD_SUBSCRIBERS), &sc.base, "rid-2", &err);
    CU_ASSERT_FATAL(r1 != NULL);
    CU_ASSERT(!r1->deduplicated && r1->add_subscribers->changed == 0);
    FREE_RESP(r1);
    /* An entry whose hash slot is not its routing key's is WRONG_GROUP on every replica. */
    before = keyspace_digest();
    uint16_t wrong = (uint16_t)((route_hash_slot("dd", 2) + 1) % 256);
    CU_ASSERT(apply_unvalidated(P(ADD_SUBSCRIBERS), &sc.base, wrong, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EWRONG_GROUP && keyspace_digest() == before);
    teardown();
}

/* ---- listings (issue 23 item 3) ---- */

/* The field of a listing result: its entries (field 1) and next_cursor (field 2). */
static size_t list_n(const ProtobufCMessage *res, void ***v, ProtobufCBinaryData *next)
{
    const ProtobufCFieldDescriptor *e = protobuf_c_message_descriptor_get_field(res->descriptor, 1);
    const ProtobufCFieldDescriptor *c = protobuf_c_message_descriptor_get_field(res->descriptor, 2);
    *v = *(void ***)((char *)res + e->offset);
    *next = *(ProtobufCBinaryData *)((char *)res + c->offset);
    return *(size_t *)((char *)res + e->quantifier_offset);
}

/* Pages through listing `num` (q's cursor field is `cursor`) for a group owning `owned`,
 * calling each(ctx, entry) per entry; returns the entries seen, at most `max_pages` pages,
 * each checked against `limit` (entries) and the page byte bound. *pages counts them. */
typedef void (*entry_fn)(void *ctx, const void *entry);
static size_t page_all(unsigned num, ProtobufCMessage *q, const uint8_t *owned, uint32_t limit,
                       entry_fn each, void *ctx, int *pages)
{
    const ProtobufCFieldDescriptor *cf =
        protobuf_c_message_descriptor_get_field_by_name(q->descriptor, "cursor");
    ProtobufCBinaryData *cursor = (ProtobufCBinaryData *)((char *)q + cf->offset);
    static uint8_t held[STORE_FSM_KEY_MAX + 16];
    cursor->len = 0;
    size_t total = 0;
    *pages = 0;
    for (; *pages < 1000; (*pages)++) {
        struct slotd_error err;
        Slotd__V1__ReadResponse *rr = query_owned(num, q, owned, &err);
        CU_ASSERT_FATAL(rr != NULL);
        void **v;
        ProtobufCBinaryData next;
        size_t n = list_n(slot__oneof_get(&rr->base, num), &v, &next);
        size_t bytes = 0;
        for (size_t i = 0; i < n; i++) {
            each(ctx, v[i]);
            bytes += num == Q(LIST_SYSTEM_UIDS) ? strlen(v[i])
                                                : protobuf_c_message_get_packed_size(v[i]);
        }
        CU_ASSERT(n <= (limit ? limit : SLOT_PAGE_DEFAULT));
        CU_ASSERT(n <= 1 || bytes <= SLOT_LIST_PAGE_BYTES);
        total += n;
        CU_ASSERT_FATAL(next.len <= sizeof(held));
        if (next.len > 0) /* an empty cursor has no data pointer: memcpy's is never NULL */
            memcpy(held, next.data, next.len);
        cursor->data = held;
        cursor->len = next.len;
        FREE_READ(rr);
        if (next.len == 0)
            break;
    }
    (*pages)++;
    return total;
}

struct seen {
    char ids[64][40];
    uint16_t hs[64];
    size_t n;
};

static void seen_str(void *ctx, const void *e)
{
    struct seen *s = ctx;
    CU_ASSERT_FATAL(s->n < 64);
    snprintf(s->ids[s->n], sizeof(s->ids[0]), "%s", (const char *)e);
    s->hs[s->n] = route_hash_slot(e, strlen(e));
    s->n++;
}

static void seen_channel(void *ctx, const void *e)
{
    const Slotd__V1__Channel *c = e;
    char id[40];
    snprintf(id, sizeof(id), "%s/%u", c->channel_id, c->channel_type);
    seen_str(ctx, id);
    ((struct seen *)ctx)->hs[((struct seen *)ctx)->n - 1] =
        route_hash_slot(c->channel_id, strlen(c->channel_id));
}

/* Every listed entry comes once, in hash-slot order. */
static void check_span_order(const struct seen *s)
{
    for (size_t i = 1; i < s->n; i++) {
        CU_ASSERT(s->hs[i - 1] <= s->hs[i]);
        CU_ASSERT(strcmp(s->ids[i - 1], s->ids[i]) != 0);
    }
}

static void system_uid(const char *uid)
{
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__SetSystemUidCommand ss = SLOTD__V1__SET_SYSTEM_UID_COMMAND__INIT;
    ss.uid = (char *)uid;
    ss.system = true;
    ok(P(SET_SYSTEM_UID), &ss.base, &r);
    FREE_RESP(r);
}

static void test_list_devices(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    Slotd__V1__ReadResponse *rr;
    struct slotd_error err;
    for (uint32_t flag = 3; flag >= 1; flag--) {
        Slotd__V1__Device d = SLOTD__V1__DEVICE__INIT;
        Slotd__V1__PutDeviceCommand pd = SLOTD__V1__PUT_DEVICE_COMMAND__INIT;
        d.uid = flag == 2 ? "devs-other" : "devs";
        d.device_flag = flag;
        pd.device = &d;
        ok(P(PUT_DEVICE), &pd.base, &r);
        FREE_RESP(r);
        d.uid = "devs";
        ok(P(PUT_DEVICE), &pd.base, &r);
        FREE_RESP(r);
    }
    Slotd__V1__ListDevicesQuery q = SLOTD__V1__LIST_DEVICES_QUERY__INIT;
    q.uid = "devs";
    q.limit = 2;
    const Slotd__V1__ListDevicesResult *lr = qok(Q(LIST_DEVICES), &q.base, &rr);
    CU_ASSERT_FATAL(lr->n_devices == 2 && lr->next_cursor.len > 0);
    CU_ASSERT(lr->devices[0]->device_flag == 1 && lr->devices[1]->device_flag == 2 &&
              strcmp(lr->devices[0]->uid, "devs") == 0);
    uint8_t cursor[64];
    memcpy(cursor, lr->next_cursor.data, lr->next_cursor.len);
    q.cursor.data = cursor;
    q.cursor.len = lr->next_cursor.len;
    FREE_READ(rr);
    lr = qok(Q(LIST_DEVICES), &q.base, &rr);
    CU_ASSERT(lr->n_devices == 1 && lr->devices[0]->device_flag == 3 && lr->next_cursor.len == 0);
    FREE_READ(rr);
    /* Bad input: the field and its limit; a spanning listing's cursor is not this one's. */
    uint64_t before = keyspace_digest();
    q.limit = SLOT_PAGE_MAX + 1;
    q.cursor.len = 0;
    CU_ASSERT(query(Q(LIST_DEVICES), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "list_devices.limit") == 0 &&
              err.limit == SLOT_PAGE_MAX);
    ProtobufCBinaryData span;
    CU_ASSERT_FATAL(slot_list_cursor_make(3, (const uint8_t *)"x", 1, &span) == 0);
    q.limit = 0;
    q.cursor = span;
    CU_ASSERT(query(Q(LIST_DEVICES), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "list_devices.cursor") == 0);
    free(span.data);
    q.cursor.len = 0;
    q.uid = "";
    CU_ASSERT(query(Q(LIST_DEVICES), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD && strcmp(err.field, "list_devices.uid") == 0 &&
              err.limit == SLOT_UID_MAX);
    CU_ASSERT(keyspace_digest() == before);
    teardown();
}

static void test_list_system_uids(void)
{
    setup();
    char uid[16];
    for (int i = 0; i < 40; i++) {
        snprintf(uid, sizeof(uid), "sys-%02d", i);
        system_uid(uid);
    }
    /* One group owning every hash slot: pages of 7 cover all 40 once, in hash-slot order, then
     * uid order within a hash slot. */
    Slotd__V1__ListSystemUidsQuery q = SLOTD__V1__LIST_SYSTEM_UIDS_QUERY__INIT;
    q.limit = 7;
    struct seen s = {0};
    int pages;
    CU_ASSERT(page_all(Q(LIST_SYSTEM_UIDS), &q.base, gs.owned, 7, seen_str, &s, &pages) == 40);
    CU_ASSERT(pages == 6);
    check_span_order(&s);
    for (size_t i = 1; i < s.n; i++)
        CU_ASSERT(s.hs[i - 1] < s.hs[i] || strcmp(s.ids[i - 1], s.ids[i]) < 0);
    /* The cursor the node makes after an entry (when it cuts a merged page) continues where
     * the group's own next_cursor does. */
    Slotd__V1__ReadResponse *rr, *r2;
    const Slotd__V1__ListSystemUidsResult *lr;
    struct slotd_error err;
    rr = query_owned(Q(LIST_SYSTEM_UIDS), &q.base, gs.owned, &err);
    CU_ASSERT_FATAL(rr != NULL);
    lr = rr->list_system_uids;
    CU_ASSERT_FATAL(lr->n_uids == 7);
    ProtobufCBinaryData after;
    CU_ASSERT_FATAL(slot_list_entry_cursor(Q(LIST_SYSTEM_UIDS), lr->uids[6], &after) == 0);
    char next_uid[2][16];
    for (int i = 0; i < 2; i++) {
        q.cursor = i == 0 ? after : lr->next_cursor;
        q.limit = 1;
        r2 = query_owned(Q(LIST_SYSTEM_UIDS), &q.base, gs.owned, &err);
        CU_ASSERT_FATAL(r2 != NULL && r2->list_system_uids->n_uids == 1);
        snprintf(next_uid[i], sizeof(next_uid[i]), "%s", r2->list_system_uids->uids[0]);
        FREE_READ(r2);
    }
    CU_ASSERT(strcmp(next_uid[0], next_uid[1]) == 0 && strcmp(next_uid[0], s.ids[7]) == 0);
    free(after.data);
    FREE_READ(rr);
    /* A group owning hash slots 0..127 serves its run and names 128's start as the next page. */
    uint8_t half[32] = {0};
    memset(half, 0xFF, 16);
    q.limit = 1000;
    q.cursor.len = 0;
    rr = query_owned(Q(LIST_SYSTEM_UIDS), &q.base, half, &err);
    CU_ASSERT_FATAL(rr != NULL);
    lr = rr->list_system_uids;
    uint16_t hs;
    const uint8_t *suffix;
    size_t sl;
    CU_ASSERT(slot_list_cursor_decode(&lr->next_cursor, &hs, &suffix, &sl) == 0 && hs == 128 &&
              sl == 0);
    size_t low = 0;
    for (size_t i = 0; i < s.n; i++)
        low += s.hs[i] < 128;
    CU_ASSERT(lr->n_uids == low);
    for (size_t i = 0; i < lr->n_uids; i++)
        CU_ASSERT(route_hash_slot(lr->uids[i], strlen(lr->uids[i])) < 128);
    FREE_READ(rr);
    /* Bad input names the field and the limit; nothing stored changes. */
    uint64_t before = keyspace_digest();
    q.limit = SLOT_PAGE_MAX + 1;
    CU_ASSERT(query(Q(LIST_SYSTEM_UIDS), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_system_uids.limit") == 0 && err.limit == SLOT_PAGE_MAX);
    uint8_t junk[9] = {2, 0, 0, 0, 0, 0x01, 0x00, 'x', 'y'}; /* hash slot 256, bad crc */
    q.limit = 0;
    q.cursor.data = junk;
    q.cursor.len = sizeof(junk);
    CU_ASSERT(query(Q(LIST_SYSTEM_UIDS), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_system_uids.cursor") == 0);
    CU_ASSERT(keyspace_digest() == before);
    teardown();
}

static void test_list_channels(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    char id[16];
    for (int i = 0; i < 30; i++) {
        Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
        snprintf(id, sizeof(id), "%s-%02d", i % 3 == 0 ? "room" : "chat", i);
        cc.channel_id = id;
        cc.channel_type = i % 2 ? 1 : 2;
        ok(P(CREATE_CHANNEL), &cc.base, &r);
        FREE_RESP(r);
    }
    Slotd__V1__ListChannelsQuery q = SLOTD__V1__LIST_CHANNELS_QUERY__INIT;
    struct seen s = {0};
    int pages;
    q.limit = 4;
    CU_ASSERT(page_all(Q(LIST_CHANNELS), &q.base, gs.owned, 4, seen_channel, &s, &pages) == 30);
    check_span_order(&s);
    memset(&s, 0, sizeof(s));
    q.id_prefix = "room"; /* ids 0, 3, ..., 27 */
    CU_ASSERT(page_all(Q(LIST_CHANNELS), &q.base, gs.owned, 4, seen_channel, &s, &pages) == 10);
    for (size_t i = 0; i < s.n; i++)
        CU_ASSERT(strncmp(s.ids[i], "room-", 5) == 0);
    memset(&s, 0, sizeof(s));
    q.channel_type = 1; /* and odd */
    CU_ASSERT(page_all(Q(LIST_CHANNELS), &q.base, gs.owned, 0, seen_channel, &s, &pages) == 5);
    for (size_t i = 0; i < s.n; i++)
        CU_ASSERT(strncmp(s.ids[i], "room-", 5) == 0 && strcmp(s.ids[i] + 7, "/1") == 0);
    /* Bad input. */
    struct slotd_error err;
    uint64_t before = keyspace_digest();
    q.channel_type = 256;
    CU_ASSERT(query(Q(LIST_CHANNELS), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_channels.channel_type") == 0 && err.limit == 255);
    char longp[SLOT_CHANNEL_ID_MAX + 2];
    memset(longp, 'p', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    q.channel_type = 0;
    q.id_prefix = longp;
    CU_ASSERT(query(Q(LIST_CHANNELS), &q.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_channels.id_prefix") == 0 &&
              err.limit == SLOT_CHANNEL_ID_MAX);
    CU_ASSERT(keyspace_digest() == before);
    teardown();
}

/* A group page visits at most SLOT_LIST_SCAN_ROWS_MAX rows: a filter that matches nothing
 * still ends each page with a cursor where it stopped. */
static void test_list_scan_bound(void)
{
    setup();
    in_batch = true;
    slot_fsm_begin(fsm);
    char id[24];
    for (unsigned i = 0; i < SLOT_LIST_SCAN_ROWS_MAX + 50; i++) {
        Slotd__V1__ProposeResponse *r;
        Slotd__V1__CreateChannelCommand cc = SLOTD__V1__CREATE_CHANNEL_COMMAND__INIT;
        snprintf(id, sizeof(id), "scan-%05u", i);
        cc.channel_id = id;
        cc.channel_type = 2;
        ok(P(CREATE_CHANNEL), &cc.base, &r);
        FREE_RESP(r);
    }
    CU_ASSERT_FATAL(slot_fsm_commit(fsm) == 0);
    in_batch = false;
    Slotd__V1__ListChannelsQuery q = SLOTD__V1__LIST_CHANNELS_QUERY__INIT;
    q.id_prefix = "none-";
    struct slotd_error err;
    Slotd__V1__ReadResponse *rr = query_owned(Q(LIST_CHANNELS), &q.base, gs.owned, &err);
    CU_ASSERT_FATAL(rr != NULL);
    CU_ASSERT(rr->list_channels->n_channels == 0 && rr->list_channels->next_cursor.len > 0);
    FREE_READ(rr);
    struct seen s = {0};
    int pages;
    CU_ASSERT(page_all(Q(LIST_CHANNELS), &q.base, gs.owned, 0, seen_channel, &s, &pages) == 0);
    CU_ASSERT(pages == 2);
    teardown();
}

static void runtime_meta(const char *ch, uint64_t leader)
{
    Slotd__V1__ProposeResponse *r;
    uint64_t replicas[2] = {leader, leader + 10};
    Slotd__V1__ChannelRuntimeMeta m = SLOTD__V1__CHANNEL_RUNTIME_META__INIT;
    m.leader = leader;
    m.n_replicas = 2;
    m.replicas = replicas;
    Slotd__V1__UpdateRuntimeMetaCommand u = SLOTD__V1__UPDATE_RUNTIME_META_COMMAND__INIT;
    u.channel_id = (char *)ch;
    u.channel_type = 2;
    u.meta = &m;
    ok(P(UPDATE_RUNTIME_META), &u.base, &r);
    FREE_RESP(r);
}

static void seen_meta(void *ctx, const void *e)
{
    const Slotd__V1__RuntimeMetaEntry *m = e;
    char id[40];
    snprintf(id, sizeof(id), "%s/%u/%llu", m->channel_id, m->channel_type,
             (unsigned long long)m->meta->leader);
    seen_str(ctx, id);
    ((struct seen *)ctx)->hs[((struct seen *)ctx)->n - 1] =
        route_hash_slot(m->channel_id, strlen(m->channel_id));
}

static void seen_task(void *ctx, const void *e)
{
    const Slotd__V1__ChannelMigrationTask *t = e;
    char id[40];
    snprintf(id, sizeof(id), "%s/%llu/%d", t->channel_id, (unsigned long long)t->task_id,
             (int)t->status);
    seen_str(ctx, id);
    ((struct seen *)ctx)->hs[((struct seen *)ctx)->n - 1] =
        route_hash_slot(t->channel_id, strlen(t->channel_id));
}

static void test_list_runtime_meta_and_tasks(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    char id[16];
    for (int i = 0; i < 12; i++) {
        snprintf(id, sizeof(id), "rt-%02d", i);
        runtime_meta(id, i % 3 == 0 ? 7 : 8);
        Slotd__V1__ChannelMigrationTask t = SLOTD__V1__CHANNEL_MIGRATION_TASK__INIT;
        Slotd__V1__PutMigrationTaskCommand pt = SLOTD__V1__PUT_MIGRATION_TASK_COMMAND__INIT;
        t.channel_id = id;
        t.channel_type = 2;
        t.source_node = 1;
        t.target_node = 2;
        pt.task = &t;
        for (uint64_t task = 1; task <= 2; task++) { /* task 2 of every fourth channel runs */
            t.task_id = task;
            t.status = task == 2 && i % 4 == 0
                           ? SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_RUNNING
                           : SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING;
            ok(P(PUT_MIGRATION_TASK), &pt.base, &r);
            FREE_RESP(r);
        }
    }
    Slotd__V1__ListRuntimeMetaQuery mq = SLOTD__V1__LIST_RUNTIME_META_QUERY__INIT;
    struct seen s = {0};
    int pages;
    mq.leader = 7;
    mq.limit = 3;
    CU_ASSERT(page_all(Q(LIST_RUNTIME_META), &mq.base, gs.owned, 3, seen_meta, &s, &pages) == 4);
    check_span_order(&s);
    for (size_t i = 0; i < s.n; i++) /* rt-00, 03, 06, 09: type 2, leader 7 */
        CU_ASSERT(strstr(s.ids[i], "/2/7") != NULL && (s.ids[i][4] - '0') % 3 == 0);
    memset(&s, 0, sizeof(s));
    mq.leader = 0; /* every channel's */
    CU_ASSERT(page_all(Q(LIST_RUNTIME_META), &mq.base, gs.owned, 3, seen_meta, &s, &pages) == 12);
    /* Every channel's running tasks (spans hash slots), then one channel's by status. */
    Slotd__V1__ListMigrationTasksQuery tq = SLOTD__V1__LIST_MIGRATION_TASKS_QUERY__INIT;
    tq.channel_id = "";
    tq.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_RUNNING;
    tq.limit = 2;
    memset(&s, 0, sizeof(s));
    CU_ASSERT(page_all(Q(LIST_MIGRATION_TASKS), &tq.base, gs.owned, 2, seen_task, &s, &pages) == 3);
    check_span_order(&s);
    for (size_t i = 0; i < s.n; i++)
        CU_ASSERT(strstr(s.ids[i], "/2/2") != NULL);
    tq.status = 0;
    memset(&s, 0, sizeof(s));
    CU_ASSERT(page_all(Q(LIST_MIGRATION_TASKS), &tq.base, gs.owned, 2, seen_task, &s, &pages) ==
              24);
    tq.channel_id = "rt-04";
    tq.channel_type = 2;
    tq.status = SLOTD__V1__MIGRATION_STATUS__MIGRATION_STATUS_PENDING;
    memset(&s, 0, sizeof(s));
    CU_ASSERT(page_all(Q(LIST_MIGRATION_TASKS), &tq.base, NULL, 2, seen_task, &s, &pages) == 1);
    CU_ASSERT(strcmp(s.ids[0], "rt-04/1/1") == 0);
    /* Bad input. */
    struct slotd_error err;
    uint64_t before = keyspace_digest();
    tq.status = (Slotd__V1__MigrationStatus)9;
    CU_ASSERT(query(Q(LIST_MIGRATION_TASKS), &tq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_migration_tasks.status") == 0 && err.limit == 4);
    tq.status = 0;
    tq.channel_id = "";
    CU_ASSERT(query(Q(LIST_MIGRATION_TASKS), &tq.base, &err) == NULL); /* a type without an id */
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_migration_tasks.channel_type") == 0 && err.limit == 0);
    mq.limit = SLOT_PAGE_MAX + 1;
    CU_ASSERT(query(Q(LIST_RUNTIME_META), &mq.base, &err) == NULL);
    CU_ASSERT(err.code == SLOTD_EINVALID_FIELD &&
              strcmp(err.field, "list_runtime_meta.limit") == 0 && err.limit == SLOT_PAGE_MAX);
    CU_ASSERT(keyspace_digest() == before);
    teardown();
}

static void seen_event(void *ctx, const void *e)
{
    char id[24];
    snprintf(id, sizeof(id), "%llu",
             (unsigned long long)((const Slotd__V1__ChannelEvent *)e)->event_seq);
    seen_str(ctx, id);
}

/* Events after a sequence, newest first; a page also stops at SLOT_LIST_PAGE_BYTES. */
static void test_list_events_after(void)
{
    setup();
    Slotd__V1__ProposeResponse *r;
    create_channel("evb", 600);
    static uint8_t payload[SLOT_EVENT_PAYLOAD_MAX];
    memset(payload, 'x', sizeof(payload));
    for (int i = 1; i <= 300; i++) {
        Slotd__V1__AppendEventCommand a = SLOTD__V1__APPEND_EVENT_COMMAND__INIT;
        a.channel_id = "evb";
        a.channel_type = 2;
        a.message_seq = (uint64_t)i;
        a.event_type = "m";
        a.payload.data = payload;
        a.payload.len = sizeof(payload);
        ok(P(APPEND_EVENT), &a.base, &r);
        FREE_RESP(r);
    }
    Slotd__V1__ListEventsQuery q = SLOTD__V1__LIST_EVENTS_QUERY__INIT;
    q.channel_id = "evb";
    q.channel_type = 2;
    q.after_seq = 297;
    Slotd__V1__ReadResponse *rr;
    const Slotd__V1__ListEventsResult *lr = qok(Q(LIST_EVENTS), &q.base, &rr);
    CU_ASSERT(lr->n_events == 3 && lr->next_cursor.len == 0);
    CU_ASSERT(lr->n_events == 3 && lr->events[0]->event_seq == 300 &&
              lr->events[2]->event_seq == 298);
    FREE_READ(rr);
    /* 300 events of 4 KiB: a page of limit 1000 stops near 1 MiB; pages go on without overlap. */
    q.after_seq = 0;
    q.limit = 1000;
    lr = qok(Q(LIST_EVENTS), &q.base, &rr);
    size_t first = lr->n_events;
    CU_ASSERT(first > 200 && first < 256 && lr->next_cursor.len > 0);
    FREE_READ(rr);
    struct seen s = {0};
    int pages;
    q.after_seq = 250;
    q.limit = 20;
    CU_ASSERT(page_all(Q(LIST_EVENTS), &q.base, NULL, 20, seen_event, &s, &pages) == 50);
    CU_ASSERT(pages == 3);
    for (size_t i = 0; i < s.n; i++)
        CU_ASSERT(strtoull(s.ids[i], NULL, 10) == 300 - i);
    teardown();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("slot_meta", NULL, NULL);
    CU_add_test(s, "users", test_users);
    CU_add_test(s, "devices_system_uids", test_devices_system_uids);
    CU_add_test(s, "channels", test_channels);
    CU_add_test(s, "subscribers", test_subscribers);
    CU_add_test(s, "typed row events", test_typed_events);
    CU_add_test(s, "allow_deny_lists", test_allow_deny_lists);
    CU_add_test(s, "cursors_limits_enums", test_cursors);
    CU_add_test(s, "memberships_conversations", test_memberships);
    CU_add_test(s, "same_batch_visibility", test_same_batch);
    CU_add_test(s, "cmd_bindings", test_cmd_bindings);
    CU_add_test(s, "runtime_meta_cas", test_runtime_meta);
    CU_add_test(s, "runtime_meta_invalid", test_runtime_meta_invalid);
    CU_add_test(s, "runtime_meta_rules", test_runtime_meta_rules);
    CU_add_test(s, "channel_type_isolation", test_channel_type_isolation);
    CU_add_test(s, "delete_user", test_delete_user);
    CU_add_test(s, "delete_channel", test_delete_channel);
    CU_add_test(s, "migration_tasks", test_migration_tasks);
    CU_add_test(s, "plugin_bindings", test_plugins);
    CU_add_test(s, "event_projection", test_events);
    CU_add_test(s, "encoding_and_dedupe", test_encoding_and_dedupe);
    CU_add_test(s, "list_devices", test_list_devices);
    CU_add_test(s, "list_system_uids_spans", test_list_system_uids);
    CU_add_test(s, "list_channels_prefix_type", test_list_channels);
    CU_add_test(s, "list_scan_bound", test_list_scan_bound);
    CU_add_test(s, "list_runtime_meta_and_tasks", test_list_runtime_meta_and_tasks);
    CU_add_test(s, "list_events_after_and_bytes", test_list_events_after);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed() + CU_get_number_of_failures();
    CU_cleanup_registry();
    return failed != 0;
}
