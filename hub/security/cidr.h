/*  cidr - IP networks for allow lists: "192.0.2.7", "10.0.0.0/8",
    "2001:db8::/32", "::1/128".

    An entry without a prefix length is one address (/32 or /128). An
    entry with bits set past its prefix ("10.0.0.1/8") is refused rather
    than widened: it is more often a typo than a network. An IPv4 network
    matches an IPv4 peer and the same peer seen on an IPv6 socket as an
    IPv4-mapped address (::ffff:10.1.2.3); an IPv6 network matches IPv6
    addresses only (write ::ffff:10.0.0.0/104 to match mapped ones). No
    name lookup, no zone index ("fe80::1%eth0").
*/
#ifndef FH_CIDR_H_INCLUDED
#define FH_CIDR_H_INCLUDED

#include <stdbool.h>

typedef struct {
    int family;              /* AF_INET or AF_INET6 */
    unsigned char bytes[16]; /* network address, 4 or 16 bytes used */
    int prefix;              /* 0..32 or 0..128 */
} fh_cidr_t;

/* Parses text into *out: 0, or -1 with *why set to a reason for a
   person (a static string). */
int fh_cidr_parse (const char *text, fh_cidr_t *out, const char **why);

/* True when address (text, as libzmq gives a peer's: "10.1.2.3", "::1",
   "::ffff:10.1.2.3") is inside net. False for an address that does not
   parse. */
bool fh_cidr_match (const fh_cidr_t *net, const char *address);

#endif
