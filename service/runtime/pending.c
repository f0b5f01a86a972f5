/* pending.c - a group's proposals waiting for their index to commit: kept in index order and
 * sorted into "ours", "certainly lost" and "outcome unknown" as committed entries arrive. */
#include "service/runtime/pending.h"

/* Usually the new proposal goes last. A leader re-elected after a newer leader cut its log back
 * appends below proposals of its earlier term that are still undecided (they may yet commit
 * through another node): it goes before them, after any at its own index. */
void rt_pending_add(struct rt_list *l, struct rt_request *r)
{
    if (l->tail == NULL || l->tail->index <= r->index) {
        rt_list_push(l, r);
        return;
    }
    struct rt_request **pp = &l->head;
    while ((*pp)->index <= r->index)
        pp = &(*pp)->next;
    r->next = *pp;
    *pp = r;
    l->len++;
}

struct rt_request *rt_pending_match(struct rt_list *l, uint64_t index, uint64_t term,
                                    struct rt_list *lost, struct rt_list *unknown)
{
    struct rt_request *match = NULL;
    while (l->head != NULL && l->head->index <= index) {
        struct rt_request *p = rt_list_pop(l);
        if (p->index < index)
            rt_list_push(unknown, p); /* its index was never seen committed here */
        else if (p->term == term && match == NULL)
            match = p;
        else
            rt_list_push(lost, p); /* another entry committed at its index */
    }
    return match;
}

void rt_pending_passed(struct rt_list *l, uint64_t index, struct rt_list *unknown)
{
    while (l->head != NULL && l->head->index <= index)
        rt_list_push(unknown, rt_list_pop(l));
}
