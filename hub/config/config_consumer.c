/*  config_consumer - a consumers: list: each consumer's schema, its
    defaults, the names used once across files, and the checks that
    involve the hub's settings.

    The main file's list (config.c's consumers: key) and each drop-in's
    (config_include.c) are read here, so that both depend on this file
    and this file on neither.
*/
#include "config_internal.h"
#include "fnv.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_QUEUE_CAPACITY_MAX 1073741824
#define S_CONSUMERS_MAX 1024 /* each is a thread or more */

static int
s_consumer_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_consumer_config_t *consumer = target;
    if (!consumer->options) {
        consumer->options = fh_option_new (FANHUB_OPTION_MAP, NULL, consumer->where);
        if (!consumer->options)
            return fh_yaml_oom (ctx, node->start_mark);
    }
    return 0;
}

static int
s_queue_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_consumer_config_t *consumer = target;
    if (consumer->warn_at > consumer->queue_capacity)
        return fh_yaml_key_error (ctx, node, "warn_at",
                                  "%zu is above queue.capacity (%zu): the warning could "
                                  "never fire",
                                  consumer->warn_at, consumer->queue_capacity);
    return 0;
}

/* Consumer names seen so far: an open-addressed set of indices into
   cfg->consumers, so that 20,000 consumers are checked in linear time. */
typedef struct {
    size_t *slots; /* SIZE_MAX: empty */
    size_t mask;
} s_name_set_t;

static uint64_t
s_name_hash (const char *name)
{
    return fh_fnv1a (name, strlen (name));
}

/* The index of an earlier consumer named like consumers[index], or
   SIZE_MAX after adding index to the set. */
static size_t
s_name_set_find_or_add (s_name_set_t *set, const fh_consumer_config_t *consumers, size_t index)
{
    size_t slot = (size_t) s_name_hash (consumers[index].name) & set->mask;
    while (set->slots[slot] != SIZE_MAX) {
        if (strcmp (consumers[set->slots[slot]].name, consumers[index].name) == 0)
            return set->slots[slot];
        slot = (slot + 1) & set->mask;
    }
    set->slots[slot] = index;
    return SIZE_MAX;
}

/* consumers[first + i], item i of the list node, and its name checked
   against every consumer before it (of this file or another). */
static int
s_parse_consumer (fh_yaml_t *ctx, fh_config_t *cfg, yaml_node_t *node, size_t first, size_t i,
                  s_name_set_t *names)
{
    yaml_node_t *item = fh_yaml_node (ctx, node->data.sequence.items.start[i]);
    fh_consumer_config_t *consumer = &cfg->consumers[first + i];
    cfg->consumer_count = first + i + 1; /* destroy frees what is filled in */
    consumer->queue_capacity = FH_DEFAULT_QUEUE_CAPACITY;
    consumer->overflow = FH_OVERFLOW_UNSET;
    consumer->retry.max_attempts = FH_DEFAULT_RETRY_MAX_ATTEMPTS;
    consumer->retry.initial_ms = FH_DEFAULT_RETRY_INITIAL_MS;
    consumer->retry.max_ms = FH_DEFAULT_RETRY_MAX_MS;
    consumer->retry.jitter_permille = FH_DEFAULT_RETRY_JITTER_PERMILLE;
    consumer->consume_timeout_ms = FH_DEFAULT_CONSUME_TIMEOUT_MS;
    consumer->workers = 1;
    consumer->max_pending = FH_DEFAULT_MAX_PENDING;
    consumer->max_crashes = FH_DEFAULT_MAX_CRASHES;
    consumer->queue_max_bytes = FH_DEFAULT_QUEUE_MAX_BYTES;
    consumer->where = fh_yaml_where (ctx, item->start_mark);
    if (!consumer->where)
        return fh_yaml_oom (ctx, item->start_mark);
    size_t mark = fh_yaml_path_index (ctx, i);
    if (fh_cfg_parse_map (ctx, item, &fh_cfg_consumer_section, consumer))
        return -1;
    size_t j = s_name_set_find_or_add (names, cfg->consumers, first + i);
    if (j != SIZE_MAX) {
        yaml_mark_t at = fh_yaml_map_find (ctx, item, "name")->start_mark;
        fh_yaml_path_key (ctx, "name");
        if (j < first) /* another file's */
            return fh_yaml_error (ctx, at, "duplicate consumer name '%s' (first defined at %s)",
                                  consumer->name, cfg->consumers[j].where);
        yaml_node_t *earlier = fh_yaml_map_find (
            ctx, fh_yaml_node (ctx, node->data.sequence.items.start[j - first]), "name");
        return fh_yaml_error (ctx, at,
                              "duplicate consumer name '%s' (first used by "
                              "consumers[%zu] at line %zu)",
                              consumer->name, j - first, earlier->start_mark.line + 1);
    }
    fh_yaml_path_pop (ctx, mark);
    return 0;
}

