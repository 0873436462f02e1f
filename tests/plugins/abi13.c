/*  abi13 - a test consumer built as ABI 1.3 plugins were: its descriptor
    says 1.3, its option table holds only 1.3's types, and it reads it with
    host->options_read (the descriptor handed back, as before 1.4's
    options_load) and reports through set_state. A hub of ABI 1.4 must
    load, check and run it unchanged. `answer: fail` fails every message
    with the reason "1.3 plugin"; otherwise each is OK.
*/
#include <fanhub/consumer.h>

#include <stdlib.h>

typedef struct {
    int answer;
    const fanhub_option_t *tags; /* STRINGS, as 1.3 read lists */
} abi13_options_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    int answer;
} abi13_t;

static const fanhub_consumer_desc_t s_desc;
static const char *const s_answers[] = {"ok", "fail", NULL};
static const fanhub_opt_t s_options[] = {
    {"answer", FANHUB_OPT_ENUM, offsetof (abi13_options_t, answer), "ok", 0, 0, s_answers, 0,
     "what consume answers"},
    {"tags", FANHUB_OPT_STRINGS, offsetof (abi13_options_t, tags), NULL, 0, 0, NULL, 0,
     "a list of strings"},
    FANHUB_OPT_END,
};

static int
s_read (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
        abi13_options_t *opts, char *err, size_t errlen)
{
    *opts = (abi13_options_t){0};
    if (!FANHUB_HOST_HAS_1_3 (host))
        return -1;
    return host->options_read (ctx, &s_desc, options, opts, sizeof *opts, err, errlen);
}

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    abi13_options_t opts;
    return s_read (host, ctx, options, &opts, err, errlen);
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    abi13_options_t opts;
    if (s_read (host, ctx, options, &opts, err, errlen) != 0)
        return -1;
    abi13_t *self = calloc (1, sizeof *self);
    if (!self)
        return -1;
    self->host = host;
    self->ctx = ctx;
    self->answer = opts.answer;
    host->set_state (ctx, FANHUB_STATE_UP, NULL);
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    abi13_t *self = state;
    (void) msg;
    if (self->answer == 1) {
        self->host->set_reason (self->ctx, "1.3 plugin");
        return FANHUB_FAIL;
    }
    return FANHUB_OK;
}

static void
s_fini (void *state)
{
    free (state);
}

static const fanhub_consumer_desc_t s_desc = {
    .abi_major = 1,
    .abi_minor = 3,
    .size = sizeof (fanhub_consumer_desc_t), /* 1.4 left the descriptor as 1.3 had it */
    .name = "abi13",
    .version = "1.0",
    .init = s_init,
    .consume = s_consume,
    .fini = s_fini,
    .check = s_check,
    .options = s_options,
};
FANHUB_CONSUMER_ENTRY (s_desc)
