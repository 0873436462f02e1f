/*  test_sdk - the SDK's one home for base64, RFC 3339 times and JSON
    string escaping (fanhub/sdk.h), which the hub and the plugins share.

    Base64 against RFC 4648's vectors, a round trip of every byte value,
    and each text the decoder refuses; RFC 3339 at the epoch, before it,
    at each fraction width; JSON escapes of every byte class; cuts at a
    UTF-8 boundary (fanhub_utf8_cut, _copy, _format) at every byte of
    characters of each length.
*/
#include <fanhub/sdk.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

static void
test_base64_rfc4648_vectors (void **state)
{
    (void) state;
    static const char *const vectors[][2] = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
    };
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        const char *plain = vectors[i][0], *text = vectors[i][1];
        char out[16];
        size_t n = fanhub_base64_encode (out, plain, strlen (plain));
        assert_int_equal (n, strlen (text));
        assert_int_equal (n, fanhub_base64_size (strlen (plain)));
        assert_memory_equal (out, text, n);
        char back[16];
        assert_int_equal (fanhub_base64_decode (back, text, n, false), strlen (plain));
        assert_memory_equal (back, plain, strlen (plain));
    }
}

static void
test_base64_round_trip (void **state)
{
    (void) state;
    unsigned char data[256], back[256 + 3];
    char text[344];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char) (255 - i);
    for (size_t size = 0; size <= sizeof data; size++) {
        size_t n = fanhub_base64_encode (text, data, size);
        assert_int_equal (fanhub_base64_decode (back, text, n, false), size);
        assert_memory_equal (back, data, size);
    }
}

static void
test_base64_decode_forms (void **state)
{
    (void) state;
    unsigned char out[16];
    /* Padding left out or cut short. */
    assert_int_equal (fanhub_base64_decode (out, "QQ", 2, false), 1);
    assert_int_equal (fanhub_base64_decode (out, "QQ=", 3, false), 1);
    assert_int_equal (fanhub_base64_decode (out, "QUI", 3, false), 2);
    assert_int_equal (out[0], 'A');
    assert_int_equal (out[1], 'B');
    /* Lines: white space skipped only when asked. */
    static const char lines[] = "Zm9v\nYmFy\r\n YQ==\n";
    assert_int_equal (fanhub_base64_decode (out, lines, strlen (lines), true), 7);
    assert_memory_equal (out, "foobara", 7);
    assert_int_equal (fanhub_base64_decode (out, lines, strlen (lines), false), -1);
}

static void
test_base64_decode_refuses (void **state)
{
    (void) state;
    static const char *const bad[] = {
        "Q",      /* one digit cannot hold a byte */
        "QUJDR",  /* nor can one after whole groups */
        "QR==",   /* leftover bits not zero: not canonical */
        "QQ===",  /* padding past the group */
        "QUJD=",  /* padding after a whole group */
        "Q=Q=",   /* a digit after padding */
        "Zm9v!",  /* not in the alphabet */
        "Zm-v",   /* the URL alphabet is not this one */
        "Zm9v\n", /* white space without lines */
    };
    unsigned char out[16];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ptrdiff_t n = fanhub_base64_decode (out, bad[i], strlen (bad[i]), false);
        if (n != -1)
            fail_msg ("\"%s\" decoded to %td bytes", bad[i], n);
    }
    assert_int_equal (fanhub_base64_decode (out, "Zm9v\0", 5, true), -1);
}

static void
test_rfc3339 (void **state)
{
    (void) state;
    static const struct {
        int64_t ns;
        int digits;
        const char *text;
    } cases[] = {
        {0, 0, "1970-01-01T00:00:00Z"},
        {0, 3, "1970-01-01T00:00:00.000Z"},
        {INT64_C (1795749541123456789), 0, "2026-11-27T03:19:01Z"},
        {INT64_C (1795749541123456789), 3, "2026-11-27T03:19:01.123Z"},
        {INT64_C (1795749541123456789), 6, "2026-11-27T03:19:01.123456Z"},
        {INT64_C (1795749541123456789), 9, "2026-11-27T03:19:01.123456789Z"},
        {INT64_C (1795749541123456789), 12, "2026-11-27T03:19:01.123456789Z"},
        {-1, 9, "1969-12-31T23:59:59.999999999Z"}, /* towards the past */
        {-1, 0, "1969-12-31T23:59:59Z"},
        {INT64_C (951782400000000000), 1, "2000-02-29T00:00:00.0Z"}, /* leap day */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[FANHUB_RFC3339_SIZE];
        memset (out, 'x', sizeof out);
        size_t n = fanhub_rfc3339 (out, cases[i].ns, cases[i].digits);
        assert_string_equal (out, cases[i].text);
        assert_int_equal (n, strlen (cases[i].text));
    }
}

