/*  reasoned - a test consumer of the ABI 1.2 additions: its options come
    from an option table of every type (read by host->options_read), and
    it fails each message with a reason (host->set_reason).

    init logs the typed values it was handed, one line, so a test sees
    what the host made of the YAML; consume answers `mode` (fail or
    retry) with the reason "REASON (message SEQ)".
*/
#include <fanhub/consumer.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int mode;
    const char *reason;
    uint64_t limit;  /* SIZE */
    int64_t wait_ms; /* DURATION */
    double ratio;
    uint64_t count;
    int64_t offset;
    bool loud;
    const fanhub_option_t *tags;
    const char *file;
    const fanhub_option_t *extra;
} reasoned_options_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    fanhub_result_t answer;
    char reason[128];
} reasoned_t;

static const fanhub_consumer_desc_t s_desc;
static const char *const s_modes[] = {"fail", "retry", NULL};

#define OPT(name, type, field, def, lo, hi, values, flags, help)                                   \
    {                                                                                              \
        name, type, offsetof (reasoned_options_t, field), def, lo, hi, values, flags, help         \
    }
static const fanhub_opt_t s_options[] = {
    OPT ("mode", FANHUB_OPT_ENUM, mode, "fail", 0, 0, s_modes, 0, "what consume answers"),
    OPT ("reason", FANHUB_OPT_STRING, reason, NULL, 1, 100, NULL, FANHUB_OPT_REQUIRED,
         "why every message fails"),
    OPT ("limit", FANHUB_OPT_SIZE, limit, "64KiB", 0, 0, NULL, 0, "a size"),
    OPT ("wait", FANHUB_OPT_DURATION, wait_ms, "2s", 0, 3600000, NULL, 0, "a duration"),
    OPT ("ratio", FANHUB_OPT_DOUBLE, ratio, "0.5", 0, 1, NULL, 0, "a number"),
    OPT ("count", FANHUB_OPT_UINT, count, "3", 1, 10, NULL, 0, "an unsigned integer"),
    OPT ("offset", FANHUB_OPT_INT, offset, "-7", 0, 0, NULL, 0, "an integer"),
    OPT ("loud", FANHUB_OPT_BOOL, loud, "false", 0, 0, NULL, 0, "a bool"),
    OPT ("tags", FANHUB_OPT_STRINGS, tags, NULL, 0, 0, NULL, 0, "a list of strings"),
    OPT ("file", FANHUB_OPT_FILE, file, "/dev/null", 0, 0, NULL, 0, "a file"),
    OPT ("extra", FANHUB_OPT_ANY, extra, NULL, 0, 0, NULL, 0, "anything"),
    FANHUB_OPT_END,
};

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    reasoned_options_t o;
    return host->options_read (ctx, &s_desc, options, &o, sizeof o, err, errlen);
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    reasoned_options_t o = {0};
    if (host->options_read (ctx, &s_desc, options, &o, sizeof o, err, errlen) != 0)
        return -1;
    reasoned_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->answer = o.mode == 0 ? FANHUB_FAIL : FANHUB_RETRY;
    snprintf (self->reason, sizeof self->reason, "%s", o.reason);
    host->log (ctx, FANHUB_LOG_INFO,
               "values: mode=%d reason=%s limit=%" PRIu64 " wait_ms=%" PRId64 " ratio=%g "
               "count=%" PRIu64 " offset=%" PRId64 " loud=%d tags=%zu file=%s extra=%s",
               o.mode, o.reason, o.limit, o.wait_ms, o.ratio, o.count, o.offset, (int) o.loud,
               o.tags ? host->option_count (o.tags) : (size_t) 0, o.file, o.extra ? "yes" : "no");
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    reasoned_t *self = state;
    self->host->set_reason (self->ctx, "%s (message %llu)", self->reason,
                            (unsigned long long) self->host->msg_seq (msg));
    return self->answer;
}

static void
s_fini (void *state)
{
    free (state);
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "reasoned", .version = "1.2", .init = s_init,
                        .consume = s_consume, .fini = s_fini, .check = s_check,
                        .options = s_options)
