/*  config_fedora - a consumer's `fedora_messaging: FILE`: a
    fedora-messaging config.toml, moved in unchanged.

    Debian 12 has no C TOML library, and its /usr/bin/python3 (3.11) has
    tomllib; the Python runner ships a helper that reads the file as
    fedora-messaging does and prints it normalised as JSON, with the keys
    it refuses (errors) and those it reads but fanhub does not honour
    (warnings), each by name:
        /usr/bin/python3 -m fanhub_worker.fm_config FILE
    (consumers/worker/python/fanhub_worker/fm_config.py). It runs at every
    load: run, check and reload read the file as it is now.

    The consumer becomes a `python` plugin consumer of the file's callback
    (options.callable, options.fedora_messaging: FILE for the runner's
    consumer_config and log_config, options.on_exception: halt as
    fedora-messaging stops on an unexpected exception), with no topics:
    it takes only what its own AMQP source (hub.c, source_amqp_fm.c)
    targets at it.
*/
#define _GNU_SOURCE /* pipe2 */
#include "config_internal.h"
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define S_PYTHON "/usr/bin/python3" /* Debian's, with tomllib (3.11) */
#define S_OUTPUT_MAX (4 << 20)

static char s_plugin_dir[4096];

void
fh_config_set_plugin_dir (const char *dir)
{
    snprintf (s_plugin_dir, sizeof s_plugin_dir, "%s", dir ? dir : "");
}

/* The helper's standard output (NUL-ended) and exit status; NULL with why
   when it could not run. -I: no user site, no PYTHONPATH, no cwd on the
   path; the runner's directory goes first on sys.path from argv. */
