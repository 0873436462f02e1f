/*  reload - a reload applied to the running hub: each configured consumer
    matched by name against the running table; a changed one gets a new
    instance beside the old (plugin loaded, init called), the enqueuer
    takes the new routing between two messages, and the lineages follow
    under the hub's lock. A reload that fails leaves the hub as it was.
    `fanhub restart` is such a reload of the running configuration with
    one consumer taken as changed (fh_hub_restart).
    See hub.h (fh_hub_reload) and lineage.h.
*/
#include "hub_internal.h"

#include "log.h"
#include "reload_init.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a reload is loading (its plugin's init may take long), for
   fh_hub_loading. */
static void
s_note_loading (fh_hub_t *self, const fh_consumer_config_t *consumer)
{
    pthread_mutex_lock (&self->lock);
    if (consumer)
        snprintf (self->loading, sizeof self->loading, "consumer '%s', plugin %s", consumer->name,
                  consumer->plugin);
    else
        self->loading[0] = '\0';
    pthread_mutex_unlock (&self->lock);
}

void
fh_hub_loading (fh_hub_t *self, char *what, size_t size)
{
    pthread_mutex_lock (&self->lock);
    snprintf (what, size, "%s", self->loading);
    pthread_mutex_unlock (&self->lock);
}

/* A reload in the making: the new table, matched by name against the
   running one. */
typedef struct {
    fh_config_t *config;
    fh_hub_ref_t *ref;
    size_t count;
    fh_consumer_t **consumers; /* the new table's instances */
    fh_lineage_t **lines;      /* new consumers' lineages (others: at commit) */
    size_t *was;               /* index in the old table, or SIZE_MAX */
    bool *fresh;               /* instance made by this reload */
    bool *kept;                /* by old index: not removed */
    fh_consumer_t **fold_from; /* a waiting instance the new one replaces */
    bool *folded;              /* ... whose messages the new one took */
    fh_trigger_t *trigger;
    const char *restart; /* fh_hub_restart: the consumer made anew, else NULL */
} s_reload_t;

static void
s_reload_free (s_reload_t *r)
{
    free (r->consumers);
    free (r->lines);
    free (r->was);
    free (r->fresh);
    free (r->kept);
    free (r->fold_from);
    free (r->folded);
    fh_trigger_destroy (&r->trigger);
}

/* Matches each configured consumer by name: the same settings keep the
   running instance; others get a new instance (a new lineage when the
   name is new), made here: plugin loaded, init called. -1 with err. */
static int
s_reload_make (fh_hub_t *self, s_reload_t *r, char *err, size_t errlen)
{
    const fh_config_t *old = self->config;
    for (size_t i = 0; i < r->count; i++) {
        const fh_consumer_config_t *want = &r->config->consumers[i];
        r->was[i] = SIZE_MAX;
        for (size_t j = 0; j < self->consumer_count; j++)
            if (strcmp (fh_lineage_name (self->lines[j]), want->name) == 0)
                r->was[i] = j;
        bool same = r->was[i] != SIZE_MAX
                    && fh_config_consumer_same (&old->consumers[r->was[i]], want)
                    && !(r->restart && strcmp (r->restart, want->name) == 0);
        if (same) {
            r->consumers[i] = self->consumers[r->was[i]];
            r->kept[r->was[i]] = true;
        }
        else {
            /* Its init on a thread of its own, waited for at most
               shutdown_timeout: one that hangs is abandoned, the reload
               refused (reload_init.h). */
            s_note_loading (self, want);
            fh_reload_init_outcome_t outcome;
            r->consumers[i] = fh_reload_init_run (
                want, i, self->plugin_dir, r->config->shutdown_timeout_ms, fh_hub_ref_take (r->ref),
                fh_hub_ref_release, &outcome, err, errlen);
            s_note_loading (self, NULL);
            if (!r->consumers[i])
                return outcome == FH_RELOAD_INIT_ABANDONED ? -2 : -1;
            fh_consumer_set_ticket_grace (r->consumers[i],
                                          r->config->shutdown_timeout_ms * 1000000);
            r->fresh[i] = true;
            /* A replacement opens its state (the spool its predecessor
               holds) when it starts, after the predecessor is gone. */
            if (r->was[i] != SIZE_MAX) {
                r->kept[r->was[i]] = true; /* replaced at commit, not removed */
                r->fold_from[i] = fh_lineage_waiting (self->lines[r->was[i]]);
                /* It takes a spilling predecessor's spool over: marked so
                   before the enqueuer sees it, so that what is offered to
                   it between the swap and the commit goes onto that spool,
                   never into its memory queue, where it would wait (not
                   on disk, out of order) until its turn comes, behind
                   every instance of the hand-over line. The commit marks
                   it again (fh_lineage_replace), with the same one. */
                fh_consumer_t *newest = fh_lineage_current (self->lines[r->was[i]]);
                if (r->config->state_dir && newest
                    && fh_consumer_overflow (newest) == FH_OVERFLOW_SPILL)
                    fh_consumer_inherit_spool (r->consumers[i], newest);
            }
        }
        if (fh_hub_trigger_add (r->trigger, i, want) != 0) {
            snprintf (err, errlen, "out of memory");
            return -1;
        }
    }
    /* The lineages of new consumers, before the enqueuer sees them. */
    for (size_t i = 0; i < r->count; i++)
        if (r->fresh[i] && r->was[i] == SIZE_MAX) {
            r->lines[i] = fh_lineage_new (r->consumers[i], r->config, fh_hub_ref_take (r->ref),
                                          fh_hub_ref_release);
            r->consumers[i] = NULL; /* the lineage has it (or destroyed it) */
            if (!r->lines[i]) {
                snprintf (err, errlen, "out of memory");
                return -1;
            }
            r->consumers[i] = fh_lineage_current (r->lines[i]);
            if (fh_lineage_start (r->lines[i], err, errlen) != 0)
                return -1;
        }
    return 0;
}

