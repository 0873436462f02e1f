/*  reload_init - a reload's new instance made (its plugin loaded, its
    init called) on a thread of its own, waited for at most a bound.

    A plugin's init may hang. The reload, on the main thread, waits for it
    at most `limit_ms` (the configuration's shutdown_timeout, at least
    FH_RELOAD_INIT_MIN_MS), or until a stop signal comes
    (fh_consumer_stopping); past that it gives up: the init is abandoned,
    the reload is refused, and the old instance goes on. An abandoned init
    runs on unwatched. Should it return, its own thread discards what it
    made (fini called when init succeeded, logged); the configuration it
    was made from stays referenced until fh_reload_init_reap, on the main
    thread, joins that thread and lets go. Nothing of an abandoned
    instance is ever seen by the hub: no lineage, no routing, no state
    directory (a replacement opens its spool only when it starts).

    Main thread only, except the threads this module starts.
*/
#ifndef FH_RELOAD_INIT_H_INCLUDED
#define FH_RELOAD_INIT_H_INCLUDED

#include "config.h"
#include "consumer.h"
#include "lineage.h"

#include <stddef.h>
#include <stdint.h>

/* The least a reload waits for one init, whatever shutdown_timeout. */
#define FH_RELOAD_INIT_MIN_MS 1000

typedef enum {
    FH_RELOAD_INIT_DONE,      /* fh_consumer_new returned: the instance, or NULL with err */
    FH_RELOAD_INIT_ABANDONED, /* not within the bound, or a stop came: NULL, err says which */
} fh_reload_init_outcome_t;

/* fh_consumer_new (config, index, plugin_dir) on the thread "fh:init",
   waited for at most limit_ms. The instance (NULL with err set when
   fh_consumer_new failed or the init was abandoned) and in *outcome
   which. tag is held (release (tag) once the instance no longer needs
   config: at once, unless the init is abandoned; then at the reap after
   it returned). Without a thread, fh_consumer_new runs here, unbounded. */
fh_consumer_t *fh_reload_init_run (const fh_consumer_config_t *config, size_t index,
                                   const char *plugin_dir, int64_t limit_ms, fh_lineage_tag_t tag,
                                   void (*release) (fh_lineage_tag_t),
                                   fh_reload_init_outcome_t *outcome, char *err, size_t errlen);

/* Main thread: joins the abandoned inits that have returned since (their
   instances already discarded) and lets go of their configurations. How
   many are still inside their plugin's init. */
size_t fh_reload_init_reap (void);

/* The abandoned inits still running: how many, and the first's
   "consumer 'NAME', plugin PATH" in what. */
size_t fh_reload_init_outstanding (char *what, size_t size);

/* Abandoned inits so far, and those among them that returned later. */
uint64_t fh_reload_init_abandoned_total (void);
uint64_t fh_reload_init_returned_late (void);

#endif