static void
test_json_escape (void **state)
{
    (void) state;
    static const struct {
        const char *in;
        size_t size;
        const char *out;
    } cases[] = {
        {"plain text", 10, "plain text"},
        {"\"q\" \\", 5, "\\\"q\\\" \\\\"},
        {"\b\f\n\r\t", 5, "\\b\\f\\n\\r\\t"},
        {"\x01\x1f", 2, "\\u0001\\u001f"},
        {"a\0b", 3, "a\\u0000b"},
        {"\x7f\xc3\xa9/", 4, "\x7f\xc3\xa9/"}, /* DEL, UTF-8 and '/' as they are */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        size_t n = fanhub_json_escape (out, cases[i].in, cases[i].size);
        assert_string_equal (out, cases[i].out);
        assert_int_equal (n, strlen (cases[i].out));
    }
}

static void
test_utf8_cut (void **state)
{
    (void) state;
    /* "aé€😀": 1 + 2 + 3 + 4 bytes; every cut inside a character moves
       back to its start, every cut between characters stays. */
    const char *text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    size_t len = strlen (text);
    static const size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10, 10};
    for (size_t max = 0; max < sizeof want / sizeof *want; max++) {
        size_t cut = fanhub_utf8_cut (text, len, max);
        assert_int_equal (cut, want[max]);
        assert_true (fanhub_utf8_valid (text, cut));
    }
    /* Not UTF-8: cut where asked. */
    assert_int_equal (fanhub_utf8_cut ("\x80\x80\x80\x80\x80\x80", 6, 5), 5);
    assert_int_equal (fanhub_utf8_cut ("ab\xff", 3, 2), 2);
}

static void
test_utf8_copy_and_format (void **state)
{
    (void) state;
    char pad[300], out[256];
    memset (pad, 'a', sizeof pad);
    /* 254 ASCII + "é": vsnprintf keeps 254 + the é's first byte. */
    pad[254] = '\0';
    assert_int_equal (fanhub_utf8_format (out, sizeof out, "%s\xc3\xa9", pad), 254);
    assert_int_equal (strlen (out), 254);
    assert_true (fanhub_utf8_valid (out, strlen (out)));
    /* 253 ASCII + "€" (3 bytes): two of its bytes fit, both go. */
    pad[253] = '\0';
    assert_int_equal (fanhub_utf8_format (out, sizeof out, "%s\xe2\x82\xac!", pad), 253);
    /* 252 + "€": it fits whole, what follows is cut. */
    pad[252] = '\0';
    assert_int_equal (fanhub_utf8_format (out, sizeof out, "%s\xe2\x82\xac!", pad), 255);
    assert_memory_equal (out + 252, "\xe2\x82\xac", 4);
    /* 251 + "😀" (4 bytes): fits whole. 252 + it: it goes. */
    pad[251] = '\0';
    assert_int_equal (fanhub_utf8_format (out, sizeof out, "%s\xf0\x9f\x98\x80", pad), 255);
    pad[251] = 'a';
    pad[252] = '\0';
    assert_int_equal (fanhub_utf8_format (out, sizeof out, "%s\xf0\x9f\x98\x80", pad), 252);
    /* Not cut: as vsnprintf wrote it. */
    assert_int_equal (fanhub_utf8_format (out, sizeof out, "x%dy", 7), 3);
    assert_string_equal (out, "x7y");
    /* Copy: the same rule; size 0 writes nothing; 1 gives "". */
    char small[4];
    assert_int_equal (fanhub_utf8_copy (small, sizeof small, "ab\xc3\xa9"), 2);
    assert_string_equal (small, "ab");
    assert_int_equal (fanhub_utf8_copy (small, sizeof small, "a\xc3\xa9"), 3);
    assert_string_equal (small, "a\xc3\xa9");
    assert_int_equal (fanhub_utf8_copy (small, 0, "abc"), 0);
    assert_int_equal (fanhub_utf8_copy (small, 1, "abc"), 0);
    assert_string_equal (small, "");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_base64_rfc4648_vectors),
        cmocka_unit_test (test_base64_round_trip),
        cmocka_unit_test (test_base64_decode_forms),
        cmocka_unit_test (test_base64_decode_refuses),
        cmocka_unit_test (test_rfc3339),
        cmocka_unit_test (test_json_escape),
        cmocka_unit_test (test_utf8_cut),
        cmocka_unit_test (test_utf8_copy_and_format),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
