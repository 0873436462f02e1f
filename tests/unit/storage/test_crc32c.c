/*  test_crc32c - CRC-32C against RFC 3720's vectors, both implementations.

    The hardware path and the table must agree on every length and
    alignment (the instruction path has a byte prologue up to an 8-byte
    boundary and a byte epilogue), and incremental use must equal one call.
*/
#include "crc32c.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

typedef uint32_t (*s_crc_fn) (uint32_t, const void *, size_t);

static const s_crc_fn s_impls[] = {fh_crc32c, fh_crc32c_portable};

static void
test_rfc3720_vectors (void **state)
{
    (void) state;
    uint8_t buf[48];
    for (size_t k = 0; k < 2; k++) {
        s_crc_fn crc = s_impls[k];
        /* RFC 3720, B.4 "CRC Examples". */
        memset (buf, 0, 32);
        assert_int_equal (crc (0, buf, 32), 0x8A9136AA);
        memset (buf, 0xff, 32);
        assert_int_equal (crc (0, buf, 32), 0x62A8AB43);
        for (int i = 0; i < 32; i++)
            buf[i] = (uint8_t) i;
        assert_int_equal (crc (0, buf, 32), 0x46DD794E);
        for (int i = 0; i < 32; i++)
            buf[i] = (uint8_t) (31 - i);
        assert_int_equal (crc (0, buf, 32), 0x113FDB5C);
        static const uint8_t read10[48] = {
            0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
            0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        };
        assert_int_equal (crc (0, read10, sizeof read10), 0xD9963A56);
        /* The customary check value, and the empty input. */
        assert_int_equal (crc (0, "123456789", 9), 0xE3069283);
        assert_int_equal (crc (0, "", 0), 0);
    }
}

static void
test_implementations_agree (void **state)
{
    (void) state;
    uint8_t buf[4096 + 16];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1103515245 + 12345;
        buf[i] = (uint8_t) (x >> 16);
    }
    for (size_t align = 0; align < 16; align++)
        for (size_t len = 0; len < 300; len++)
            assert_int_equal (fh_crc32c (0, buf + align, len),
                              fh_crc32c_portable (0, buf + align, len));
    assert_int_equal (fh_crc32c (0, buf + 3, 4096), fh_crc32c_portable (0, buf + 3, 4096));
    print_message ("CRC32 instruction: %s\n", fh_crc32c_hardware () ? "used" : "not available");
}

static void
test_incremental (void **state)
{
    (void) state;
    const char *text = "The quick brown fox jumps over the lazy dog, twice over.";
    size_t len = strlen (text);
    uint32_t whole = fh_crc32c (0, text, len);
    for (size_t cut = 0; cut <= len; cut++)
        for (size_t k = 0; k < 2; k++) {
            uint32_t crc = s_impls[k](0, text, cut);
            assert_int_equal (s_impls[k](crc, text + cut, len - cut), whole);
        }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_rfc3720_vectors),
        cmocka_unit_test (test_implementations_agree),
        cmocka_unit_test (test_incremental),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