/* A consumers: list, appended to cfg->consumers (the main file's, then
   each drop-in's); every name used once in all. */
int
fh_cfg_parse_consumers (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                        const fh_cfg_field_t *field)
{
    (void) field;
    fh_config_t *cfg = target;
    size_t count = fh_yaml_count (node), first = cfg->consumer_count;
    if (node->type != YAML_SEQUENCE_NODE || count == 0) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark,
                              "expected a list of at least one consumer, got %s",
                              fh_yaml_got (node, buf, sizeof buf));
    }
    if (first + count > S_CONSUMERS_MAX)
        return fh_yaml_error (ctx, node->start_mark,
                              "%zu consumers: a hub runs at most %d (each has a thread); "
                              "split them over several hubs",
                              first + count, S_CONSUMERS_MAX);
    fh_consumer_config_t *grown = realloc (cfg->consumers, (first + count) * sizeof *grown);
    if (!grown)
        return fh_yaml_oom (ctx, node->start_mark);
    cfg->consumers = grown;
    memset (grown + first, 0, count * sizeof *grown);
    s_name_set_t names = {NULL, 1};
    while (names.mask + 1 < 2 * (first + count))
        names.mask = names.mask * 2 + 1;
    names.slots = malloc ((names.mask + 1) * sizeof *names.slots);
    if (!names.slots)
        return fh_yaml_oom (ctx, node->start_mark);
    memset (names.slots, 0xff, (names.mask + 1) * sizeof *names.slots);
    for (size_t i = 0; i < first; i++)
        s_name_set_find_or_add (&names, cfg->consumers, i);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++)
        rc = s_parse_consumer (ctx, cfg, node, first, i, &names);
    free (names.slots);
    return rc;
}

/* What depends on the hub's settings and several keys of consumer i,
   item of its file's list (index in that list). */
int
fh_cfg_consumer_cross_check (fh_yaml_t *ctx, fh_config_t *cfg, size_t i, yaml_node_t *item,
                             size_t index)
{
    fh_consumer_config_t *consumer = &cfg->consumers[i];
    if (fh_cfg_fedora_finish (ctx, consumer, item, index))
        return -1;
    if (consumer->overflow == FH_OVERFLOW_UNSET)
        consumer->overflow = cfg->state_dir ? FH_OVERFLOW_SPILL : FH_OVERFLOW_DROP_NEWEST;
    if (consumer->overflow == FH_OVERFLOW_SPILL && !cfg->state_dir) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].queue.overflow", index);
        return fh_yaml_error (ctx, item->start_mark,
                              "spill needs a state_dir: (where the spool is kept)");
    }
    if (consumer->coalesce && !consumer->order_by) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].coalesce", index);
        return fh_yaml_error (ctx, item->start_mark,
                              "coalescing replaces a queued message of the same key: "
                              "it needs order_by:");
    }
    if (consumer->retry.max_ms < consumer->retry.initial_ms) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].retry.max_ms", index);
        return fh_yaml_error (ctx, item->start_mark, "%lld is below retry.initial_ms (%lld)",
                              (long long) consumer->retry.max_ms,
                              (long long) consumer->retry.initial_ms);
    }
    ctx->path[0] = '\0';
    return 0;
}

/* ------------------------------------------------------------------ */
/* The tables: one row a key (see config.c). */

/* clang-format off */
static const char *const s_overflow_words[] = {"block", "drop-newest", "drop-oldest",
                                               "spill", NULL};
