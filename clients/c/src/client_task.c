/* client_task.c - libslotd's slotd.v1.Metadata/TaskStatus: one controller task or the list. */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Error sentences and long names are cut to their fixed-size buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define TASK_METHOD_STATUS "/slotd.v1.Metadata/TaskStatus"

void slotd_task_list_destroy(struct slotd_task_list *l)
{
    if (!l)
        return;
    free(l->tasks);
    free(l->participants);
    free(l->hash_slots);
    free(l);
}

uint64_t slotd_task_list_revision(const struct slotd_task_list *l)
{
    return l->revision;
}

const char *slotd_task_list_source(const struct slotd_task_list *l)
{
    return l->source;
}

unsigned slotd_task_list_attempts(const struct slotd_task_list *l)
{
    return l->attempts;
}

size_t slotd_task_list_count(const struct slotd_task_list *l)
{
    return l->task_count;
}

const struct slotd_task *slotd_task_list_at(const struct slotd_task_list *l, size_t i)
{
    return i < l->task_count ? &l->tasks[i] : NULL;
}

bool slotd_task_finished(const struct slotd_task *t)
{
    return strcmp(t->status, "done") == 0 || strcmp(t->status, "failed") == 0;
}

/* Copies one Task into out; EMALFORMED with a sentence in msg when a bound is exceeded. */
/* participants and hash_slots: the storage out's arrays point at (SLOTD_TASK_PARTICIPANTS_MAX
 * and SLOTD_HASH_SLOTS entries). */
static int task_copy(const Slotd__V1__Task *m, struct slotd_task *out, uint64_t *participants,
                     uint32_t *hash_slots, char *msg, size_t msglen)
{
    if (m->n_participants > SLOTD_TASK_PARTICIPANTS_MAX) {
        snprintf(msg, msglen, "task %llu: %zu participants exceed %d",
                 (unsigned long long)m->task_id, m->n_participants, SLOTD_TASK_PARTICIPANTS_MAX);
        return SLOTD_CLIENT_EMALFORMED;
    }
    if (m->n_hash_slots > SLOTD_HASH_SLOTS) {
        snprintf(msg, msglen, "task %llu: %zu hash slots exceed %d", (unsigned long long)m->task_id,
                 m->n_hash_slots, SLOTD_HASH_SLOTS);
        return SLOTD_CLIENT_EMALFORMED;
    }
    memset(out, 0, sizeof(*out));
    out->task_id = m->task_id;
    snprintf(out->kind, sizeof(out->kind), "%s", m->kind ? m->kind : "");
    snprintf(out->status, sizeof(out->status), "%s", m->status ? m->status : "");
    snprintf(out->phase, sizeof(out->phase), "%s", m->phase ? m->phase : "");
    out->phase_index = m->phase_index;
    out->attempt = m->attempt;
    out->group_id = m->group_id;
    snprintf(out->last_error, sizeof(out->last_error), "%s", m->last_error ? m->last_error : "");
    out->source_node = m->source_node;
    out->target_node = m->target_node;
    for (size_t i = 0; i < m->n_participants; i++)
        participants[i] = m->participants[i];
    out->participants = participants;
    out->participant_count = m->n_participants;
    out->config_epoch = m->config_epoch;
    out->bytes_sent = m->bytes_sent;
    out->bytes_total = m->bytes_total;
    out->target_match = m->target_match;
    out->commit = m->commit;
    out->created_ms = m->created_ms;
    out->updated_ms = m->updated_ms;
    out->revision = m->revision;
    out->to_group = m->to_group;
    for (size_t i = 0; i < m->n_hash_slots; i++)
        hash_slots[i] = m->hash_slots[i];
    out->hash_slots = hash_slots;
    out->hash_slot_count = m->n_hash_slots;
    return SLOTD_CLIENT_OK;
}

