/*  fuzz_config - libFuzzer target for the configuration loader: any bytes
    as YAML to fh_config_load_string.

    Built and run by ctest as fuzz.config (scripts/test --only fuzz);
    tests/fuzz/CMakeLists.txt lists the hub sources it compiles with it.
    By hand: build/fuzz/tests/fuzz/fuzz_config -max_total_time=60
    $(mktemp -d) tests/fuzz/corpus/config/ (libFuzzer writes what it finds
    into the first directory: a scratch one keeps the seeds as they are).

    The seed corpus (tests/fuzz/corpus/config/) holds config/fanhub.yaml,
    the files of config/examples, a configuration using every key, and
    broken ones: bad syntax, a tab, unknown and duplicate keys, wrong types
    and ranges, two documents, anchors and aliases, bad endpoints, NUL and
    non-UTF-8 bytes, ${VAR} forms and patterns that draw warnings. No seed expands aliases up to the cap on option
    values (S_OPTION_NODES_MAX): refusing one takes half a second under the
    sanitizers, which a timed run cannot afford on every mutation, and
    test_config checks the cap. The input is the whole file, named
    "fuzz.yaml".

    Checked for every input (and by libFuzzer's leak check: nothing of a
    load, refused or not, may stay allocated):

    1. Refused: err is one line (no byte below 0x20, no DEL), starting
       "fuzz.yaml:", NUL-terminated inside the buffer. Loaded again into a
       buffer of exactly errlen bytes (a few, from the input's size), the
       answer is the start of the same line.
    2. Loaded: what config.h promises holds: the source is "fuzz.yaml",
       at least one endpoint, 2 <= max_frames, max_message_bytes > 0, a
       control endpoint, at least one consumer; each consumer named
       [A-Za-z0-9_.-]+ and unique, with a plugin, workers >= 1, its
       overflow resolved and options present. Destroy twice is safe.

    Inputs that mention include (drop-ins) are passed over: see below.
*/
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "fuzz.yaml"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_check (bool ok, const char *what)
{
    if (!ok) {
        fprintf (stderr, "fuzz_config: %s\n", what);
        abort ();
    }
}

static bool
s_name_ok (const char *name)
{
    if (!name || !*name)
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
              || *c == '_' || *c == '.' || *c == '-'))
            return false;
    return true;
}

static void
s_check_loaded (const fh_config_t *cfg)
{
    s_check (cfg->source && strcmp (cfg->source, SOURCE) == 0, "source is not the name given");
    s_check (cfg->connect.count + cfg->bind.count >= 1, "no endpoint");
    for (size_t i = 0; i < cfg->connect.count; i++)
        s_check (cfg->connect.items[i] != NULL, "NULL connect endpoint");
    for (size_t i = 0; i < cfg->bind.count; i++)
        s_check (cfg->bind.items[i] != NULL, "NULL bind endpoint");
    s_check (cfg->max_frames >= 2, "max_frames below 2");
    s_check (cfg->max_message_bytes > 0, "max_message_bytes 0");
    s_check (cfg->rcvhwm >= 0, "negative rcvhwm");
    s_check (cfg->control != NULL, "no control endpoint");
    s_check (cfg->consumer_count >= 1 && cfg->consumers, "no consumer");
    for (size_t i = 0; i < cfg->consumer_count; i++) {
        const fh_consumer_config_t *c = &cfg->consumers[i];
        s_check (s_name_ok (c->name), "consumer name not [A-Za-z0-9_.-]+");
        for (size_t j = 0; j < i; j++)
            s_check (strcmp (cfg->consumers[j].name, c->name) != 0, "duplicate consumer name");
        s_check (c->plugin != NULL, "consumer without a plugin");
        s_check (c->workers >= 1, "consumer without a worker");
        s_check (c->overflow != FH_OVERFLOW_UNSET, "queue.overflow not resolved");
        s_check (c->options != NULL, "consumer without options");
        for (size_t t = 0; t < c->topics.count; t++)
            s_check (c->topics.items[t] != NULL, "NULL topic");
    }
}

/* err as a refusal must read: one line, "fuzz.yaml:..." */
static void
s_check_error (const char *err, size_t errlen)
{
    size_t len = strnlen (err, errlen);
    s_check (len < errlen, "error not NUL-terminated");
    s_check (strncmp (err, SOURCE ":", sizeof SOURCE) == 0, "error does not start 'fuzz.yaml:'");
    for (size_t i = 0; i < len; i++)
        s_check ((unsigned char) err[i] >= 0x20 && err[i] != 0x7f, "error is not one line");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    /* include: reads the files it names, anywhere on this machine (a
       FIFO or /proc/kmsg would block the run) and errors there name
       those files: drop-ins are test_config_include's and test_dropins'. */
    for (size_t i = 0; i + 7 <= size; i++)
        if (memcmp (data + i, "include", 7) == 0)
            return 0;
    char err[1024];
    memset (err, 'Z', sizeof err);
    fh_config_t *cfg = fh_config_load_string ((const char *) data, size, SOURCE, err, sizeof err);
    if (cfg) {
        s_check_loaded (cfg);
        fh_config_destroy (&cfg);
        s_check (cfg == NULL, "destroy did not null the pointer");
        fh_config_destroy (&cfg);
        return 0;
    }
    s_check_error (err, sizeof err);

    /* The same refusal into a buffer of exactly errlen bytes: ASan sees
       any write past it, and the line must be cut, not changed. */
    size_t errlen = 1 + (size * 7) % 48;
    char *shortbuf = malloc (errlen);
    s_check (shortbuf != NULL, "out of memory");
    cfg = fh_config_load_string ((const char *) data, size, SOURCE, shortbuf, errlen);
    s_check (cfg == NULL, "refused once, loaded the second time");
    size_t len = strnlen (shortbuf, errlen);
    s_check (len < errlen, "short error not NUL-terminated");
    size_t full = strlen (err);
    s_check (len == (full < errlen ? full : errlen - 1) && memcmp (shortbuf, err, len) == 0,
             "short error is not the start of the line");
    free (shortbuf);
    return 0;
}
