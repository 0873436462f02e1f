/*  spool_msg - the messages the spool tests write: a topic, a body whose
    size and bytes follow from the sequence number (so a reader can check
    every byte), and every third message a third frame. Shared by
    test_spool.c and test_spool_writer.c. Include it once, in the test's
    .c file, after <fanhub/consumer.h>.
*/
#ifndef SPOOL_MSG_H_INCLUDED
#define SPOOL_MSG_H_INCLUDED

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char topic[48];
    uint8_t body[600];
    uint8_t extra[8];
    fanhub_bytes_t frames[3];
    uint32_t count;
} spool_msg_t;

/* Message seq, with the topic "TOPIC.SEQ". */
static inline void
spool_msg_make (spool_msg_t *m, const char *topic, uint64_t seq)
{
    snprintf (m->topic, sizeof m->topic, "%s.%llu", topic, (unsigned long long) seq);
    size_t body = (size_t) (seq * 37 % 500);
    for (size_t i = 0; i < body; i++)
        m->body[i] = (uint8_t) (seq + i * 13);
    memcpy (m->extra, &seq, 8);
    m->frames[0] = (fanhub_bytes_t){m->topic, strlen (m->topic)};
    m->frames[1] = (fanhub_bytes_t){m->body, body};
    m->frames[2] = (fanhub_bytes_t){m->extra, 8};
    m->count = seq % 3 == 0 ? 3 : 2;
}

#endif
