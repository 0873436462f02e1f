/*  plugin_kit - what the shipped plugins' tests share beyond
    <fanhub/testing.h>: option nodes written short, a table of option
    cases and its loop, and reading a file back. Each plugin's own kit
    (log_kit.h, store_kit.h, exec_kit.h) includes it; include that once,
    after <cmocka.h> and <fanhub/testing.h>.
*/
#ifndef PLUGIN_KIT_H_INCLUDED
#define PLUGIN_KIT_H_INCLUDED

#include <stdio.h>
#include <stdlib.h>

#define SCALAR(k, v, w)                                                                            \
    {                                                                                              \
        FANHUB_OPTION_SCALAR, (k), (v), (w), NULL, 0                                               \
    }
#define MAP(items, n)                                                                              \
    {                                                                                              \
        FANHUB_OPTION_MAP, NULL, NULL, "t.yaml:4:3", (items), (n)                                  \
    }

/* The plugin under test and its directory: the group's setup opens it
   (fanhub_fake_plugin_open), its teardown closes it. */
static fanhub_fake_plugin_t s_plugin;

static const fanhub_option_t s_empty_items[1];

/* A list and a map where an option wants a scalar (or another kind). */
static const fanhub_option_t s_list_items[] = {
    SCALAR (NULL, "a", "t.yaml:5:15"),
};
static const fanhub_option_t s_map_items[] = {
    SCALAR ("x", "1", "t.yaml:6:7"),
};
#define LIST(k)                                                                                    \
    {                                                                                              \
        FANHUB_OPTION_LIST, (k), NULL, "t.yaml:5:13", s_list_items, 1                              \
    }
#define SUBMAP(k)                                                                                  \
    {                                                                                              \
        FANHUB_OPTION_MAP, (k), NULL, "t.yaml:6:5", s_map_items, 1                                 \
    }

/* One case of a plugin's option table: up to three entries of the
   consumer's options: map, and the whole error init gives. */
typedef struct {
    const char *name;
    fanhub_option_t items[3];
    size_t count;
    const char *expected; /* the whole error; NULL: accepted */
} option_case_t;

/* Runs every case against desc (fanhub_fake_option_case), each with a
   context made by ctx_init; fails on the first that does not hold. */
static inline void
s_run_option_cases (const fanhub_consumer_desc_t *desc, const option_case_t *cases, size_t count,
                    void (*ctx_init) (fanhub_ctx_t *ctx))
{
    for (size_t i = 0; i < count; i++) {
        const option_case_t *c = &cases[i];
        fanhub_option_t map = MAP (c->count ? c->items : s_empty_items, c->count);
        fanhub_ctx_t ctx;
        ctx_init (&ctx);
        char got[1536];
        if (fanhub_fake_option_case (desc, &ctx, &map, c->expected, got, sizeof got) != 0)
            fail_msg ("case \"%s\": %s", c->name, got);
    }
}

/* The plugin's descriptor: this tree's ABI, its size, named name,
   thread-safe, with init, consume and fini. */
static inline void
s_assert_descriptor (const char *name)
{
    const fanhub_consumer_desc_t *desc = s_plugin.desc;
    assert_non_null (desc);
    assert_int_equal (desc->abi_major, FANHUB_ABI_MAJOR);
    assert_int_equal (desc->abi_minor, FANHUB_ABI_MINOR);
    assert_int_equal (desc->size, sizeof (fanhub_consumer_desc_t));
    assert_string_equal (desc->name, name);
    assert_true (desc->flags & FANHUB_CONSUMER_THREAD_SAFE);
    assert_non_null (desc->init);
    assert_non_null (desc->consume);
    assert_non_null (desc->fini);
}

/* Starts an instance with the given map entries; fails the test when init
   refuses. */
static inline void *
s_start_map (fanhub_ctx_t *ctx, const fanhub_option_t *items, size_t n)
{
    fanhub_option_t map = MAP (n ? items : s_empty_items, n);
    void *state = NULL;
    char err[1024] = "";
    int rc = s_plugin.desc->init (&fanhub_fake_host, ctx, &map, &state, err, sizeof err);
    if (rc != 0)
        print_error ("init refused: %s\n", err);
    assert_int_equal (rc, 0);
    assert_non_null (state);
    return state;
}

/* Init with the entries refuses with exactly want (and no state). */
static inline void
s_refused (fanhub_ctx_t *ctx, const fanhub_option_t *items, size_t n, const char *want)
{
    fanhub_option_t map = MAP (n ? items : s_empty_items, n);
    char got[1536];
    if (fanhub_fake_option_case (s_plugin.desc, ctx, &map, want, got, sizeof got) != 0)
        fail_msg ("%s", got);
}

/* The whole file, NUL-terminated for convenience; *size without it. */
static inline char *
s_slurp (const char *path, size_t *size)
{
    FILE *f = fopen (path, "rb");
    assert_non_null (f);
    size_t cap = 4096, len = 0;
    char *data = malloc (cap);
    assert_non_null (data);
    size_t n;
    while ((n = fread (data + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            data = realloc (data, cap);
            assert_non_null (data);
        }
    }
    fclose (f);
    data[len] = '\0';
    if (size)
        *size = len;
    return data;
}

#endif
