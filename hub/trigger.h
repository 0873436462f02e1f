/*  trigger - the trigger table: which consumers does a topic go to?

    Patterns, per consumer:
      "org.fedoraproject."   a plain pattern is a prefix (ZeroMQ's own
                             subscription semantics); "" matches everything;
      "*.buildsys.*"         '*' matches any run of characters, including
                             dots and none, over the whole topic;
      "=org.x.y"             matches exactly that topic.
    A consumer with no patterns gets every message.

    The table is built once at start (fh_trigger_add per pattern, then
    fh_trigger_seal) and then only read, from one thread. A lookup walks a
    byte trie once along the topic: prefix and exact patterns cost nothing
    per consumer; a glob is only tried when the topic starts with the
    glob's literal prefix. A lookup that had globs to try is remembered
    (topic -> consumers, a bounded hash table emptied when full), so a
    repeated topic costs a hash and a compare. Lookups do not lock; the
    memo (about 350 KiB) is allocated after a few dozen lookups that tried
    globs.
*/
#ifndef FH_TRIGGER_H_INCLUDED
#define FH_TRIGGER_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fh_trigger fh_trigger_t;

/* A table for consumers numbered 0 .. consumer_count-1. */
fh_trigger_t *fh_trigger_new (size_t consumer_count);
void fh_trigger_destroy (fh_trigger_t **self_p);

/* Adds one pattern for a consumer; an unsealed table only. Returns 0, or -1
   when out of memory. A consumer given no pattern matches nothing; call
   fh_trigger_add (t, c, "") for "everything". */
int fh_trigger_add (fh_trigger_t *self, size_t consumer, const char *pattern);
/* Freezes the table; lookups are allowed from now on. */
int fh_trigger_seal (fh_trigger_t *self);

/* Writes the indices of matching consumers, ascending, to out (room for
   consumer_count) and returns how many matched. */
size_t fh_trigger_match (fh_trigger_t *self, const void *topic, size_t size, uint32_t *out);

/* How many lookups the memo holds now (for tests). */
size_t fh_trigger_memo_size (const fh_trigger_t *self);

/* The ZeroMQ subscriptions that cover every pattern, fewest first: a
   prefix already covered by a shorter one is left out, and "" alone when
   anything needs everything. Valid until the table is destroyed. */
size_t fh_trigger_subscriptions (fh_trigger_t *self, const char *const **list);

/* Matches one pattern against one topic, with the rules above (for tools
   and tests; the table does not call it per consumer). */
bool fh_pattern_match (const char *pattern, const void *topic, size_t size);

#endif
