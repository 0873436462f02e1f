/*  Tests of a plugin's own figures (plugin/plugin_metrics.c, ABI 1.6):
    what host->metric_new refuses and why, the Prometheus family it
    names, and what metric_add and metric_set do to each kind. */
#include "plugin_metrics.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A registration that is refused, with why in its error. */
static void
s_refused (fh_plugin_metrics_t **set, const char *name, int kind, const char *help, const char *why)
{
    char err[256] = "";
    assert_null (fh_plugin_metric_new (set, "amqp", name, kind, help, err, sizeof err));
    if (!strstr (err, why))
        fail_msg ("%s: expected \"%s\" in \"%s\"", name ? name : "(null)", why, err);
}

static void
test_bad_names_kinds_and_help_are_refused (void **state)
{
    (void) state;
    fh_plugin_metrics_t *set = NULL;
    s_refused (&set, NULL, FANHUB_METRIC_COUNTER, "h", "a metric needs a name");
    s_refused (&set, "", FANHUB_METRIC_COUNTER, "h", "a metric needs a name");
    s_refused (&set, "Nacks", FANHUB_METRIC_COUNTER, "h", "start with a lowercase letter");
    s_refused (&set, "9lives", FANHUB_METRIC_COUNTER, "h", "start with a lowercase letter");
    s_refused (&set, "nacks-sent", FANHUB_METRIC_COUNTER, "h", "only a-z, 0-9 and _");
    s_refused (&set, "nacks sent", FANHUB_METRIC_COUNTER, "h", "only a-z, 0-9 and _");
    s_refused (&set, "nacks_total", FANHUB_METRIC_COUNTER, "h", "must not end in _total");
    s_refused (&set, "a234567890123456789012345678901234567890x", FANHUB_METRIC_GAUGE, "h",
               "longer than 40 bytes");
    s_refused (&set, "nacks", 2, "h", "neither FANHUB_METRIC_COUNTER nor FANHUB_METRIC_GAUGE");
    s_refused (&set, "nacks", FANHUB_METRIC_COUNTER, NULL, "help must be one line");
    s_refused (&set, "nacks", FANHUB_METRIC_COUNTER, "", "help must be one line");
    s_refused (&set, "nacks", FANHUB_METRIC_COUNTER, "two\nlines", "help must be one line");
    assert_int_equal (fh_plugin_metrics_count (set), 0);
    free (set);
}

static void
test_a_name_is_taken_once_and_a_set_has_room_for_32 (void **state)
{
    (void) state;
    fh_plugin_metrics_t *set = NULL;
    char err[256];
    assert_non_null (
        fh_plugin_metric_new (&set, "amqp", "nacks", FANHUB_METRIC_COUNTER, "n", err, sizeof err));
    s_refused (&set, "nacks", FANHUB_METRIC_GAUGE, "again", "registered already");
    for (int i = 1; i < FANHUB_METRICS_MAX; i++) {
        char name[16];
        snprintf (name, sizeof name, "m%d", i);
        assert_non_null (
            fh_plugin_metric_new (&set, "amqp", name, FANHUB_METRIC_GAUGE, "g", err, sizeof err));
    }
    assert_int_equal (fh_plugin_metrics_count (set), FANHUB_METRICS_MAX);
    s_refused (&set, "one_more", FANHUB_METRIC_GAUGE, "g", "at most 32 metrics");
    free (set);
}

static void
test_families_and_updates (void **state)
{
    (void) state;
    fh_plugin_metrics_t *set = NULL;
    char err[256];
    fanhub_metric_t *nacks = fh_plugin_metric_new (&set, "amqp", "nacks", FANHUB_METRIC_COUNTER,
                                                   "Nacks.", err, sizeof err);
    fanhub_metric_t *open = fh_plugin_metric_new (&set, "My-Plugin.2", "open", FANHUB_METRIC_GAUGE,
                                                  "Open.", err, sizeof err);
    assert_non_null (nacks);
    assert_non_null (open);
    assert_string_equal (nacks->family, "fanhub_plugin_amqp_nacks_total");
    assert_string_equal (open->family, "fanhub_plugin_my_plugin_2_open");
    fh_plugin_metric_add (nacks, 3);
    fh_plugin_metric_add (nacks, -2);  /* a counter never goes down */
    fh_plugin_metric_set (nacks, 100); /* nor is it set */
    assert_int_equal (fh_plugin_metric_value (nacks), 3);
    fh_plugin_metric_set (open, 10);
    fh_plugin_metric_add (open, -4);
    assert_int_equal (fh_plugin_metric_value (open), 6);
    fh_plugin_metric_add (NULL, 1); /* a refused metric's NULL: nothing */
    fh_plugin_metric_set (NULL, 1);
    free (set);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_bad_names_kinds_and_help_are_refused),
        cmocka_unit_test (test_a_name_is_taken_once_and_a_set_has_room_for_32),
        cmocka_unit_test (test_families_and_updates),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
