/*  config_kit - what the configuration's unit tests share: a valid bus:
    and consumers: to build texts from, and loading a text as "t.yaml".
    Include it once, in the test's .c file, after <cmocka.h>.
*/
#ifndef CONFIG_KIT_H_INCLUDED
#define CONFIG_KIT_H_INCLUDED

#include "config.h"

#include <stdlib.h>
#include <string.h>

/* A valid bus: and consumers:, lines 1-2 and 3-5. */
#define BUS "bus:\n  connect: tcp://127.0.0.1:9940\n"
#define CONSUMERS "consumers:\n  - name: c\n    plugin: p\n"

static inline fh_config_t *
s_load (const char *text, char *err, size_t errlen)
{
    return fh_config_load_string (text, strlen (text), "t.yaml", err, errlen);
}

/* Loads text, which must succeed. */
static inline fh_config_t *
s_load_ok (const char *text)
{
    char err[512];
    fh_config_t *cfg = s_load (text, err, sizeof err);
    if (!cfg)
        fail_msg ("load failed: %s\n--- text:\n%s", err, text);
    return cfg;
}

static inline void
s_unset_runtime_dirs (void)
{
    unsetenv ("RUNTIME_DIRECTORY");
    unsetenv ("XDG_RUNTIME_DIR");
}

#endif
