/*  pub_jsonl - the messages of `fanhub pub --jsonl FILE`, read and
    encoded once at load, as fedmsg encoded bodies (pyjson.h). */
#ifndef FH_PUB_JSONL_H_INCLUDED
#define FH_PUB_JSONL_H_INCLUDED

#include <stddef.h>

/* One message of a JSON-lines file, encoded once at load. */
typedef struct {
    char *topic;
    size_t topic_size;
    char *body;
    size_t body_size;
} fh_pub_jmsg_t;

/* Reads and encodes every message of a JSON-lines file. Blank lines are
   skipped; anything else that is not {"topic": STRING, "body": VALUE} is
   an error naming FILE:LINE. Returns 0, or -1 after printing why. */
int fh_pub_jsonl_load (const char *path, fh_pub_jmsg_t **msgs_p, size_t *count_p);
void fh_pub_jsonl_free (fh_pub_jmsg_t *msgs, size_t count);

#endif
