/*  pub_jsonl - the messages of `fanhub pub --jsonl`. See pub_jsonl.h. */
#include "pub_jsonl.h"

#include "pyjson.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

void
fh_pub_jsonl_free (fh_pub_jmsg_t *msgs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free (msgs[i].topic);
        free (msgs[i].body);
    }
    free (msgs);
}

static bool
s_blank (const char *line, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n')
            return false;
    return true;
}

/* One line's message (a JSON object with "topic" and "body") appended to
   *msgs: 0, or -1 with the error printed. */
static int
s_add_line (const char *path, unsigned long lineno, const char *line, size_t len,
            fh_pub_jmsg_t **msgs, size_t *count, size_t *cap)
{
    json_error_t error;
    json_t *root = json_loadb (line, len, JSON_ALLOW_NUL, &error);
    if (!root) {
        fprintf (stderr, "fanhub pub: %s:%lu:%d: %s\n", path, lineno, error.column, error.text);
        return -1;
    }
    json_t *topic = json_object_get (root, "topic");
    json_t *body = json_object_get (root, "body");
    if (!json_is_string (topic) || !body) {
        fprintf (stderr,
                 "fanhub pub: %s:%lu: expected an object with \"topic\" (a string) and \"body\"\n",
                 path, lineno);
        json_decref (root);
        return -1;
    }
    if (*count == *cap) {
        size_t cap_new = *cap ? *cap * 2 : 1024;
        fh_pub_jmsg_t *msgs_new = realloc (*msgs, cap_new * sizeof **msgs);
        if (!msgs_new) {
            json_decref (root);
            fprintf (stderr, "fanhub pub: %s:%lu: out of memory\n", path, lineno);
            return -1;
        }
        *msgs = msgs_new;
        *cap = cap_new;
    }
    fh_buf_t buf = {0};
    fh_pyjson_encode (&buf, body);
    fh_pub_jmsg_t *msg = &(*msgs)[*count];
    msg->topic_size = json_string_length (topic);
    msg->topic = malloc (msg->topic_size + 1);
    msg->body = buf.data;
    msg->body_size = buf.size;
    (*count)++;
    if (msg->topic)
        memcpy (msg->topic, json_string_value (topic), msg->topic_size + 1);
    json_decref (root);
    if (buf.failed || !msg->topic) {
        fprintf (stderr, "fanhub pub: %s:%lu: out of memory\n", path, lineno);
        return -1;
    }
    return 0;
}

int
fh_pub_jsonl_load (const char *path, fh_pub_jmsg_t **msgs_p, size_t *count_p)
{
    FILE *file = fopen (path, "r");
    if (!file) {
        fprintf (stderr, "fanhub pub: %s: %s\n", path, strerror (errno));
        return -1;
    }
    fh_pub_jmsg_t *msgs = NULL;
    size_t count = 0, cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    unsigned long lineno = 0;
    int rc = 0;
    while (rc == 0 && (len = getline (&line, &line_cap, file)) != -1) {
        lineno++;
        if (!s_blank (line, (size_t) len))
            rc = s_add_line (path, lineno, line, (size_t) len, &msgs, &count, &cap);
    }
    if (rc == 0 && ferror (file)) {
        fprintf (stderr, "fanhub pub: %s: %s\n", path, strerror (errno));
        rc = -1;
    }
    if (rc == 0 && count == 0) {
        fprintf (stderr, "fanhub pub: %s: no messages in the file\n", path);
        rc = -1;
    }
    free (line);
    fclose (file);
    if (rc) {
        fh_pub_jsonl_free (msgs, count);
        return -1;
    }
    *msgs_p = msgs;
    *count_p = count;
    return 0;
}
