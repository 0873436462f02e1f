/*  plugin - finds, loads and checks a consumer plugin. See plugin.h. */
#include "plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fh_plugin {
    void *handle;
    const fanhub_consumer_desc_t *desc;
    char *path;
};

/* The descriptor as ABI 1.0 defined it: what every v1 plugin has. */
#define DESC_V1_0_SIZE (offsetof (fanhub_consumer_desc_t, fini) + sizeof (void *))

static bool
s_valid_name (const char *name)
{
    if (!*name)
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
              || *c == '_' || *c == '-'))
            return false;
    return true;
}

fh_plugin_t *
fh_plugin_load (const char *spec, const char *plugin_dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (strchr (spec, '/'))
        snprintf (path, sizeof path, "%s", spec);
    else if (!s_valid_name (spec)) {
        snprintf (err, errlen,
                  "plugin '%s': not a plugin name (letters, digits, '_', '-') "
                  "nor a path (with a '/')",
                  spec);
        return NULL;
    }
    else if ((size_t) snprintf (path, sizeof path, "%s/%s.so", plugin_dir, spec) >= sizeof path) {
        snprintf (err, errlen, "plugin '%s': path too long", spec);
        return NULL;
    }

    dlerror ();
    void *handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror ();
        /* dlerror already names the file; add where names are looked up. */
        if (!strchr (spec, '/'))
            snprintf (err, errlen,
                      "plugin '%s': %s (plugin directory %s; "
                      "set --plugin-dir or FANHUB_PLUGIN_DIR, or give a path)",
                      spec, why ? why : "cannot load", plugin_dir);
        else
            snprintf (err, errlen, "plugin '%s': %s", spec, why ? why : "cannot load");
        return NULL;
    }
    fanhub_consumer_entry_fn entry;
    /* POSIX guarantees a data pointer from dlsym converts to a function. */
    *(void **) &entry = dlsym (handle, FANHUB_CONSUMER_ENTRY_SYMBOL);
    const fanhub_consumer_desc_t *desc = entry ? entry () : NULL;
    const char *problem = NULL;
    char why[256];
    if (!entry)
        problem = "exports no " FANHUB_CONSUMER_ENTRY_SYMBOL
                  " (is it a fanhub plugin? build it with FANHUB_EXPORT)";
    else if (!desc)
        problem = FANHUB_CONSUMER_ENTRY_SYMBOL " returned NULL";
    else if (desc->abi_major != FANHUB_ABI_MAJOR || desc->abi_minor > FANHUB_ABI_MINOR) {
        snprintf (why, sizeof why,
                  "built for plugin ABI %u.%u, this hub speaks ABI %d.%d "
                  "(rebuild the plugin against this hub's fanhub/consumer.h)",
                  desc->abi_major, desc->abi_minor, FANHUB_ABI_MAJOR, FANHUB_ABI_MINOR);
        problem = why;
    }
    else if (desc->size < DESC_V1_0_SIZE) {
        snprintf (why, sizeof why, "descriptor of %zu bytes, ABI %d.%d needs at least %zu",
                  desc->size, FANHUB_ABI_MAJOR, FANHUB_ABI_MINOR, (size_t) DESC_V1_0_SIZE);
        problem = why;
    }
    else if (!desc->name || !*desc->name)
        problem = "descriptor has no name";
    else if (!desc->consume)
        problem = "descriptor has no consume function";
    if (problem) {
        snprintf (err, errlen, "plugin '%s': %s: %s", spec, path, problem);
        dlclose (handle);
        return NULL;
    }

    fh_plugin_t *self = calloc (1, sizeof *self);
    if (self)
        self->path = strdup (path);
    if (!self || !self->path) {
        free (self);
        dlclose (handle);
        snprintf (err, errlen, "plugin '%s': out of memory", spec);
        return NULL;
    }
    self->handle = handle;
    self->desc = desc;
    return self;
}

void
fh_plugin_destroy (fh_plugin_t **self_p)
{
    fh_plugin_t *self = *self_p;
    if (!self)
        return;
    dlclose (self->handle);
    free (self->path);
    free (self);
    *self_p = NULL;
}

const fanhub_consumer_desc_t *
fh_plugin_desc (const fh_plugin_t *self)
{
    return self->desc;
}

/* The descriptor up to and including check (ABI 1.1). */
#define DESC_CHECK_SIZE (offsetof (fanhub_consumer_desc_t, check) + sizeof (void *))

fh_plugin_check_fn
fh_plugin_check (const fh_plugin_t *self)
{
    /* A 1.0 descriptor ends before check: reading it would read past it. */
    if (self->desc->abi_minor < 1 || self->desc->size < DESC_CHECK_SIZE)
        return NULL;
    return self->desc->check;
}

#define DESC_REOPEN_SIZE (offsetof (fanhub_consumer_desc_t, reopen) + sizeof (void *))

fh_plugin_reopen_fn
fh_plugin_reopen (const fh_plugin_t *self)
{
    if (self->desc->abi_minor < 3 || self->desc->size < DESC_REOPEN_SIZE)
        return NULL;
    return self->desc->reopen;
}

const char *
fh_plugin_path (const fh_plugin_t *self)
{
    return self->path;
}

const char *
fh_plugin_dir (const char *override)
{
    if (override && *override)
        return override;
    const char *env = getenv ("FANHUB_PLUGIN_DIR");
    if (env && *env)
        return env;
    static char beside_exe[PATH_MAX];
    char exe[PATH_MAX], joined[PATH_MAX];
    ssize_t len = readlink ("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr (exe, '/');
        if (slash) {
            *slash = '\0';
            struct stat st;
            if ((size_t) snprintf (joined, sizeof joined, "%s/%s", exe, FANHUB_PLUGIN_RELDIR)
                    < sizeof joined
                && realpath (joined, beside_exe) && stat (beside_exe, &st) == 0
                && S_ISDIR (st.st_mode))
                return beside_exe;
        }
    }
    return FANHUB_PLUGIN_DIR;
}
