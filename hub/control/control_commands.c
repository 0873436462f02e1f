/*  control_commands - the commands that name one consumer, and EMIT's
    answer. See control_commands.h. */
#include "control_commands.h"

#include "consumer.h"
#include "control_parse.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

size_t
fh_control_consumer_find (fh_hub_t *hub, fanhub_bytes_t name, char *reply, size_t size)
{
    for (size_t i = 0; i < fh_hub_consumer_count (hub); i++) {
        const char *each = fh_consumer_name (fh_hub_consumer (hub, i));
        if (name.size == strlen (each) && memcmp (name.data, each, name.size) == 0)
            return i;
    }
    char shown[80];
    fh_control_show (name.data, name.size, shown, sizeof shown);
    snprintf (reply, size, "ERROR no consumer '%s' in this hub", shown);
    return SIZE_MAX;
}

void
fh_control_pause (fh_hub_t *hub, fanhub_bytes_t name, bool pause, char *reply, size_t size)
{
    size_t index = fh_control_consumer_find (hub, name, reply, size);
    if (index == SIZE_MAX)
        return;
    fh_consumer_t *consumer = fh_hub_consumer (hub, index);
    bool was = fh_consumer_paused (consumer);
    fh_consumer_set_paused (consumer, pause);
    snprintf (reply, size, "OK %s '%s'%s", pause ? "paused" : "resumed",
              fh_consumer_name (consumer),
              was == pause ? (pause ? " (it was paused)" : " (it was not paused)") : "");
}

uint64_t
fh_control_restart_ask (fh_hub_t *hub, fanhub_bytes_t name, char *reply, size_t size)
{
    size_t index = fh_control_consumer_find (hub, name, reply, size);
    if (index == SIZE_MAX)
        return 0;
    const char *found = fh_consumer_name (fh_hub_consumer (hub, index));
    uint64_t ticket = fh_hub_restart_ask (hub, found);
    if (!ticket)
        snprintf (reply, size, "ERROR busy: another restart is under way; try again later");
    return ticket;
}

/* Outcomes are told under the name of the consumer that wrote them,
   whatever reloads did meanwhile. */
static void
s_add_outcome (const char *consumer, fh_outcome_t outcome, void *arg)
{
    if (outcome != FH_OUTCOME_NONE)
        json_object_set_new (arg, consumer, json_string (fh_outcome_name (outcome)));
}

char *
fh_control_emit_answer (fh_emit_t *emit, int matched, bool timed_out)
{
    json_t *outcomes = json_object ();
    fh_emit_each_outcome (emit, s_add_outcome, outcomes);
    json_t *answer = json_pack ("{s:i, s:b, s:b, s:o}", "matched", matched < 0 ? 0 : matched,
                                "handled", fh_emit_is_handled (emit), "timed_out", timed_out,
                                "outcomes", outcomes);
    char *text = answer ? json_dumps (answer, JSON_COMPACT) : NULL;
    json_decref (answer);
    return text;
}