static const fh_cfg_field_t s_retry_fields[] = {
    { .opt = { .name = "max_attempts", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_retry_config_t, max_attempts), .min = 1, .max = 1000000 } },
    { .opt = { .name = "initial_ms", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_retry_config_t, initial_ms), .min = 0, .max = 3600000 } },
    { .opt = { .name = "max_ms", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_retry_config_t, max_ms), .min = 0, .max = 86400000 } },
    { .opt = { .name = "jitter", .offset = offsetof (fh_retry_config_t, jitter_permille) },
      .parse = fh_cfg_parse_permille },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_retry_section = { s_retry_fields, NULL };

static const fh_cfg_field_t s_queue_fields[] = {
    { .opt = { .name = "capacity", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_consumer_config_t, queue_capacity), .min = 1,
               .max = S_QUEUE_CAPACITY_MAX } },
    { .opt = { .name = "warn_at", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_consumer_config_t, warn_at), .min = 0,
               .max = S_QUEUE_CAPACITY_MAX }, .live = true },
    { .opt = { .name = "overflow", .type = FANHUB_OPT_ENUM,
               .offset = offsetof (fh_consumer_config_t, overflow), .values = s_overflow_words } },
    { .opt = { .name = "spool_max_bytes", .type = FANHUB_OPT_SIZE,
               .offset = offsetof (fh_consumer_config_t, spool_max_bytes) } },
    { .opt = { .name = "write_ahead", .type = FANHUB_OPT_BOOL,
               .offset = offsetof (fh_consumer_config_t, write_ahead) } },
    { .opt = { .name = "max_bytes", .type = FANHUB_OPT_SIZE,
               .offset = offsetof (fh_consumer_config_t, queue_max_bytes) } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_queue_section = { s_queue_fields, s_queue_finish };

static const fh_cfg_field_t s_consumer_fields[] = {
    { .opt = { .name = "name", .offset = offsetof (fh_consumer_config_t, name),
               .flags = FANHUB_OPT_REQUIRED }, .parse = fh_cfg_parse_consumer_name },
    { .opt = { .name = "plugin", .offset = offsetof (fh_consumer_config_t, plugin) },
      .parse = fh_cfg_parse_plugin }, /* or fedora_messaging */
    { .opt = { .name = "fedora_messaging",
               .offset = offsetof (fh_consumer_config_t, fedora_messaging) },
      .parse = fh_cfg_parse_fedora_messaging },
    { .opt = { .name = "topics", .offset = offsetof (fh_consumer_config_t, topics) },
      .parse = fh_cfg_parse_topics, .live = true },
    { .opt = { .name = "queue" }, .parse = fh_cfg_parse_section, .section = &s_queue_section },
    { .opt = { .name = "options", .offset = offsetof (fh_consumer_config_t, options) },
      .parse = fh_cfg_parse_options },
    { .opt = { .name = "retry", .offset = offsetof (fh_consumer_config_t, retry) },
      .parse = fh_cfg_parse_section, .section = &s_retry_section },
    { .opt = { .name = "consume_timeout", .type = FANHUB_OPT_DURATION,
               .offset = offsetof (fh_consumer_config_t, consume_timeout_ms), .min = 0,
               .max = 86400, .flags = FH_OPT_SECONDS } },
    { .opt = { .name = "workers", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_consumer_config_t, workers), .min = 1, .max = 256 } },
    { .opt = { .name = "order_by", .offset = offsetof (fh_consumer_config_t, order_by) },
      .parse = fh_cfg_parse_order_by },
    { .opt = { .name = "coalesce", .type = FANHUB_OPT_BOOL,
               .offset = offsetof (fh_consumer_config_t, coalesce) } },
    { .opt = { .name = "max_pending", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_consumer_config_t, max_pending), .min = 1,
               .max = FH_MAX_MAX_PENDING } },
    { .opt = { .name = "shard", .offset = offsetof (fh_consumer_config_t, shard) },
      .parse = fh_cfg_parse_shard },
    { .opt = { .name = "max_crashes", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_consumer_config_t, max_crashes), .min = 1, .max = 1000 } },
    { .opt = { .name = "publish", .offset = offsetof (fh_consumer_config_t, publish) },
      .parse = fh_cfg_parse_section, .section = &fh_cfg_publish_section },
    { .opt = { .name = NULL } },
};

const fh_cfg_section_t fh_cfg_consumer_section = { s_consumer_fields,
                                                s_consumer_finish };
/* clang-format on */
