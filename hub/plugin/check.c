/*  check - `fanhub check` without side effects. See check.h. */
#include "check.h"

#include "consumer.h"
#include "deadletter.h"
#include "host.h"
#include "order_key.h"
#include "plugin.h"
#include "plugin_metrics.h"
#include "spool.h"

#include <fanhub/sdk.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static void s_note (fh_check_note_fn *note, void *arg, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_note (fh_check_note_fn *note, void *arg, const char *fmt, ...)
{
    char line[2048];
    va_list args;
    va_start (args, fmt);
    vsnprintf (line, sizeof line, fmt, args);
    va_end (args);
    if (note)
        note (arg, line);
}

int
fh_check_consumer (const fh_consumer_config_t *config, const char *plugin_dir,
                   fh_check_note_fn *note, void *note_arg, char *path, size_t pathlen, char *err,
                   size_t errlen)
{
    char why[1024];
    /* order_by is compiled only for a pool, as fh_consumer_new does. */
    if ((config->workers > 1 || config->coalesce) && config->order_by) {
        fh_order_key_t *key = fh_order_key_parse (config->order_by, why, sizeof why);
        if (!key) {
            snprintf (err, errlen, "%s: consumer '%s': order_by: %s", config->where, config->name,
                      why);
            return -1;
        }
        fh_order_key_destroy (&key);
    }
    fh_plugin_t *plugin = fh_plugin_load (config->plugin, plugin_dir, why, sizeof why);
    if (!plugin) {
        snprintf (err, errlen, "%s: consumer '%s': %s", config->where, config->name, why);
        return -1;
    }
    snprintf (path, pathlen, "%s", fh_plugin_path (plugin));
    const fanhub_consumer_desc_t *desc = fh_plugin_desc (plugin);
    if (fh_consumer_fits_plugin (&fh_host, config, desc, err, errlen) != 0) {
        fh_plugin_destroy (&plugin);
        return -1;
    }
    struct fanhub_ctx ctx = {.consumer_name = config->name, .desc = desc};
    fh_plugin_check_fn check = fh_plugin_check (plugin);
    int rc = 0;
    why[0] = '\0';
    if (check)
        rc = check (&fh_host, &ctx, config->options, why, sizeof why);
    else if (desc->init) {
        s_note (note, note_arg,
                "consumer '%s': plugin '%s' has no check callback (plugin ABI %u.%u): "
                "checked by its init and fini, which may act as at start",
                config->name, config->plugin, desc->abi_major, desc->abi_minor);
        void *state = NULL;
        rc = desc->init (&fh_host, &ctx, config->options, &state, why, sizeof why);
        if (rc == 0 && desc->fini)
            desc->fini (state);
    }
    fh_plugin_metrics_free (&ctx.metrics);
    if (rc != 0) {
        why[sizeof why - 1] = '\0';
        snprintf (err, errlen, "%s: consumer '%s': plugin '%s' refused its options: %s",
                  config->where, config->name, config->plugin,
                  why[0] ? why : "(the plugin gave no reason)");
        rc = -1;
    }
    fh_plugin_destroy (&plugin);
    return rc;
}

long
fh_check_flock_holder (const char *path)
{
    struct stat st;
    if (stat (path, &st) != 0)
        return 0;
    FILE *locks = fopen ("/proc/locks", "re");
    if (!locks)
        return 0;
    /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; blocked waiters
       ("1: -> FLOCK ...") hold nothing. */
    char line[512];
    long holder = 0;
    while (!holder && fgets (line, sizeof line, locks)) {
        char kind[16], mode[16], access[16];
        long pid;
        unsigned dev_major, dev_minor;
        uintmax_t inode;
        if (sscanf (line, "%*[^:]: %15s %15s %15s %ld %x:%x:%ju", kind, mode, access, &pid,
                    &dev_major, &dev_minor, &inode)
                == 7
            && strcmp (kind, "FLOCK") == 0 && dev_major == major (st.st_dev)
            && dev_minor == minor (st.st_dev) && inode == (uintmax_t) st.st_ino)
            holder = pid;
    }
    fclose (locks);
    return holder;
}

int
fh_check_state (const fh_config_t *config, const fh_consumer_config_t *consumer,
                fh_check_note_fn *note, void *note_arg, char *err, size_t errlen)
{
    if (!config->state_dir)
        return 0;
    const char *name = consumer->name;
    char dir[PATH_MAX], why[PATH_MAX + 256];
    snprintf (dir, sizeof dir, "%s/%s", config->state_dir, name);
    bool exists;
    if (fanhub_probe_directory (dir, &exists, why, sizeof why) != 0) {
        snprintf (err, errlen, "%s: consumer '%s': state_dir: cannot have %s: %s", consumer->where,
                  name, dir, why);
        return -1;
    }
    if (!exists) {
        s_note (note, note_arg, "consumer '%s': %s does not exist yet; run creates it", name, dir);
        return 0;
    }
    char sub[PATH_MAX + 64];
    snprintf (sub, sizeof sub, "%s/%s", dir, FH_DEADLETTER_SUBDIR);
    if (fanhub_probe_directory (sub, &exists, why, sizeof why) != 0) {
        snprintf (err, errlen, "%s: consumer '%s': dead-letter store: %s", consumer->where, name,
                  why);
        return -1;
    }
    snprintf (sub, sizeof sub, "%s/%s", dir, FH_SPOOL_LOCK_NAME);
    long holder = fh_check_flock_holder (sub);
    if (holder)
        s_note (note, note_arg,
                "consumer '%s': the spool %s is open in a running hub (pid %ld): "
                "another run would refuse it while that one runs",
                name, dir, holder);
    return 0;
}
