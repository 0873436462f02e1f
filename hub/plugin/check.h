/*  check - what `fanhub check` verifies: everything `fanhub run` would
    refuse at start, found without touching the world.

    It binds and connects no socket, creates no file, directory or
    database, and takes no lock. A consumer's plugin is loaded and asked
    through its check callback (ABI 1.1); a plugin without one (ABI 1.0) is
    checked as before, by init then fini, since that is all it offers. The
    state directory is looked at, not made: a missing one is a note when run
    could create it, an error when it could not; a spool that a running hub
    holds is a note, since run would refuse it only while that hub runs.
*/
#ifndef FH_CHECK_H_INCLUDED
#define FH_CHECK_H_INCLUDED

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

/* Where notes go: one line each, without a newline. */
typedef void (fh_check_note_fn) (void *arg, const char *line);

/* Checks consumer `config` (one of the file's): its settings against its
   plugin, and the plugin's options. The plugin's path goes into path. 0,
   or -1 with one line in err naming the consumer. */
int fh_check_consumer (const fh_consumer_config_t *config, const char *plugin_dir,
                       fh_check_note_fn *note, void *note_arg, char *path, size_t pathlen,
                       char *err, size_t errlen);

/* Checks what run would open in state_dir for `consumer`: its spool and
   dead letters (STATE_DIR/NAME). 0 (nothing to do without state_dir), or
   -1 with one line in err. */
int fh_check_state (const fh_config_t *config, const fh_consumer_config_t *consumer,
                    fh_check_note_fn *note, void *note_arg, char *err, size_t errlen);

/* The pid of a process holding a flock(2) on path, from /proc/locks;
   0 when none does (or /proc/locks cannot be read). Takes no lock. */
long fh_check_flock_holder (const char *path);

#endif
