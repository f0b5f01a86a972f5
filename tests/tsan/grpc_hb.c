/* grpc_hb.c - teaches ThreadSanitizer gRPC's documented tag ordering (TSan builds only). */
/*
 * gRPC, gpr and Abseil are not built with -fsanitize=thread, so TSan cannot see the locks and
 * atomics inside them. The one ordering slotd relies on is gRPC's documented tag contract: what
 * a thread did before it handed tag T to gRPC (grpc_call_start_batch, grpc_server_request_call,
 * ...) happens before another thread gets the event carrying T back from
 * grpc_completion_queue_next / _pluck. Every TSan-built executable is linked with
 * -Wl,--wrap=<these functions> (top-level CMakeLists.txt), so each call from our code goes
 * through the wrappers below: __tsan_release(T) before the hand-off, __tsan_acquire(T) after
 * the event. Nothing else is modelled; the accesses gRPC itself makes are not recorded at all
 * (ignore_noninstrumented_modules=1, tests/tsan/README.md).
 */
#include <grpc/grpc.h>
#include <sanitizer/tsan_interface.h>

grpc_call_error __real_grpc_call_start_batch(grpc_call *call, const grpc_op *ops, size_t nops,
                                             void *tag, void *reserved);
grpc_call_error __real_grpc_server_request_call(grpc_server *server, grpc_call **call,
                                                grpc_call_details *details,
                                                grpc_metadata_array *request_metadata,
                                                grpc_completion_queue *cq_bound_to_call,
                                                grpc_completion_queue *cq_for_notification,
                                                void *tag_new);
grpc_call_error __real_grpc_server_request_registered_call(
    grpc_server *server, void *registered_method, grpc_call **call, gpr_timespec *deadline,
    grpc_metadata_array *request_metadata, grpc_byte_buffer **optional_payload,
    grpc_completion_queue *cq_bound_to_call, grpc_completion_queue *cq_for_notification,
    void *tag_new);
void __real_grpc_server_shutdown_and_notify(grpc_server *server, grpc_completion_queue *cq,
                                            void *tag);
void __real_grpc_channel_watch_connectivity_state(grpc_channel *channel,
                                                  grpc_connectivity_state last_observed_state,
                                                  gpr_timespec deadline, grpc_completion_queue *cq,
                                                  void *tag);
grpc_event __real_grpc_completion_queue_next(grpc_completion_queue *cq, gpr_timespec deadline,
                                             void *reserved);
grpc_event __real_grpc_completion_queue_pluck(grpc_completion_queue *cq, void *tag,
                                              gpr_timespec deadline, void *reserved);

grpc_call_error __wrap_grpc_call_start_batch(grpc_call *call, const grpc_op *ops, size_t nops,
                                             void *tag, void *reserved);
grpc_call_error __wrap_grpc_server_request_call(grpc_server *server, grpc_call **call,
                                                grpc_call_details *details,
                                                grpc_metadata_array *request_metadata,
                                                grpc_completion_queue *cq_bound_to_call,
                                                grpc_completion_queue *cq_for_notification,
                                                void *tag_new);
grpc_call_error __wrap_grpc_server_request_registered_call(
    grpc_server *server, void *registered_method, grpc_call **call, gpr_timespec *deadline,
    grpc_metadata_array *request_metadata, grpc_byte_buffer **optional_payload,
    grpc_completion_queue *cq_bound_to_call, grpc_completion_queue *cq_for_notification,
    void *tag_new);
void __wrap_grpc_server_shutdown_and_notify(grpc_server *server, grpc_completion_queue *cq,
                                            void *tag);
void __wrap_grpc_channel_watch_connectivity_state(grpc_channel *channel,
                                                  grpc_connectivity_state last_observed_state,
                                                  gpr_timespec deadline, grpc_completion_queue *cq,
                                                  void *tag);
grpc_event __wrap_grpc_completion_queue_next(grpc_completion_queue *cq, gpr_timespec deadline,
                                             void *reserved);
grpc_event __wrap_grpc_completion_queue_pluck(grpc_completion_queue *cq, void *tag,
                                              gpr_timespec deadline, void *reserved);

grpc_call_error __wrap_grpc_call_start_batch(grpc_call *call, const grpc_op *ops, size_t nops,
                                             void *tag, void *reserved)
{
    __tsan_release(tag);
    return __real_grpc_call_start_batch(call, ops, nops, tag, reserved);
}

grpc_call_error __wrap_grpc_server_request_call(grpc_server *server, grpc_call **call,
                                                grpc_call_details *details,
                                                grpc_metadata_array *request_metadata,
                                                grpc_completion_queue *cq_bound_to_call,
                                                grpc_completion_queue *cq_for_notification,
                                                void *tag_new)
{
    __tsan_release(tag_new);
    return __real_grpc_server_request_call(server, call, details, request_metadata,
                                           cq_bound_to_call, cq_for_notification, tag_new);
}

grpc_call_error __wrap_grpc_server_request_registered_call(
    grpc_server *server, void *registered_method, grpc_call **call, gpr_timespec *deadline,
    grpc_metadata_array *request_metadata, grpc_byte_buffer **optional_payload,
    grpc_completion_queue *cq_bound_to_call, grpc_completion_queue *cq_for_notification,
    void *tag_new)
{
    __tsan_release(tag_new);
    return __real_grpc_server_request_registered_call(
        server, registered_method, call, deadline, request_metadata, optional_payload,
        cq_bound_to_call, cq_for_notification, tag_new);
}

void __wrap_grpc_server_shutdown_and_notify(grpc_server *server, grpc_completion_queue *cq,
                                            void *tag)
{
    __tsan_release(tag);
    __real_grpc_server_shutdown_and_notify(server, cq, tag);
}

void __wrap_grpc_channel_watch_connectivity_state(grpc_channel *channel,
                                                  grpc_connectivity_state last_observed_state,
                                                  gpr_timespec deadline, grpc_completion_queue *cq,
                                                  void *tag)
{
    __tsan_release(tag);
    __real_grpc_channel_watch_connectivity_state(channel, last_observed_state, deadline, cq, tag);
}

grpc_event __wrap_grpc_completion_queue_next(grpc_completion_queue *cq, gpr_timespec deadline,
                                             void *reserved)
{
    grpc_event ev = __real_grpc_completion_queue_next(cq, deadline, reserved);
    if (ev.type == GRPC_OP_COMPLETE) {
        __tsan_acquire(ev.tag);
    }
    return ev;
}

grpc_event __wrap_grpc_completion_queue_pluck(grpc_completion_queue *cq, void *tag,
                                              gpr_timespec deadline, void *reserved)
{
    grpc_event ev = __real_grpc_completion_queue_pluck(cq, tag, deadline, reserved);
    if (ev.type == GRPC_OP_COMPLETE) {
        __tsan_acquire(ev.tag);
    }
    return ev;
}