/* A reload that failed: what it made goes, the running hub is as it was. */
static void
s_reload_undo (s_reload_t *r)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->lines && r->lines[i]) {
            fh_lineage_close (r->lines[i]);
            fh_lineage_destroy (&r->lines[i]);
        }
        else if (r->fresh && r->fresh[i] && r->consumers[i]) {
            fh_consumer_close (r->consumers[i]);
            fh_consumer_destroy (&r->consumers[i]);
        }
    s_reload_free (r);
    if (r->ref)
        fh_hub_ref_release (r->ref);
    else
        fh_config_destroy (&r->config);
}

/* The enqueuer routes by the new table now: the lineages follow, under
   the lock, so that readers see them and the configuration change
   together. Removed consumers go to the gone list (they finish what they
   hold), replaced ones get their new instance appended. */
static void
s_reload_commit (fh_hub_t *self, s_reload_t *r)
{
    pthread_mutex_lock (&self->lock);
    fh_lineage_t **gone
        = realloc (self->gone, (self->gone_count + self->consumer_count + 1) * sizeof *gone);
    assert (gone); /* a few pointers: treated as fatal */
    self->gone = gone;
    for (size_t j = 0; j < self->consumer_count; j++)
        if (!r->kept[j]) {
            fh_info ("consumer '%s': removed by the reload; it finishes its queue",
                     fh_lineage_name (self->lines[j]));
            fh_lineage_remove (self->lines[j]);
            self->gone[self->gone_count++] = self->lines[j];
        }
    for (size_t i = 0; i < r->count; i++) {
        if (r->was[i] == SIZE_MAX) {
            fh_info ("consumer '%s': added by the reload", fh_lineage_name (r->lines[i]));
            continue;
        }
        r->lines[i] = self->lines[r->was[i]];
        if (r->fresh[i]) {
            fh_info ("consumer '%s': changed by the reload; the new instance starts once the "
                     "old one has consumed what it holds",
                     fh_lineage_name (r->lines[i]));
            int replaced = fh_lineage_replace (r->lines[i], r->consumers[i], r->config,
                                               fh_hub_ref_take (r->ref), r->folded[i]);
            assert (replaced == 0); /* a few pointers: treated as fatal */
            (void) replaced;
        }
        else /* kept: its live settings follow the file */
            fh_consumer_set_warn_at (r->consumers[i], r->config->consumers[i].warn_at);
        fh_consumer_set_index (r->consumers[i], i);
    }
    free (self->lines);
    self->lines = r->lines;
    r->lines = NULL;
    free (self->consumers);
    self->consumers = r->consumers;
    r->consumers = NULL;
    self->consumer_count = r->count;
    fh_trigger_destroy (&self->trigger);
    self->trigger = r->trigger;
    r->trigger = NULL;
    fh_hub_ref_release (self->config_ref);
    self->config_ref = r->ref;
    self->config = r->config;
    self->generation++;
    pthread_mutex_unlock (&self->lock);
    s_reload_free (r);
}

/* The consumers this reload made that are not up once their init
   returned, into down; how many. */
static int
s_reload_down (const s_reload_t *r, char *down, size_t downlen)
{
    int count = 0;
    size_t used = 0;
    if (downlen)
        down[0] = '\0';
    for (size_t i = 0; i < r->count; i++) {
        if (!r->fresh[i])
            continue;
        int state = fh_consumer_plugin_state (r->consumers[i]);
        if (state == FANHUB_STATE_UP)
            continue;
        char why[256];
        fh_consumer_last_error (r->consumers[i], why, sizeof why);
        count++;
        if (used < downlen) {
            int n = snprintf (down + used, downlen - used, "%sconsumer '%s' is %s: %s",
                              used ? "; " : "", r->config->consumers[i].name,
                              state == FANHUB_STATE_HALTED ? "halted" : "down",
                              why[0] ? why : "(its plugin gave no reason)");
            used += n > 0 ? (size_t) n : 0;
        }
    }
    return count;
}

