/*  lineage - one named consumer over the hub's life: the lifecycle of its
    instances across reloads, and its figures summed over them.

    A reload that changes a consumer's settings makes a new instance of it;
    the old one must first consume what it holds (its spool included), so
    for a while a name has several instances. They form a line, oldest
    first, and only the oldest ever runs:

        WAITING  made (plugin loaded, init done), queue filling; its
                 predecessors are not yet gone
        RUNNING  its threads consume (the newest instance, normally)
        DRAINING retired by a reload, or closed at shutdown: it consumes
                 what it holds and its threads end
        STOPPED  threads ended: folded into the figures and destroyed
                 (fini on a thread of its own), and the next starts

    A reload during a reload's drain appends, after folding a WAITING
    newest into its replacement (its queue moved over by the enqueuer):
    any sequence of reloads is a line of instances started one after
    another, each after the last one is gone, and at most one waits. Only the main thread changes a lineage, and it
    does so under the hub's lock; readers (the control actor) read under
    that lock.

    Figures are monotonic over the process: the counters and histograms of
    every instance that is gone are kept and added to those of the living,
    so a replaced consumer's counters never go back.
*/
#ifndef FH_LINEAGE_H_INCLUDED
#define FH_LINEAGE_H_INCLUDED

#include "config.h"
#include "consumer.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct fh_lineage fh_lineage_t;
/* What an instance was made from (the hub's reference on its
   configuration), handed back to `release` when the instance is gone. */
typedef void *fh_lineage_tag_t;

typedef enum { FH_STAGE_WAITING, FH_STAGE_RUNNING, FH_STAGE_DRAINING, FH_STAGE_STOPPED } fh_stage_t;

/* Takes first (made, not started, from config, which must live as long
   as the instance: tag is what keeps it, released with the instance).
   NULL when out of memory (first is destroyed, its tag released). */
fh_lineage_t *fh_lineage_new (fh_consumer_t *first, const fh_config_t *config, fh_lineage_tag_t tag,
                              void (*release) (fh_lineage_tag_t));
/* Destroys every instance (their threads must have ended or been
   abandoned). Safe with NULL and twice. */
void fh_lineage_destroy (fh_lineage_t **self_p);

const char *fh_lineage_name (const fh_lineage_t *self);
/* A number no other lineage of the process has had (from 1): a consumer
   removed and added again by reloads under its name is another one. */
uint64_t fh_lineage_serial (const fh_lineage_t *self);
/* The newest instance: the one the enqueuer routes to. NULL once every
   instance is gone (a removed consumer that finished). */
fh_consumer_t *fh_lineage_current (fh_lineage_t *self);
/* Instances alive, and those being torn down (fini on their own
   thread). */
size_t fh_lineage_instances (const fh_lineage_t *self);
/* Instances a reload replaced or removed that are still alive (every
   instance but the current one; all of a removed consumer's), with the
   messages they hold added to *backlog. Under the hub's lock. */
size_t fh_lineage_draining (fh_lineage_t *self, uint64_t *backlog);

/* Opens the oldest instance's state (spool, dead letters) now, before
   it starts (`fanhub check` does this much). -1 with one line in err. */
int fh_lineage_open_state (fh_lineage_t *self, char *err, size_t errlen);
/* Starts the oldest instance if it waits: opens its state if need be
   (with the configuration it was made from) (config's
   state_dir) and starts its threads. -1 with one line in err. */
int fh_lineage_start (fh_lineage_t *self, char *err, size_t errlen);
/* The newest instance when it never started (WAITING): what a reload
   may fold into its replacement. NULL otherwise. */
fh_consumer_t *fh_lineage_waiting (fh_lineage_t *self);
/* A reload replaces the newest instance by next (made, not started): the
   newest is retired (consumes everything, spool included, then ends).
   folded: the newest never started and the enqueuer moved what it held
   to next (fh_consumer_fold_into): it goes at once instead (its figures
   kept, the moved messages counted once), so a storm of reloads keeps at
   most one waiting instance. Under the hub's lock. */
int fh_lineage_replace (fh_lineage_t *self, fh_consumer_t *next, const fh_config_t *config,
                        fh_lineage_tag_t tag, bool folded);
/* A reload removed the consumer: the newest finishes its queue and ends. */
void fh_lineage_remove (fh_lineage_t *self);
/* Shutdown: the newest gets no more; it drains (spills) and ends. */
void fh_lineage_close (fh_lineage_t *self);

/* Shutdown, once every instance has drained: the next steps let the
   current instance go too. */
void fh_lineage_finish (fh_lineage_t *self);
/* Main thread: lets the oldest instances that stopped go (folding their
   figures in, under lock; each is destroyed, its plugin's fini called,
   on a thread of its own, so a fini that hangs holds no one) and starts
   the next; joins the teardowns that finished. Returns
   fh_lineage_instances. */
size_t fh_lineage_step (fh_lineage_t *self, pthread_mutex_t *lock);
/* True when every instance's threads have ended (or there is none). */
bool fh_lineage_ended (fh_lineage_t *self);
/* Gives up on running threads (the process is about to _exit); logs the
   instances still busy, and the teardowns whose fini has not returned,
   with why. */
void fh_lineage_abandon (fh_lineage_t *self, const char *why);
/* Calls fn on every started instance (stuck checks, spool ticks). */
void fh_lineage_each_started (fh_lineage_t *self, void (*fn) (fh_consumer_t *, int64_t),
                              int64_t now_ns);

/* Figures over every instance, gone and alive. capacity and workers are
   the newest instance's; backlog_max the highest seen. */
void fh_lineage_counts (fh_lineage_t *self, fh_consumer_counts_t *out);
void fh_lineage_latency (fh_lineage_t *self, fh_histogram_snapshot_t *queue_wait,
                         fh_histogram_snapshot_t *processing);
uint64_t fh_lineage_handled (fh_lineage_t *self, fh_histogram_snapshot_t *end_to_end);

#endif
