/*  test_config_control - what a control client reads of a configuration
    file that does not load: fh_config_control_only on its text (its
    control key, or the default endpoint of its name; nothing when the
    YAML does not parse or more than the YAML would be needed), and
    fh_config_load_for_control, which reads the file once. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_dir.h"

static void
s_expect (const char *text, const char *control)
{
    fh_config_t *cfg = fh_config_control_only (text, strlen (text), "t.yaml");
    if (!control && cfg)
        fail_msg ("expected nothing, got %s, from:\n%s", cfg->control, text);
    if (control && (!cfg || strcmp (cfg->control, control) != 0))
        fail_msg ("expected %s, got %s, from:\n%s", control, cfg ? cfg->control : "nothing", text);
    if (cfg)
        assert_string_equal (cfg->source, "t.yaml");
    fh_config_destroy (&cfg);
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
    s_expect ("control: ipc:///run/x/h.sock\nname: ../x\n", "ipc:///run/x/h.sock");
    /* No control: the default of the name, as the hub made it. */
    s_expect ("name: bus-a\nbogus: 1\n", "ipc:///run/user/1000/fanhub-bus-a.sock");
    s_expect ("name: .hidden\nbogus: 1\n", "ipc:///run/user/1000/fanhub-.hidden.sock");
    s_expect ("bogus: 1\n", "ipc:///run/user/1000/fanhub.sock");
    setenv ("FANHUB_TEST_CONTROL", "ipc:///run/y/h.sock", 1);
    s_expect ("control: ${FANHUB_TEST_CONTROL}\nbogus: 1\n", "ipc:///run/y/h.sock");
    unsetenv ("FANHUB_TEST_CONTROL");

    s_expect ("control: ipc:///run/x/h.sock\nconsumers: [\n", NULL);     /* YAML broken */
    s_expect ("- control: ipc:///run/x/h.sock\n", NULL);                 /* not a map */
    s_expect ("control: ipc:///a.sock\ncontrol: ipc:///b.sock\n", NULL); /* twice */
    s_expect ("control: ${FANHUB_TEST_CONTROL}\n", NULL);                /* unset */
    s_expect ("control: tcp://*:7001\n", NULL);                          /* no address */
    s_expect ("control: ipc://@fanhub\n", NULL);                         /* abstract */
    /* Off loopback: refused. The address (TEST-NET-1) is only parsed and
       compared, never contacted: nothing in this test opens a socket. */
    s_expect ("control: tcp://192.0.2.7:7001\n", NULL);
    s_expect ("control: [a, b]\n", NULL);                                  /* not a text */
    s_expect ("name: ../x\n", NULL);                                       /* not a name */
    s_expect ("control: tcp://127.0.0.1:7001\ncontrol_curve: {}\n", NULL); /* keys needed */
    unsetenv ("XDG_RUNTIME_DIR");
}

/* The file is read once: the error and the endpoint come from one text. */
static void
test_load_for_control (void **state)
{
    (void) state;
    char err[512];
    bool control_only = true;
    assert_null (
        fh_config_load_for_control ("/nonexistent/fanhub.yaml", &control_only, err, sizeof err));
    assert_false (control_only);
    assert_string_equal (err, "/nonexistent/fanhub.yaml: cannot open: No such file or directory");

    char path[512];
    int fd = mkstemp (test_tmp_template (path, sizeof path, "test_config_control"));
    assert_true (fd >= 0);
    static const char text[] = "control: ipc:///run/x/h.sock\nbogus: 1\n";
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    fh_config_t *cfg = fh_config_load_for_control (path, &control_only, err, sizeof err);
    assert_non_null (cfg);
    assert_true (control_only);
    assert_string_equal (cfg->control, "ipc:///run/x/h.sock");
    assert_non_null (strstr (err, ":2:1: bogus: unknown key"));
    fh_config_destroy (&cfg);
    unlink (path);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_what_a_broken_file_still_gives),
        cmocka_unit_test (test_load_for_control),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
