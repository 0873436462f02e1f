/*  test_sdk_curve_header - fanhub/sdk_curve.h compiles on its own: it is
    the first thing this file includes (before libc, CZMQ or the other SDK
    headers), and what it defines works. cmocka comes after, for the
    checks. */
#include <fanhub/sdk_curve.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static void
test_key_valid (void **state)
{
    (void) state;
    /* The Z85 test vector of ZeroMQ's RFC 32, twice: 40 characters. */
    assert_true (fanhub_curve_key_valid ("HelloWorldHelloWorldHelloWorldHelloWorld"));
    assert_false (fanhub_curve_key_valid ("HelloWorld"));
    assert_false (fanhub_curve_key_valid ("HelloWorldHelloWorldHelloWorldHelloWorl\""));
    assert_false (fanhub_curve_key_valid (NULL));
    assert_int_equal (FANHUB_CURVE_KEY_TEXT, 41);
}

static void
test_missing_secret_file (void **state)
{
    (void) state;
    char public_txt[FANHUB_CURVE_KEY_TEXT], secret_txt[FANHUB_CURVE_KEY_TEXT], err[256];
    assert_int_equal (fanhub_curve_load_secret ("/nonexistent/key_secret", public_txt, secret_txt,
                                                err, sizeof err),
                      -1);
    assert_non_null (strstr (err, "/nonexistent/key_secret"));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_key_valid),
        cmocka_unit_test (test_missing_secret_file),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