static char *
s_run_helper (const char *file, int *status, char *why, size_t whylen)
{
    const char *dir = s_plugin_dir[0] ? s_plugin_dir : getenv ("FANHUB_PLUGIN_DIR");
    char runner_dir[4200];
    snprintf (runner_dir, sizeof runner_dir, "%s/worker-python", dir ? dir : ".");
    int pipe_fds[2];
    if (pipe2 (pipe_fds, O_CLOEXEC) != 0) {
        snprintf (why, whylen, "cannot run %s: %s", S_PYTHON, strerror (errno));
        return NULL;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init (&actions);
    posix_spawn_file_actions_adddup2 (&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_addclose (&actions, pipe_fds[0]);
    static const char code[] = "import sys; sys.path.insert(0, sys.argv.pop(1)); "
                               "from fanhub_worker import fm_config; "
                               "sys.exit(fm_config.main(sys.argv))";
    char *argv[] = {S_PYTHON, "-I", "-c", (char *) code, runner_dir, (char *) file, NULL};
    pid_t pid;
    int rc = posix_spawn (&pid, S_PYTHON, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&actions);
    close (pipe_fds[1]);
    if (rc != 0) {
        close (pipe_fds[0]);
        snprintf (why, whylen, "cannot run %s: %s", S_PYTHON, strerror (rc));
        return NULL;
    }
    size_t size = 0, room = 4096;
    char *out = malloc (room);
    ssize_t got = 0;
    while (out && (got = read (pipe_fds[0], out + size, room - size - 1)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        size += (size_t) got;
        if (size + 1 == room && room < S_OUTPUT_MAX) {
            char *grown = realloc (out, room * 2);
            if (!grown)
                break;
            out = grown;
            room *= 2;
        }
        else if (size + 1 == room)
            break;
    }
    close (pipe_fds[0]);
    while (waitpid (pid, status, 0) < 0 && errno == EINTR)
        ;
    if (!out) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    out[size] = '\0';
    return out;
}

/* "a; b; c" from a JSON array of strings, cut to fit. */
static void
s_join (const json_t *list, char *buf, size_t len)
{
    size_t used = 0, i;
    json_t *item;
    buf[0] = '\0';
    json_array_foreach (list, i, item)
    {
        int wrote = snprintf (buf + used, len - used, "%s%s", i ? "; " : "",
                              json_string_value (item) ? json_string_value (item) : "?");
        if (wrote < 0 || (size_t) wrote >= len - used)
            break;
        used += (size_t) wrote;
    }
}

int
fh_cfg_parse_fedora_messaging (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                               const fh_cfg_field_t *field)
{
    (void) field;
    json_t **slot = target;
    const char *file = fh_yaml_text (ctx, node, "the path of a fedora-messaging config.toml");
    if (!file)
        return -1;
    if (!*file)
        return fh_yaml_error (ctx, node->start_mark, "expected a path, got ''");
    char why[512];
    int status = 0;
    char *out = s_run_helper (file, &status, why, sizeof why);
    if (!out)
        return fh_yaml_error (ctx, node->start_mark, "%s: %s", file, why);
    json_error_t error;
    json_t *fm = json_loads (out, 0, &error);
    free (out);
    const json_t *errors = json_object_get (fm, "errors");
    if (!json_is_array (errors)) {
        json_decref (fm);
        return fh_yaml_error (ctx, node->start_mark,
                              "%s: the reader (%s -m fanhub_worker.fm_config, Python 3.11 or "
                              "later) failed with status %d; is the Python runner installed?",
                              file, S_PYTHON, WIFEXITED (status) ? WEXITSTATUS (status) : -1);
    }
    if (json_array_size (errors)) {
        char text[2048];
        s_join (errors, text, sizeof text);
        json_decref (fm);
        return fh_yaml_error (ctx, node->start_mark, "%s: %s", file, text);
    }
    size_t i;
    json_t *warning;
    json_array_foreach (json_object_get (fm, "warnings"), i, warning)
    {
        if (fh_cfg_warn (ctx, node->start_mark, "%s: %s", file, json_string_value (warning))) {
            json_decref (fm);
            return -1;
        }
    }
    json_decref (*slot);
    *slot = fm;
    return 0;
}

/* options.KEY = value, where the consumer's options do not say it. */
static int
s_option_default (fanhub_option_t *options, const char *key, const char *value)
{
    if (fh_option_get (options, key))
        return 0;
    fanhub_option_t *scalar
        = fh_option_new (FANHUB_OPTION_SCALAR, value, fh_option_where (options));
    return scalar ? fh_option_append (options, key, scalar) : -1;
}

int
fh_cfg_fedora_finish (fh_yaml_t *ctx, fh_consumer_config_t *consumer, yaml_node_t *item,
                      size_t index)
{
    yaml_mark_t mark = item->start_mark;
    if (!consumer->fedora_messaging) {
        if (consumer->plugin)
            return 0;
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].plugin", index);
        return fh_yaml_error (ctx, mark, "required key is missing (or fedora_messaging:)");
    }
    const json_t *fm = consumer->fedora_messaging;
    if (consumer->plugin && strcmp (consumer->plugin, "python") != 0) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].plugin", index);
        return fh_yaml_error (ctx, mark,
                              "a fedora_messaging consumer runs in the python plugin, not '%s'",
                              consumer->plugin);
    }
    if (consumer->topics.count) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].topics", index);
        return fh_yaml_error (ctx, mark,
                              "a fedora_messaging consumer takes what its file's queues hold, "
                              "not bus topics");
    }
    if (fh_option_get (consumer->options, "callable")
        || fh_option_get (consumer->options, "fedora_messaging")) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].options", index);
        return fh_yaml_error (ctx, mark,
                              "callable and fedora_messaging come from the file (its callback)");
    }
    /* Its backlog stays on the broker: a full queue hands a delivery
       back (nack, requeue), never to a spool. */
    if (consumer->overflow == FH_OVERFLOW_UNSET)
        consumer->overflow = FH_OVERFLOW_DROP_NEWEST;
    if (consumer->overflow == FH_OVERFLOW_SPILL || consumer->write_ahead) {
        snprintf (ctx->path, sizeof ctx->path, "consumers[%zu].queue", index);
        return fh_yaml_error (ctx, mark,
                              "a fedora_messaging consumer's backlog stays on the broker: "
                              "no spill, no write_ahead");
    }
    if (!consumer->plugin && !(consumer->plugin = strdup ("python")))
        return fh_yaml_oom (ctx, mark);
    if (s_option_default (consumer->options, "callable",
                          json_string_value (json_object_get (fm, "callback")))
        || s_option_default (consumer->options, "fedora_messaging",
                             json_string_value (json_object_get (fm, "file")))
        || s_option_default (consumer->options, "on_exception", "halt"))
        return fh_yaml_oom (ctx, mark);
    return 0;
}
