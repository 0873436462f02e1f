/*  test_cidr - bus.allow_ip entries: which texts are networks, with what
    reason the others are refused, and which peer addresses each one
    matches (IPv4, IPv6, IPv4-mapped IPv6, the prefix edges). Every
    address here is text parsed and compared in memory: no socket is
    opened, nothing is sent anywhere.
*/
#include "cidr.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static fh_cidr_t
parse_ok (const char *text)
{
    fh_cidr_t net;
    const char *why = NULL;
    if (fh_cidr_parse (text, &net, &why) != 0)
        fail_msg ("'%s' refused: %s", text, why);
    return net;
}

static void
test_valid_entries (void **state)
{
    (void) state;
    static const struct {
        const char *text;
        int prefix;
    } cases[] = {
        {"192.0.2.7", 32},
        {"10.0.0.0/8", 8},
        {"127.0.0.0/8", 8},
        {"0.0.0.0/0", 0},
        {"192.0.2.128/25", 25},
        {"::1", 128},
        {"::1/128", 128},
        {"2001:db8::/32", 32},
        {"::/0", 0},
        {"fe80::/10", 10},
        {"::ffff:10.0.0.0/104", 104},
        {"10.1.2.3/32", 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_cidr_t net = parse_ok (cases[i].text);
        if (net.prefix != cases[i].prefix)
            fail_msg ("'%s': prefix %d, expected %d", cases[i].text, net.prefix, cases[i].prefix);
    }
}

static void
test_bad_entries_say_why (void **state)
{
    (void) state;
    static const struct {
        const char *text;
        const char *why; /* a part of the reason */
    } cases[] = {
        {"", "not an IP address"},
        {"/8", "not an IP address"},
        {"host.example.org", "not an IP address"},
        {"10.0.0", "not an IP address"},
        {"256.0.0.0/8", "not an IP address"},
        {"fe80::1%eth0", "not an IP address"},
        {"10.0.0.0/", "not a number"},
        {"10.0.0.0/x", "not a number"},
        {"10.0.0.0/8/8", "not a number"},
        {"10.0.0.0/-1", "not a number"},
        {"10.0.0.0/ 8", "not a number"},
        {"10.0.0.0/0008", "not a number"},
        {"10.0.0.0/33", "IPv4 network is 0 to 32"},
        {"::/129", "IPv6 network is 0 to 128"},
        {"10.0.0.1/8", "bits are set past the prefix"},
        {"2001:db8::1/32", "bits are set past the prefix"},
        {"192.0.2.129/25", "bits are set past the prefix"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_cidr_t net;
        const char *why = NULL;
        if (fh_cidr_parse (cases[i].text, &net, &why) == 0)
            fail_msg ("'%s' accepted", cases[i].text);
        if (!why || !strstr (why, cases[i].why))
            fail_msg ("'%s': reason '%s', expected '%s' in it", cases[i].text, why ? why : "(none)",
                      cases[i].why);
    }
}

static void
test_matches (void **state)
{
    (void) state;
    static const struct {
        const char *net;
        const char *address;
        bool inside;
    } cases[] = {
        {"127.0.0.0/8", "127.0.0.1", true},
        {"127.0.0.0/8", "127.255.255.255", true},
        {"127.0.0.0/8", "128.0.0.1", false},
        {"127.0.0.0/8", "::ffff:127.0.0.1", true}, /* a dual-stack socket's view */
        {"127.0.0.0/8", "::1", false},
        {"10.0.0.0/8", "127.0.0.1", false},
        {"10.0.0.0/8", "10.200.3.4", true},
        {"192.0.2.128/25", "192.0.2.127", false},
        {"192.0.2.128/25", "192.0.2.128", true},
        {"192.0.2.128/25", "192.0.2.255", true},
        {"192.0.2.7", "192.0.2.7", true},
        {"192.0.2.7", "192.0.2.8", false},
        {"0.0.0.0/0", "203.0.113.9", true},
        {"0.0.0.0/0", "2001:db8::1", false},
        {"::1/128", "::1", true},
        {"::1/128", "::2", false},
        {"::1", "0:0:0:0:0:0:0:1", true},
        {"2001:db8::/32", "2001:db8:ffff::1", true},
        {"2001:db8::/32", "2001:db9::1", false},
        {"2001:db8::/32", "10.0.0.1", false},
        {"fe80::/10", "febf::1", true},
        {"fe80::/10", "fec0::1", false},
        {"::/0", "::ffff:10.0.0.1", true},
        {"::ffff:10.0.0.0/104", "::ffff:10.9.9.9", true},
        {"::ffff:10.0.0.0/104", "10.9.9.9", false},
        {"10.0.0.0/8", "", false},
        {"10.0.0.0/8", "not an address", false},
        {"10.0.0.0/8", "10.0.0.1:5555", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_cidr_t net = parse_ok (cases[i].net);
        if (fh_cidr_match (&net, cases[i].address) != cases[i].inside)
            fail_msg ("%s %s %s: expected %s", cases[i].address,
                      cases[i].inside ? "outside" : "inside", cases[i].net,
                      cases[i].inside ? "inside" : "outside");
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_valid_entries),
        cmocka_unit_test (test_bad_entries_say_why),
        cmocka_unit_test (test_matches),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
