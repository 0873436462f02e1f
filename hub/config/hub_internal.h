/*  hub_internal - what the hub's files share: the running hub's struct
    and the reference on a configuration its instances hold.
      hub.c            the hub's life: start, steps, stop, figures
      reload.c         a reload applied: new instances beside the old, the
                       enqueuer's swap, the commit
    Only these files include this header; the rest of the hub uses hub.h.
*/
#ifndef FH_HUB_INTERNAL_H_INCLUDED
#define FH_HUB_INTERNAL_H_INCLUDED

#include "hub.h"
#include "lineage.h"
#include "trigger.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A configuration and the things made from it: the hub's current one,
   and every consumer instance (a plugin may keep pointers into its
   options). Freed when the last is gone, unless the caller owns it. */
typedef struct {
    fh_config_t *config;
    size_t refs;
    bool owned;
} fh_hub_ref_t;

struct fh_hub {
    const fh_config_t *config;
    fh_hub_ref_t *config_ref;
    /* One lineage per configured consumer, in configuration order, and
       their current instances (the enqueuer's table). */
    fh_lineage_t **lines;
    fh_consumer_t **consumers;
    size_t consumer_count;
    /* Consumers removed by a reload, still finishing; and what the
       removed ones that finished had handled. */
    fh_lineage_t **gone;
    size_t gone_count;
    uint64_t gone_handled;
    fh_histogram_snapshot_t *gone_end_to_end, *scratch;
    fh_trigger_t *trigger;
    fh_enqueuer_t *enqueuer;
    fh_source_amqp_t *amqp;    /* bus.amqp, or NULL */
    fh_source_amqp_t **fedora; /* by consumer at the start: a fedora_messaging
                                  consumer's own source, else NULL */
    size_t fedora_count;
    int64_t started_ns;
    bool started;
    bool stopped;
    char *plugin_dir;
    /* The main thread's: handled at the last tick, and at the last trim. */
    uint64_t tick_handled, trimmed_handled;
    /* Other threads read the lineages and the configuration under this
       lock; a reload or a lifecycle step changes them under it. */
    pthread_mutex_t lock;
    uint64_t generation;
    uint64_t reload_attempts;                /* under lock: reloads tried so far */
    atomic_uint_fast64_t control_denied;     /* control_curve handshakes refused */
    atomic_uint_fast64_t control_refused;    /* control connections shed */
    atomic_uint_fast64_t control_unanswered; /* answers the control socket could not send */
    uint64_t reloads_started;                /* under lock: ... and started */
    char reload_result[512];                 /* under lock: "OK ...", "DOWN ..." or "ERROR ..." */
    int64_t reload_wall_ns;                  /* under lock: when it ended (Unix) */
    char loading[512];                       /* under lock: the plugin a reload loads now */
    /* Under lock: the one restart asked (`fanhub restart`), by number;
       its name ("" once taken), and the last one's outcome. */
    uint64_t restarts_asked, restart_taken, restarts_done;
    char restart_name[256];
    char restart_result[512];
};

/* A new reference (refs 1) on config; owned: freed with the last. NULL
   when out of memory. */
fh_hub_ref_t *fh_hub_ref_new (const fh_config_t *config, bool owned);
/* One more reference, for an instance made from it. */
fh_lineage_tag_t fh_hub_ref_take (fh_hub_ref_t *ref);
/* Drops one (a lineage's release callback). Safe with NULL. */
void fh_hub_ref_release (fh_lineage_tag_t tag);
/* A consumer's patterns into trigger at index; none means every message.
   -1 when out of memory. */
int fh_hub_trigger_add (fh_trigger_t *trigger, size_t index, const fh_consumer_config_t *consumer);

#endif