int slotd__task_status_decode(const uint8_t *buf, size_t len, bool by_id,
                              struct slotd_task_list *out, struct slotd_status *st)
{
    int rc = SLOTD_CLIENT_EMALFORMED;
    Slotd__V1__TaskStatusResponse *m = slotd__v1__task_status_response__unpack(NULL, len, buf);
    if (!m) {
        snprintf(st->message, sizeof(st->message), "response is not a TaskStatusResponse");
        goto err_after_nothing;
    }
    size_t n = by_id ? (m->task ? 1 : 0) : m->n_tasks;
    if (by_id && !m->task) {
        snprintf(st->message, sizeof(st->message), "task: missing from the answer");
        goto err_after_unpack;
    }
    if (n > SLOTD_TASKS_MAX) {
        snprintf(st->message, sizeof(st->message), "tasks: %zu listed, more than %d", n,
                 SLOTD_TASKS_MAX);
        goto err_after_unpack;
    }
    out->tasks = n ? calloc(n, sizeof(*out->tasks)) : NULL;
    out->participants = n ? calloc(n, sizeof(*out->participants)) : NULL;
    out->hash_slots = n ? calloc(n, sizeof(*out->hash_slots)) : NULL;
    if (n && (!out->tasks || !out->participants || !out->hash_slots)) {
        rc = SLOTD_CLIENT_ENOMEM;
        snprintf(st->message, sizeof(st->message), "out of memory");
        goto err_after_tasks;
    }
    for (size_t i = 0; i < n; i++) {
        rc = task_copy(by_id ? m->task : m->tasks[i], &out->tasks[i], out->participants[i],
                       out->hash_slots[i], st->message, sizeof(st->message));
        if (rc != SLOTD_CLIENT_OK)
            goto err_after_tasks;
    }
    out->task_count = n;
    out->revision = m->revision;
    slotd__v1__task_status_response__free_unpacked(m, NULL);
    return SLOTD_CLIENT_OK;

err_after_tasks:
    free(out->tasks);
    free(out->participants);
    free(out->hash_slots);
    out->tasks = NULL;
    out->participants = NULL;
    out->hash_slots = NULL;
err_after_unpack:
    slotd__v1__task_status_response__free_unpacked(m, NULL);
err_after_nothing:
    return rc;
}

/* One TaskStatus answer into out (borrowed for the call); st describes a failure. */
static int task_status(struct slotd_client *c, uint64_t task_id, bool active_only,
                       struct slotd_task_list *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    Slotd__V1__TaskStatusRequest req = SLOTD__V1__TASK_STATUS_REQUEST__INIT;
    req.task_id = task_id;
    req.active_only = active_only;
    req.min_revision = slotd_client_last_revision(c);
    uint8_t buf[48];
    size_t len = slotd__v1__task_status_request__pack(&req, buf);
    uint8_t *body;
    size_t body_len;
    char source[SLOTD_ADDRESS_LEN + 1];
    int rc = slotd__call_endpoints(c, TASK_METHOD_STATUS, buf, len, false, &body, &body_len,
                                   &out->attempts, source, st);
    if (rc == SLOTD_CLIENT_OK) {
        rc = slotd__task_status_decode(body, body_len, task_id != 0, out, st);
        free(body);
    }
    if (rc == SLOTD_CLIENT_OK) {
        snprintf(out->source, sizeof(out->source), "%s", source);
        slotd_client_observe_revision(c, out->revision);
    }
    if (rc != SLOTD_CLIENT_OK) {
        char op[48];
        if (task_id)
            snprintf(op, sizeof(op), "task status %llu", (unsigned long long)task_id);
        else
            snprintf(op, sizeof(op), "task status%s", active_only ? " (active)" : "");
        slotd__admin_fail_text(op, rc, out->attempts, st);
    }
    return rc;
}

int slotd_client_task_status(struct slotd_client *c, uint64_t task_id, bool active_only,
                             struct slotd_task_list **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_task_list, "task status", slotd_task_list_destroy, out, err,
                       task_status(c, task_id, active_only, r, &st));
}
