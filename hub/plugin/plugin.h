/*  plugin - finds, loads and checks a consumer plugin (a shared object).

    A plugin spec without a '/' names a shipped plugin: DIR/NAME.so, where
    DIR is the plugin directory (fh_plugin_dir). A spec with a '/' is a
    path. The object is opened with RTLD_NOW | RTLD_LOCAL, so a missing
    symbol fails at load and plugins never see each other's symbols; its
    entry function is called once and the descriptor it returns is checked
    (ABI major, minor and size, required functions) before use.
*/
#ifndef FH_PLUGIN_H_INCLUDED
#define FH_PLUGIN_H_INCLUDED

#include "fanhub/consumer.h"

#include <stddef.h>

typedef struct fh_plugin fh_plugin_t;

/* Loads spec. On error returns NULL with one line in err, e.g.
   "plugin 'lgo': /usr/lib/fanhub/plugins/lgo.so: cannot open shared
   object file: No such file or directory". */
fh_plugin_t *fh_plugin_load (const char *spec, const char *plugin_dir, char *err, size_t errlen);
/* dlcloses it. Safe with NULL and twice. */
void fh_plugin_destroy (fh_plugin_t **self_p);

const fanhub_consumer_desc_t *fh_plugin_desc (const fh_plugin_t *self);
const char *fh_plugin_path (const fh_plugin_t *self);

/* The plugin's check callback (ABI 1.1), or NULL when it has none: a 1.0
   plugin, whose descriptor is too short to hold one, or a 1.1 plugin that
   left it out. */
typedef int (*fh_plugin_check_fn) (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                                   const fanhub_option_t *options, char *err, size_t errlen);
fh_plugin_check_fn fh_plugin_check (const fh_plugin_t *self);
/* The descriptor's reopen (ABI 1.3), or NULL (an older plugin, or none). */
typedef void (*fh_plugin_reopen_fn) (void *state);
fh_plugin_reopen_fn fh_plugin_reopen (const fh_plugin_t *self);

/* The plugin directory: `override` when given, else $FANHUB_PLUGIN_DIR,
   else ../lib/fanhub/plugins beside the running executable when that
   exists (the build tree and the install tree both look so), else the
   directory compiled in from the install prefix. */
const char *fh_plugin_dir (const char *override);

#endif
