/*  sig_skim: the two long fields of a signed body are found as written,
    the plain case is told from every other, the blanked body is the body
    less those two texts, and unescaping refuses what it cannot do.
*/
#include "sig_skim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static fh_sig_fields_t
s_skim (const char *body)
{
    fh_sig_fields_t fields;
    fh_sig_skim (body, strlen (body), &fields);
    return fields;
}

static void
s_assert_raw (const fh_sig_raw_t *raw, const char *text)
{
    assert_non_null (raw->text);
    assert_int_equal (raw->size, strlen (text));
    assert_memory_equal (raw->text, text, raw->size);
}

static void
test_plain_body (void **state)
{
    (void) state;
    const char *body = " {\"topic\":\"t\",\"certificate\":\"AB\\nCD\\n\",\"msg\":{\"a\":[1,\"}\"]},"
                       "\"signature\" : \"x\\/y\"} \n";
    fh_sig_fields_t f = s_skim (body);
    assert_true (f.plain);
    s_assert_raw (&f.cert, "AB\\nCD\\n");
    s_assert_raw (&f.sig, "x\\/y");
    assert_int_equal (f.cert.least, 6);
    assert_int_equal (f.sig.least, 3);

    fh_buf_t out = {0};
    assert_true (fh_sig_blanked (body, strlen (body), &f, &out));
    const char *blank = " {\"topic\":\"t\",\"certificate\":\"\",\"msg\":{\"a\":[1,\"}\"]},"
                        "\"signature\" : \"\"} \n";
    assert_int_equal (out.size, strlen (blank));
    assert_memory_equal (out.data, blank, out.size);
    assert_true (fh_sig_unescape (&f.cert, &out));
    assert_int_equal (out.size, 6);
    assert_memory_equal (out.data, "AB\nCD\n", 6);
    assert_true (fh_sig_unescape (&f.sig, &out));
    assert_int_equal (out.size, 3);
    assert_memory_equal (out.data, "x/y", 3);
    free (out.data);

    /* Escaped quotes and backslashes do not end a string. */
    f = s_skim ("{\"certificate\":\"a\\\"b\\\\\",\"signature\":\"s\\\\\"}");
    assert_true (f.plain);
    s_assert_raw (&f.cert, "a\\\"b\\\\");
    assert_int_equal (f.cert.least, 4);
    s_assert_raw (&f.sig, "s\\\\");
    assert_int_equal (f.sig.least, 2);

    /* The signature first works the same. */
    f = s_skim ("{\"signature\":\"s\",\"certificate\":\"c\"}");
    assert_true (f.plain);
    s_assert_raw (&f.sig, "s");
    s_assert_raw (&f.cert, "c");
}

static void
test_anything_else_is_not_plain (void **state)
{
    (void) state;
    static const char *const bodies[] = {
        "{\"certificate\":\"c\"}",                                           /* no signature */
        "{\"certificate\":\"c\",\"signature\":5}",                           /* not a string */
        "{\"certificate\":\"c\",\"signature\":\"s\",\"certificate\":\"d\"}", /* twice */
        "{\"certific\\u0061te\":\"d\",\"certificate\":\"c\",\"signature\":\"s\"}", /* escaped key */
        "{\"certificate\":\"c\",\"signature\":\"s\"} x",       /* after the end */
        "{\"certificate\":\"c\",\"signature\":\"s\"",          /* no end */
        "{\"certificate\":\"c\xc3\xa9\",\"signature\":\"s\"}", /* not ASCII */
        "{\"certificate\":\"c\tc\",\"signature\":\"s\"}",      /* a control character */
        "[\"certificate\",\"signature\"]",                     /* not an object */
        "",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        fh_sig_fields_t f = s_skim (bodies[i]);
        if (f.plain)
            fail_msg ("plain: %s", bodies[i]);
    }
}

static void
test_least_lengths_bound_before_parsing (void **state)
{
    (void) state;
    /* Not plain (no end), still measured: the size check needs no parse. */
    fh_sig_fields_t f = s_skim ("{\"certificate\":\"\\u0041\\n12\",\"signature\":\"ss\", \"x\":");
    assert_false (f.plain);
    assert_int_equal (f.cert.least, 4);
    assert_int_equal (f.sig.least, 2);
}

static void
test_unescape_refuses_what_it_cannot_do (void **state)
{
    (void) state;
    fh_buf_t out = {0};
    fh_sig_raw_t u = {.text = "a\\u0041", .size = 7};
    assert_false (fh_sig_unescape (&u, &out));
    fh_sig_raw_t bad = {.text = "a\\x", .size = 3};
    assert_false (fh_sig_unescape (&bad, &out));
    fh_sig_raw_t cut = {.text = "a\\", .size = 2};
    assert_false (fh_sig_unescape (&cut, &out));
    fh_sig_raw_t all = {.text = "\\\"\\\\\\/\\b\\f\\n\\r\\t", .size = 16};
    assert_true (fh_sig_unescape (&all, &out));
    assert_int_equal (out.size, 8);
    assert_memory_equal (out.data, "\"\\/\b\f\n\r\t", 8);
    free (out.data);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_plain_body),
        cmocka_unit_test (test_anything_else_is_not_plain),
        cmocka_unit_test (test_least_lengths_bound_before_parsing),
        cmocka_unit_test (test_unescape_refuses_what_it_cannot_do),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
