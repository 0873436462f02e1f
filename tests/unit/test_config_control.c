/*  test_config_control - what a control client reads of a configuration
    file that does not load (fh_config_control_only): its control key, or
    the default endpoint of its name, and nothing when the YAML itself
    does not parse or CURVE keys would be needed. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_dir.h"

/* fh_config_control_only of a file holding text: its control, or NULL.
   The answer is the caller's to free. */
static char *
s_control_of (const char *text)
{
    char path[512];
    int fd = mkstemp (test_tmp_template (path, sizeof path, "test_config_control"));
    assert_true (fd >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    fh_config_t *cfg = fh_config_control_only (path);
    char *control = cfg ? strdup (cfg->control) : NULL;
    if (cfg)
        assert_string_equal (cfg->source, path);
    fh_config_destroy (&cfg);
    unlink (path);
    return control;
}

static void
s_expect (const char *text, const char *control)
{
    char *got = s_control_of (text);
    if (!control && got)
        fail_msg ("expected nothing, got %s, from:\n%s", got, text);
    if (control && (!got || strcmp (got, control) != 0))
        fail_msg ("expected %s, got %s, from:\n%s", control, got ? got : "nothing", text);
    free (got);
}

static void
test_what_a_broken_file_still_gives (void **state)
{
    (void) state;
    setenv ("XDG_RUNTIME_DIR", "/run/user/1000", 1);
    unsetenv ("RUNTIME_DIRECTORY");
    /* An unknown key, a missing consumers: the control key stands. */
    s_expect ("control: ipc:///run/x/h.sock\nbogus: 1\n", "ipc:///run/x/h.sock");
    s_expect ("control: tcp://127.0.0.1:7001\nconsumers: 3\n", "tcp://127.0.0.1:7001");
    /* No control: the default of the name, as the hub made it. */
    s_expect ("name: bus-a\nbogus: 1\n", "ipc:///run/user/1000/fanhub-bus-a.sock");
    s_expect ("bogus: 1\n", "ipc:///run/user/1000/fanhub.sock");
    setenv ("FANHUB_TEST_CONTROL", "ipc:///run/y/h.sock", 1);
    s_expect ("control: ${FANHUB_TEST_CONTROL}\nbogus: 1\n", "ipc:///run/y/h.sock");
    unsetenv ("FANHUB_TEST_CONTROL");

    s_expect ("control: ipc:///run/x/h.sock\nconsumers: [\n", NULL); /* YAML broken */
    s_expect ("- control: ipc:///run/x/h.sock\n", NULL);             /* not a map */
    s_expect ("control: ${FANHUB_TEST_CONTROL}\n", NULL);            /* unset */
    s_expect ("control: tcp://*:7001\n", NULL);                      /* not a control endpoint */
    s_expect ("name: ../x\n", NULL);                                 /* not a name */
    s_expect ("control: [a, b]\n", NULL);                            /* not a scalar */
    s_expect ("control: tcp://127.0.0.1:7001\ncontrol_curve: {}\n", NULL); /* keys needed */
    unsetenv ("XDG_RUNTIME_DIR");
}

static void
test_missing_file (void **state)
{
    (void) state;
    assert_null (fh_config_control_only ("/nonexistent/fanhub.yaml"));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_what_a_broken_file_still_gives),
        cmocka_unit_test (test_missing_file),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