/* Makes, swaps in and commits r (config and ref set): 0 or more down,
   or -1 with err and nothing changed (-2: because an init was abandoned). */
static int
s_reload_run (fh_hub_t *self, s_reload_t *r, char *err, size_t errlen, char *down, size_t downlen)
{
    r->consumers = calloc (r->count, sizeof *r->consumers);
    r->lines = calloc (r->count, sizeof *r->lines);
    r->was = calloc (r->count, sizeof *r->was);
    r->fresh = calloc (r->count, sizeof *r->fresh);
    r->kept = calloc (self->consumer_count + 1, sizeof *r->kept);
    r->fold_from = calloc (r->count, sizeof *r->fold_from);
    r->folded = calloc (r->count, sizeof *r->folded);
    r->trigger = fh_trigger_new (r->count);
    int rc = r->ref && r->consumers && r->lines && r->was && r->fresh && r->kept && r->fold_from
                     && r->folded && r->trigger
                 ? 0
                 : -1;
    if (rc != 0)
        snprintf (err, errlen, "out of memory");
    if (rc == 0)
        rc = s_reload_make (self, r, err, errlen);
    if (rc == 0) {
        fh_trigger_seal (r->trigger);
        /* The signature files are read again (a new CRL); if they no
           longer load, the reload is refused before anything changed. A
           restart reads no file. */
        if (self->enqueuer && !r->restart)
            rc = fh_enqueuer_reload_signatures (self->enqueuer, r->config, err, errlen);
        if (rc == 0 && self->enqueuer)
            rc = fh_enqueuer_swap (self->enqueuer, r->trigger, r->consumers, r->count, r->fold_from,
                                   r->folded, err, errlen);
    }
    if (rc != 0) {
        s_reload_undo (r);
        return rc == -2 ? -2 : -1;
    }
    int count = s_reload_down (r, down, downlen);
    s_reload_commit (self, r);
    return count;
}

int
fh_hub_reload (fh_hub_t *self, fh_config_t *config, char *err, size_t errlen, char *down,
               size_t downlen)
{
    /* Every key that differs is applied below, or it needs a restart. */
    char keys[512];
    if (fh_config_restart_keys (self->config, config, keys, sizeof keys) > 0) {
        snprintf (err, errlen, "%s need%s a restart", keys, strchr (keys, ',') ? "" : "s");
        fh_config_destroy (&config);
        return -1;
    }
    s_reload_t r = {.config = config, .count = config->consumer_count};
    r.ref = fh_hub_ref_new (config, true);
    return s_reload_run (self, &r, err, errlen, down, downlen);
}

int
fh_hub_restart (fh_hub_t *self, const char *name, char *err, size_t errlen, char *down,
                size_t downlen)
{
    bool found = false;
    for (size_t j = 0; j < self->consumer_count; j++)
        found = found || strcmp (fh_lineage_name (self->lines[j]), name) == 0;
    if (!found) {
        snprintf (err, errlen, "no consumer '%s' in this hub", name);
        return -1;
    }
    /* The running configuration again, with one more reference on it:
       the commit (or the undo) lets go of one. */
    s_reload_t r = {.config = (fh_config_t *) self->config, /* not changed */
                    .count = self->consumer_count,
                    .ref = self->config_ref,
                    .restart = name};
    fh_hub_ref_take (r.ref);
    return s_reload_run (self, &r, err, errlen, down, downlen);
}

uint64_t
fh_hub_restart_ask (fh_hub_t *self, const char *name)
{
    if (self->restart_name[0] || strlen (name) >= sizeof self->restart_name)
        return 0;
    snprintf (self->restart_name, sizeof self->restart_name, "%s", name);
    return ++self->restarts_asked;
}

bool
fh_hub_restart_take (fh_hub_t *self, char *name, size_t size)
{
    pthread_mutex_lock (&self->lock);
    bool asked = self->restart_name[0] != '\0';
    snprintf (name, size, "%s", self->restart_name);
    self->restart_name[0] = '\0';
    self->restart_taken = self->restarts_asked;
    pthread_mutex_unlock (&self->lock);
    return asked;
}

void
fh_hub_note_restart (fh_hub_t *self, const char *result)
{
    pthread_mutex_lock (&self->lock);
    snprintf (self->restart_result, sizeof self->restart_result, "%s", result);
    self->restarts_done = self->restart_taken;
    pthread_mutex_unlock (&self->lock);
}

uint64_t
fh_hub_restart_result (fh_hub_t *self, char *result, size_t size)
{
    snprintf (result, size, "%s", self->restart_result);
    return self->restarts_done;
}
