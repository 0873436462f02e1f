/*  abi12 - a test consumer built as ABI 1.2 plugins were: its descriptor
    says 1.2, and it uses only what 1.2 offered (an option table read
    with host->options_read, set_reason, msg_ticket and complete). A hub
    of ABI 1.3 (which appended complete_reason, consumer_setting,
    set_state, count and msg_attempt to the host table) must load, check
    and run it unchanged. `answer: fail` fails every message with the
    reason "old plugin (message SEQ)"; otherwise each is completed from
    inside consume (PENDING).
*/
#include <fanhub/consumer.h>

#include <stdlib.h>

typedef struct {
    int answer;
} abi12_options_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    int answer;
} abi12_t;

static const fanhub_consumer_desc_t s_desc;
static const char *const s_answers[] = {"ok", "fail", NULL};
static const fanhub_opt_t s_options[] = {
    {"answer", FANHUB_OPT_ENUM, offsetof (abi12_options_t, answer), "ok", 0, 0, s_answers, 0,
     "what consume answers"},
    FANHUB_OPT_END,
};

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    abi12_options_t opts;
    if (!FANHUB_HOST_HAS_1_2 (host)
        || host->options_read (ctx, &s_desc, options, &opts, sizeof opts, err, errlen) != 0)
        return -1;
    abi12_t *self = calloc (1, sizeof *self);
    if (!self)
        return -1;
    self->host = host;
    self->ctx = ctx;
    self->answer = opts.answer;
    *state = self;
    return 0;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    abi12_t *self = state;
    if (self->answer == 1) {
        self->host->set_reason (self->ctx, "old plugin (message %llu)",
                                (unsigned long long) self->host->msg_seq (msg));
        return FANHUB_FAIL;
    }
    self->host->complete (self->ctx, self->host->msg_ticket (msg), FANHUB_OK);
    return FANHUB_PENDING;
}

static void
s_fini (void *state)
{
    free (state);
}

static const fanhub_consumer_desc_t s_desc = {
    .abi_major = 1,
    .abi_minor = 2,
    .size = sizeof (fanhub_consumer_desc_t), /* 1.3 left the descriptor as 1.2 had it */
    .name = "abi12",
    .version = "1.0",
    .init = s_init,
    .consume = s_consume,
    .fini = s_fini,
    .options = s_options,
};
FANHUB_CONSUMER_ENTRY (s_desc)
