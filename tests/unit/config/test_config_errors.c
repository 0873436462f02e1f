/*  test_config_errors - the configuration refused (hub/config/config.c):
    every error a text can give, word for word.

    The error cases are a table: a YAML text loaded as "t.yaml" and the
    exact start of the one-line error it must give, position included.
*/
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config_kit.h"

typedef struct {
    const char *name;
    const char *text;
    const char *error; /* the exact start of the message */
} s_error_case_t;

#define TOP_KNOWN                                                                                  \
    "(known: name, bus, control, control_curve, control_insecure, shutdown_timeout, consumers, "   \
    "state_dir, spool, memory, log_level, metrics, include)"
#define BUS_KNOWN                                                                                  \
    "(known: connect, bind, rcvhwm, max_frames, max_message_bytes, publish, gap_detection, "       \
    "curve, allow_ip, max_peers, amqp, connect_warning, validate_signatures)"
#define CONSUMER_KNOWN                                                                             \
    "(known: name, plugin, fedora_messaging, topics, queue, options, retry, consume_timeout, "     \
    "workers, order_by, coalesce, max_pending, shard, max_crashes, publish)"
#define NAME_RULE "expected a name of 1 to 64 characters from A-Z a-z 0-9 _ . -, not . or .."
#define INT_RCVHWM "expected an integer from 0 to 2147483647, got "
#define INT_CAPACITY "expected an integer from 1 to 1073741824, got "
#define SECONDS                                                                                    \
    "expected a duration such as 250ms, 2s or 1m from 0 to 3600 s (a bare number is seconds), "    \
    "got "
/* A consumer c, then a second one with KEYS at line 6 (indent 4). */
#define C2(keys) BUS CONSUMERS "  - name: d\n" keys

/* Every case is refused while the text is parsed: the non-loopback
   addresses in them are text only, never bound, connected to or sent
   anything (no traffic leaves loopback). */
static const s_error_case_t s_error_cases[] = {
    /* The document */
    {"syntax error", "bus: [a\n",
     "t.yaml:2:1: YAML syntax error: did not find expected ',' or ']' "
     "(while parsing a flow sequence)"},
    {"tab indentation", "bus:\n\tconnect: x\n",
     "t.yaml:2:1: YAML syntax error: found character that cannot start "
     "any token (while scanning for the next token)"},
    {"undefined alias", BUS "consumers: *nope\n",
     "t.yaml:3:12: YAML syntax error: found undefined alias"},
    {"unquoted glob", BUS "consumers:\n  - name: a\n    plugin: p\n    topics: *.build.*\n",
     "t.yaml:6:14: YAML syntax error: did not find expected alphabetic or numeric character "
     "(while scanning an alias): a value starting with * must be quoted"},
    {"unquoted glob in a list", BUS "consumers:\n  - {name: a, plugin: p, topics: [*]}\n",
     "t.yaml:4:36: YAML syntax error: did not find expected alphabetic or numeric character "
     "(while scanning an alias): a value starting with * must be quoted"},
    {"duplicate anchor", "bus: &a {connect: tcp://a:1}\nname: &a x\n" CONSUMERS,
     "t.yaml:2:7: YAML syntax error: found duplicate anchor (first "
     "occurrence at line 1)"},
    {"invalid UTF-8", "name: \xff\n",
     "t.yaml:1:7: YAML syntax error: invalid leading UTF-8 octet (byte 0xff "
     "at offset 6)"},
    {"empty", "",
     "t.yaml:1:1: empty configuration: expected a map with at least bus: "
     "and consumers:"},
    {"only comments", "# nothing\n\n",
     "t.yaml:1:1: empty configuration: expected a map with at least bus: "
     "and consumers:"},
    {"only a document marker", "---\n",
     "t.yaml:2:1: empty configuration: expected a map with at least bus: "
     "and consumers:"},
    {"two documents", BUS CONSUMERS "---\nbus: x\n",
     "t.yaml:6:1: a second YAML document: the configuration is one "
     "document"},
    {"two documents, second empty", BUS CONSUMERS "---\n", "t.yaml:6:1: a second YAML document"},
    {"top level a list", "- a\n", "t.yaml:1:1: expected a map " TOP_KNOWN ", got a list"},
    {"top level a scalar", "hello\n", "t.yaml:1:1: expected a map " TOP_KNOWN ", got 'hello'"},
    {"key not a scalar", "? [a]\n: 1\n", "t.yaml:1:3: expected a key, got a list"},
    {"null key", "~: 1\n", "t.yaml:1:1: expected a key, got nothing"},

    /* Unknown keys, at every level */
    {"unknown top key", BUS CONSUMERS "bsu: 1\n", "t.yaml:6:1: bsu: unknown key " TOP_KNOWN},
    {"unknown bus key", "bus:\n  connect: tcp://a:1\n  rcvhm: 5\n" CONSUMERS,
     "t.yaml:3:3: bus.rcvhm: unknown key " BUS_KNOWN},
    {"unknown consumer key", C2 ("    plugin: p\n    topic: [a]\n"),
     "t.yaml:8:5: consumers[1].topic: unknown key " CONSUMER_KNOWN},
    {"max_crashes 0", C2 ("    plugin: p\n    max_crashes: 0\n"),
     "t.yaml:8:18: consumers[1].max_crashes: expected an integer from 1 to 1000, got '0'"},
    {"max_crashes past 1000", C2 ("    plugin: p\n    max_crashes: 1001\n"),
     "t.yaml:8:18: consumers[1].max_crashes: expected an integer from 1 to 1000, got '1001'"},
    {"unknown queue key", C2 ("    plugin: p\n    queue: {size: 5}\n"),
     "t.yaml:8:13: consumers[1].queue.size: unknown key (known: capacity, warn_at, overflow, "
     "spool_max_bytes, write_ahead, max_bytes)"},

    /* Duplicate keys, at every level */
    {"duplicate top key", BUS CONSUMERS "bus: x\n",
     "t.yaml:6:1: bus: duplicate key (first at line 1)"},
    {"duplicate bus key", "bus:\n  connect: tcp://a:1\n  connect: tcp://b:1\n" CONSUMERS,
     "t.yaml:3:3: bus.connect: duplicate key (first at line 2)"},
    {"duplicate consumer key", C2 ("    plugin: p\n    name: e\n"),
     "t.yaml:8:5: consumers[1].name: duplicate key (first at line 6)"},
    {"duplicate queue key", C2 ("    plugin: p\n    queue: {capacity: 1, capacity: 2}\n"),
     "t.yaml:8:26: consumers[1].queue.capacity: duplicate key (first at "
     "line 8)"},
    {"duplicate option key",
     C2 ("    plugin: p\n    options:\n      a: 1\n      b: 2\n      a: 3\n"),
     "t.yaml:11:7: consumers[1].options.a: duplicate key (first at line 9)"},
    {"duplicate nested option key",
     C2 ("    plugin: p\n    options:\n      a: [1, {x: 1, y: 2, x: 3}]\n"),
     "t.yaml:9:27: consumers[1].options.a[1].x: duplicate key (first at "
     "line 9)"},
    {"first duplicate in file order",
     "bus: {connect: tcp://a:1, z: 1, y: 2, z: 3, y: 4}\n" CONSUMERS,
     "t.yaml:1:39: bus.z: duplicate key (first at line 1)"},

    /* name: */
    {"name a list", "name: [a]\n" BUS CONSUMERS, "t.yaml:1:7: name: " NAME_RULE ", got a list"},
    {"name with a space", "name: a b\n" BUS CONSUMERS,
     "t.yaml:1:7: name: " NAME_RULE ", got 'a b'"},
    {"name empty", "name: ''\n" BUS CONSUMERS, "t.yaml:1:7: name: " NAME_RULE ", got ''"},
    {"name null", "name:\n" BUS CONSUMERS, "t.yaml:1:6: name: " NAME_RULE ", got nothing"},
    {"name too long",
     "name: a234567890123456789012345678901234567890123456789012345678901234"
     "5\n" BUS CONSUMERS,
     "t.yaml:1:7: name: " NAME_RULE ", got 'a2345678901234567890123456789"
     "01234567890...'"},
    {"name with a NUL", "name: \"a\\0b\"\n" BUS CONSUMERS,
     "t.yaml:1:7: name: " NAME_RULE ", got a value with a NUL character"},

    /* bus: */
    {"missing bus", CONSUMERS, "t.yaml:1:1: bus: required key is missing"},
    {"bus a scalar", "bus: tcp://a:1\n" CONSUMERS,
     "t.yaml:1:6: bus: expected a map " BUS_KNOWN ", got 'tcp://a:1'"},
    {"bus null", "bus:\n" CONSUMERS, "t.yaml:1:5: bus: expected a map " BUS_KNOWN ", got nothing"},
    {"bus empty map", "bus: {}\n" CONSUMERS,
     "t.yaml:1:6: bus: expected at least one endpoint in connect: or bind:"},
    {"connect and bind empty", "bus:\n  connect: []\n  bind: []\n" CONSUMERS,
     "t.yaml:2:3: bus: expected at least one endpoint in connect: or bind:"},
    {"connect a map", "bus:\n  connect: {a: 1}\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: expected an endpoint or a list of "
     "endpoints, got a map"},
    {"connect null", "bus:\n  connect:\n  bind: tcp://*:1\n" CONSUMERS,
     "t.yaml:2:11: bus.connect: expected an endpoint or a list of "
     "endpoints, got nothing"},
    {"connect item a list", "bus:\n  connect: [[a]]\n" CONSUMERS,
     "t.yaml:2:13: bus.connect[0]: expected an endpoint, got a list"},
    {"bind item null", "bus:\n  bind: [tcp://*:1, ~]\n" CONSUMERS,
     "t.yaml:2:21: bus.bind[1]: expected an endpoint, got nothing"},
    {"udp endpoint", "bus:\n  connect: udp://a:1\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'udp://a:1': unsupported "
     "transport 'udp' (use tcp://, ipc:// or inproc://)"},
    {"endpoint without transport", "bus:\n  connect: [tcp://a:1, a:1]\n" CONSUMERS,
     "t.yaml:2:24: bus.connect[1]: invalid endpoint 'a:1': expected "
     "TRANSPORT://ADDRESS"},
    {"tcp without port", "bus:\n  connect: tcp://a\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'tcp://a': expected "
     "tcp://HOST:PORT"},
    {"tcp port 0", "bus:\n  connect: tcp://a:0\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'tcp://a:0': expected a "
     "port from 1 to 65535"},
    {"tcp port too big", "bus:\n  bind: tcp://*:65536\n" CONSUMERS,
     "t.yaml:2:9: bus.bind: invalid endpoint 'tcp://*:65536': expected a "
     "port from 1 to 65535"},
    {"tcp host '*' in connect", "bus:\n  connect: tcp://*:1\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'tcp://*:1': host '*' "
     "(every interface) is only for bind"},
    {"tcp port '*' in connect", "bus:\n  connect: tcp://a:*\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'tcp://a:*': port '*' "
     "(any free port) is only for bind"},
    {"IPv6 without brackets", "bus:\n  connect: tcp://::1:5\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'tcp://::1:5': IPv6 "
     "addresses go in brackets"},
    {"empty ipc path", "bus:\n  bind: ipc://\n" CONSUMERS,
     "t.yaml:2:9: bus.bind: invalid endpoint 'ipc://': expected ipc://PATH"},
    {"empty inproc name", "bus:\n  bind: inproc://\n" CONSUMERS,
     "t.yaml:2:9: bus.bind: invalid endpoint 'inproc://': expected "
     "inproc://NAME"},
    {"endpoint with a space", "bus:\n  connect: 'tcp://a :1'\n" CONSUMERS,
     "t.yaml:2:12: bus.connect: invalid endpoint 'tcp://a :1': an endpoint "
     "cannot contain spaces"},
    {"duplicate endpoint in connect",
     "bus:\n  connect:\n    - tcp://a:1\n    - tcp://b:1\n    - tcp://a:1\n" CONSUMERS,
     "t.yaml:5:7: bus.connect[2]: duplicate endpoint 'tcp://a:1' (already "
     "in bus.connect)"},
    {"duplicate endpoint across connect and bind",
     "bus:\n  bind: ipc:///x\n  connect: [ipc:///x]\n" CONSUMERS,
     "t.yaml:3:13: bus.connect[0]: duplicate endpoint 'ipc:///x' (already "
     "in bus.bind)"},

    /* bus integers */
    {"rcvhwm not a number", "bus:\n  connect: tcp://a:1\n  rcvhwm: lots\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'lots'"},
    {"rcvhwm negative", "bus:\n  connect: tcp://a:1\n  rcvhwm: -1\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'-1'"},
    {"rcvhwm decimal", "bus:\n  connect: tcp://a:1\n  rcvhwm: 1.5\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'1.5'"},
    {"rcvhwm hex", "bus:\n  connect: tcp://a:1\n  rcvhwm: 0x10\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'0x10'"},
    {"rcvhwm plus sign", "bus:\n  connect: tcp://a:1\n  rcvhwm: +5\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'+5'"},
    {"rcvhwm trailing junk", "bus:\n  connect: tcp://a:1\n  rcvhwm: 10k\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'10k'"},
    {"rcvhwm above int", "bus:\n  connect: tcp://a:1\n  rcvhwm: 2147483648\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'2147483648'"},
    {"rcvhwm overflow", "bus:\n  connect: tcp://a:1\n  rcvhwm: 99999999999999999999\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "'99999999999999999999'"},
    {"rcvhwm empty string", "bus:\n  connect: tcp://a:1\n  rcvhwm: ''\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "''"},
    {"rcvhwm null", "bus:\n  connect: tcp://a:1\n  rcvhwm: ~\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "nothing"},
    {"rcvhwm a list", "bus:\n  connect: tcp://a:1\n  rcvhwm: [1]\n" CONSUMERS,
     "t.yaml:3:11: bus.rcvhwm: " INT_RCVHWM "a list"},
    {"max_frames too small", "bus:\n  connect: tcp://a:1\n  max_frames: 1\n" CONSUMERS,
     "t.yaml:3:15: bus.max_frames: expected an integer from 2 "
     "to 1024, got '1'"},
    {"max_frames too big", "bus:\n  connect: tcp://a:1\n  max_frames: 1025\n" CONSUMERS,
     "t.yaml:3:15: bus.max_frames: expected an integer from 2 "
     "to 1024, got '1025'"},
    {"max_message_bytes zero", "bus:\n  connect: tcp://a:1\n  max_message_bytes: 0\n" CONSUMERS,
     "t.yaml:3:22: bus.max_message_bytes: expected a size such as 4096, 64KiB or 1MiB from 1 to "
     "2147483648 bytes, got '0'"},
    {"max_message_bytes too big",
     "bus:\n  connect: tcp://a:1\n  max_message_bytes: 2147483649\n" CONSUMERS,
     "t.yaml:3:22: bus.max_message_bytes: expected a size such as 4096, 64KiB or 1MiB from 1 to "
     "2147483648 bytes, got '2147483649'"},
    {"max_message_bytes in GiB, too big",
     "bus:\n  connect: tcp://a:1\n  max_message_bytes: 3GiB\n" CONSUMERS,
     "t.yaml:3:22: bus.max_message_bytes: expected a size such as 4096, 64KiB or 1MiB from 1 to "
     "2147483648 bytes, got '3GiB'"},

    /* control: */
    {"control a list", "control: [ipc:///x]\n" BUS CONSUMERS,
     "t.yaml:1:10: control: expected an endpoint (ipc://PATH or "
     "tcp://127.0.0.1:PORT), got a list"},
    {"control null", "control:\n" BUS CONSUMERS,
     "t.yaml:1:9: control: expected an endpoint (ipc://PATH or "
     "tcp://127.0.0.1:PORT), got nothing"},
    {"control not loopback", "control: tcp://0.0.0.0:9950\n" BUS CONSUMERS,
     "t.yaml:1:10: control: tcp://0.0.0.0:9950 is not on loopback: other hosts could send "
     "it emit, reload and stats requests; give control_curve: (CURVE keys, "
     "docs/security.md), or control_insecure: true to serve it in clear all the same"},
    {"control on every interface", "control: tcp://*:9950\n" BUS CONSUMERS,
     "t.yaml:1:10: control: invalid control endpoint 'tcp://*:9950': the "
     "control endpoint needs an address clients can connect to"},
    {"control on a public name", "control: tcp://example.org:1\n" BUS CONSUMERS,
     "t.yaml:1:10: control: tcp://example.org:1 is not on loopback"},
    {"control on 128.0.0.1", "control: tcp://128.0.0.1:1\n" BUS CONSUMERS,
     "t.yaml:1:10: control: tcp://128.0.0.1:1 is not on loopback"},
    {"control on 127.0.0.256", "control: tcp://127.0.0.256:1\n" BUS CONSUMERS,
     "t.yaml:1:10: control: tcp://127.0.0.256:1 is not on loopback"},
    {"control on IPv6 ::", "control: 'tcp://[::]:1'\n" BUS CONSUMERS,
     "t.yaml:1:10: control: tcp://[::]:1 is not on loopback"},
    {"control off loopback, insecure false",
     "control: tcp://192.0.2.1:9950\ncontrol_insecure: false\n" BUS CONSUMERS,
     "t.yaml:1:10: control: tcp://192.0.2.1:9950 is not on loopback"},
    {"control_insecure not a bool", "control_insecure: yes\n" BUS CONSUMERS,
     "t.yaml:1:19: control_insecure: expected true or false, got 'yes'"},
    {"control_curve without its key",
     "control: tcp://192.0.2.1:9950\ncontrol_curve: {allow_dir: /tmp}\n" BUS CONSUMERS,
     "t.yaml:2:16: control_curve.secret_key_file: missing required key (the control "
     "socket's key pair; fanhub keygen writes one)"},
    {"control_curve without clients",
     "control: tcp://192.0.2.1:9950\ncontrol_curve: {secret_key_file: /nonexistent}\n" BUS
         CONSUMERS,
     "t.yaml:2:16: control_curve.allow: missing: the clients' keys (allow:, allow_dir: or "
     "client_key_file:)"},
    {"control_curve allow not a key",
     "control_curve: {secret_key_file: /x, allow: [abc]}\n" BUS CONSUMERS,
     "t.yaml:1:46: control_curve.allow[0]: expected CurveZMQ public keys (40 characters "
     "of Z85), got 'abc'"},
    {"control_curve allow_dir missing",
     "control_curve: {secret_key_file: /x, allow_dir: /nonexistent/keys}\n" BUS CONSUMERS,
     "t.yaml:1:49: control_curve.allow_dir: /nonexistent/keys is not a directory"},
    {"control_curve key file missing",
     "control_curve: {secret_key_file: /nonexistent/k_secret, allow_dir: /tmp}\n" BUS CONSUMERS,
     "t.yaml:1:34: control_curve.secret_key_file: secret key file /nonexistent/k_secret: No "
     "such file or directory"},
    {"control_curve unknown key", "control_curve: {secret: x}\n" BUS CONSUMERS,
     "t.yaml:1:17: control_curve.secret: unknown key (known: secret_key_file, allow, "
     "allow_dir, client_key_file)"},

    /* bus.allow_ip: addresses and networks */
    {"allow_ip a name", "bus:\n  connect: tcp://a:1\n  allow_ip: [host.example.org]\n" CONSUMERS,
     "t.yaml:3:14: bus.allow_ip[0]: expected IP addresses or networks (192.0.2.7, "
     "10.0.0.0/8, 2001:db8::/32), got 'host.example.org': not an IP address"},
    {"allow_ip prefix too long",
     "bus:\n  connect: tcp://a:1\n  allow_ip: ['::1', 10.0.0.0/33]\n" CONSUMERS,
     "t.yaml:3:21: bus.allow_ip[1]: expected IP addresses or networks (192.0.2.7, "
     "10.0.0.0/8, 2001:db8::/32), got '10.0.0.0/33': the prefix length of an IPv4 network "
     "is 0 to 32"},
    {"allow_ip IPv6 prefix too long",
     "bus:\n  connect: tcp://a:1\n  allow_ip: '::/129'\n" CONSUMERS,
     "t.yaml:3:13: bus.allow_ip: expected IP addresses or networks (192.0.2.7, "
     "10.0.0.0/8, 2001:db8::/32), got '::/129': the prefix length of an IPv6 network is 0 "
     "to 128"},
    {"allow_ip host bits", "bus:\n  connect: tcp://a:1\n  allow_ip: [10.0.0.1/8]\n" CONSUMERS,
     "t.yaml:3:14: bus.allow_ip[0]: expected IP addresses or networks (192.0.2.7, "
     "10.0.0.0/8, 2001:db8::/32), got '10.0.0.1/8': bits are set past the prefix length"},
    {"allow_ip bad prefix", "bus:\n  connect: tcp://a:1\n  allow_ip: [10.0.0.0/]\n" CONSUMERS,
     "t.yaml:3:14: bus.allow_ip[0]: expected IP addresses or networks (192.0.2.7, "
     "10.0.0.0/8, 2001:db8::/32), got '10.0.0.0/': the prefix length after '/' is not a "
     "number"},
    {"control on inproc", "control: inproc://x\n" BUS CONSUMERS,
     "t.yaml:1:10: control: invalid control endpoint 'inproc://x': the "
     "control socket is served on ipc://PATH or on tcp://HOST:PORT"},
    {"control bad transport", "control: http://127.0.0.1:80\n" BUS CONSUMERS,
     "t.yaml:1:10: control: invalid control endpoint 'http://127.0.0.1:80': "
     "unsupported transport 'http'"},

    /* shutdown_timeout: */
    {"shutdown_timeout negative", "shutdown_timeout: -1\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'-1'"},
    {"shutdown_timeout too big", "shutdown_timeout: 3601\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'3601'"},
    {"shutdown_timeout just too big", "shutdown_timeout: 3600.001\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'3600.001'"},
    {"shutdown_timeout a hair too big", "shutdown_timeout: 3600.0000001\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'3600.0000001'"},
    {"shutdown_timeout huge", "shutdown_timeout: 99999999999999999999999\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'99999999999999999999999'"},
    {"shutdown_timeout words", "shutdown_timeout: soon\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'soon'"},
    {"shutdown_timeout exponent", "shutdown_timeout: 1e3\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'1e3'"},
    {"shutdown_timeout trailing dot", "shutdown_timeout: 2.\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'2.'"},
    {"shutdown_timeout leading dot", "shutdown_timeout: .5\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'.5'"},
    {"shutdown_timeout with an unknown unit", "shutdown_timeout: 10d\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'10d'"},
    {"shutdown_timeout with a space", "shutdown_timeout: 10 s\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "'10 s'"},
    {"shutdown_timeout a map", "shutdown_timeout: {a: 1}\n" BUS CONSUMERS,
     "t.yaml:1:19: shutdown_timeout: " SECONDS "a map"},

    /* consumers: */
    {"missing consumers", BUS, "t.yaml:1:1: consumers: required key is missing"},
    {"consumers empty", BUS "consumers: []\n",
     "t.yaml:3:12: consumers: expected a list of at least one consumer, got "
     "an empty list"},
    {"consumers null", BUS "consumers:\n",
     "t.yaml:3:11: consumers: expected a list of at least one consumer, got "
     "nothing"},
    {"consumers a map", BUS "consumers: {name: c, plugin: p}\n",
     "t.yaml:3:12: consumers: expected a list of at least one consumer, got "
     "a map"},
    {"consumer a scalar", BUS "consumers:\n  - c\n",
     "t.yaml:4:5: consumers[0]: expected a map " CONSUMER_KNOWN ", got 'c'"},
    {"consumer missing name", BUS "consumers:\n  - plugin: p\n",
     "t.yaml:4:5: consumers[0].name: required key is missing"},
    {"consumer missing plugin", C2 ("    topics: [a]\n"),
     "t.yaml:6:5: consumers[1].plugin: required key is missing"},
    {"consumer name with a slash",
     BUS "consumers:\n  - name: a/b\n"
         "    plugin: p\n",
     "t.yaml:4:11: consumers[0].name: " NAME_RULE ", got 'a/b'"},
    {"consumer name a number list",
     BUS "consumers:\n  - name: [1]\n"
         "    plugin: p\n",
     "t.yaml:4:11: consumers[0].name: " NAME_RULE ", got a list"},
    {"consumer name null", BUS "consumers:\n  - name:\n    plugin: p\n",
     "t.yaml:4:10: consumers[0].name: " NAME_RULE ", got nothing"},
    {"consumer named .", BUS "consumers:\n  - name: .\n    plugin: p\n",
     "t.yaml:4:11: consumers[0].name: '.': a consumer name may not start with '.' (it names "
     "the consumer's directory in state_dir)"},
    {"consumer named ..", BUS "consumers:\n  - name: '..'\n    plugin: p\n",
     "t.yaml:4:11: consumers[0].name: '..': a consumer name may not start with '.'"},
    {"consumer name hidden", BUS "consumers:\n  - name: .cache\n    plugin: p\n",
     "t.yaml:4:11: consumers[0].name: '.cache': a consumer name may not start with '.'"},
    {"duplicate consumer names",
     BUS "consumers:\n  - name: a\n    plugin: p\n  - plugin: q\n"
         "    name: a\n",
     "t.yaml:7:11: consumers[1].name: duplicate consumer name 'a' (first "
     "used by consumers[0] at line 4)"},
    {"duplicate consumer name further down",
     BUS "consumers:\n  - {name: a, plugin: p}\n  - {name: b, plugin: p}\n"
         "  - {name: c, plugin: p}\n  - {name: b, plugin: p}\n",
     "t.yaml:7:12: consumers[3].name: duplicate consumer name 'b' (first "
     "used by consumers[1] at line 5)"},
    {"plugin empty", C2 ("    plugin: ''\n"),
     "t.yaml:7:13: consumers[1].plugin: expected a plugin name or path, got "
     "''"},
    {"plugin a map", C2 ("    plugin: {a: 1}\n"),
     "t.yaml:7:13: consumers[1].plugin: expected a plugin name or path, got "
     "a map"},
    {"topics empty", C2 ("    plugin: p\n    topics: []\n"),
     "t.yaml:8:13: consumers[1].topics: expected a list of topic patterns, "
     "got an empty list (omit topics: to receive every message)"},
    {"topics null", C2 ("    plugin: p\n    topics:\n"),
     "t.yaml:8:12: consumers[1].topics: expected a list of topic patterns, "
     "got nothing (omit topics: to receive every message)"},
    {"topics a map", C2 ("    plugin: p\n    topics: {a: 1}\n"),
     "t.yaml:8:13: consumers[1].topics: expected a list of topic patterns, "
     "got a map"},
    {"empty pattern", C2 ("    plugin: p\n    topics: [a, '']\n"),
     "t.yaml:8:17: consumers[1].topics[1]: expected a topic pattern, got ''"},
    {"'=' alone", C2 ("    plugin: p\n    topics: ['=']\n"),
     "t.yaml:8:14: consumers[1].topics[0]: expected a topic after '='"},
    {"pattern a list", C2 ("    plugin: p\n    topics: [[a]]\n"),
     "t.yaml:8:14: consumers[1].topics[0]: expected a topic pattern, got a "
     "list"},
    {"queue a scalar", C2 ("    plugin: p\n    queue: 5\n"),
     "t.yaml:8:12: consumers[1].queue: expected a map (known: capacity, warn_at, overflow, "
     "spool_max_bytes, write_ahead, max_bytes), got "
     "'5'"},
    {"queue null", C2 ("    plugin: p\n    queue:\n"),
     "t.yaml:8:11: consumers[1].queue: expected a map (known: capacity, warn_at, overflow, "
     "spool_max_bytes, write_ahead, max_bytes), got "
     "nothing"},
    {"capacity not a number", C2 ("    plugin: p\n    queue:\n      capacity: lots\n"),
     "t.yaml:9:17: consumers[1].queue.capacity: " INT_CAPACITY "'lots'"},
    {"capacity zero", C2 ("    plugin: p\n    queue:\n      capacity: 0\n"),
     "t.yaml:9:17: consumers[1].queue.capacity: " INT_CAPACITY "'0'"},
    {"capacity too big", C2 ("    plugin: p\n    queue:\n      capacity: 1073741825\n"),
     "t.yaml:9:17: consumers[1].queue.capacity: " INT_CAPACITY "'1073741825'"},
    {"options a scalar", C2 ("    plugin: p\n    options: path\n"),
     "t.yaml:8:14: consumers[1].options: expected a map of plugin options, "
     "got 'path'"},
    {"options a list", C2 ("    plugin: p\n    options: [a]\n"),
     "t.yaml:8:14: consumers[1].options: expected a map of plugin options, "
     "got a list"},
    {"option key a map", C2 ("    plugin: p\n    options:\n      ? {a: 1}\n      : 2\n"),
     "t.yaml:9:9: consumers[1].options: expected a key, got a map"},
    {"recursive alias in options", C2 ("    plugin: p\n    options: &loop\n      self: *loop\n"),
     "t.yaml:8:14: consumers[1].options.self: an alias refers to a value "
     "that contains it"},
    {"recursive alias in a list", C2 ("    plugin: p\n    options:\n      a: &l [1, *l]\n"),
     "t.yaml:9:10: consumers[1].options.a[1]: an alias refers to a value "
     "that contains it"},
    {"alias to a consumer into itself",
     BUS "consumers:\n  - &c\n    name: c\n    plugin: p\n    queue: *c\n",
     "t.yaml:5:5: consumers[0].queue.name: unknown key (known: capacity, warn_at, overflow, "
     "spool_max_bytes, write_ahead, max_bytes)"},
    /* shard: */
    {"shard index not below count", C2 ("    plugin: p\n    shard: {index: 2, count: 2}\n"),
     "t.yaml:8:12: consumers[1].shard: expected {index: I, count: N}, 1 <= N <= 65536, "
     "0 <= I < N"},
    {"shard count zero", C2 ("    plugin: p\n    shard: {index: 0, count: 0}\n"),
     "t.yaml:8:30: consumers[1].shard: expected {index: I, count: N}"},
    {"shard count missing", C2 ("    plugin: p\n    shard: {index: 0}\n"),
     "t.yaml:8:12: consumers[1].shard: expected {index: I, count: N}"},
    {"shard unknown key", C2 ("    plugin: p\n    shard: {index: 0, count: 2, of: 3}\n"),
     "t.yaml:8:33: consumers[1].shard: expected {index: I, count: N}"},
    {"shard a scalar", C2 ("    plugin: p\n    shard: 1\n"),
     "t.yaml:8:12: consumers[1].shard: expected {index: I, count: N}"},
    {"shard index twice", C2 ("    plugin: p\n    shard: {index: 0, index: 1, count: 2}\n"),
     "t.yaml:8:"},
    /* bus.amqp: read through the option-table reader (source_amqp_settings.c),
       worded as a plugin's options, errors where the value is */
    {"amqp a scalar", "bus:\n  amqp: x\n" CONSUMERS,
     "t.yaml:2:9: bus.amqp: expected a map (url:, queue:, ...), got 'x'"},
    {"amqp without url", "bus:\n  amqp: {queue: q}\n" CONSUMERS,
     "bus.amqp.url: required key is missing (t.yaml:2:9)"},
    {"amqp without queue", "bus:\n  amqp: {url: \"amqp://h\"}\n" CONSUMERS,
     "bus.amqp.queue: required key is missing (t.yaml:2:9)"},
    {"amqp bad url", "bus:\n  amqp: {url: \"http://h\", queue: q}\n" CONSUMERS,
     "bus.amqp.url: expected amqp://HOST[:PORT][/VHOST] or amqps://..., got "
     "'http://h' (t.yaml:2:15)"},
    {"amqp password in the url", "bus:\n  amqp: {url: \"amqp://u:p@h\", queue: q}\n" CONSUMERS,
     "bus.amqp.url: no password in the url: use password_file: or password_env: "
     "(t.yaml:2:15)"},
    {"amqp user in the url needs a password",
     "bus:\n  amqp: {url: \"amqp://u@h\", queue: q}\n" CONSUMERS,
     "bus.amqp.password_file: required for user 'u' (or password_env); the password "
     "is never read from this file (t.yaml:2:9)"},
    {"amqp prefetch zero", "bus:\n  amqp: {url: \"amqp://h\", queue: q, prefetch: 0}\n" CONSUMERS,
     "bus.amqp.prefetch: expected an integer from 1 to 65535, got \"0\" (t.yaml:2:47)"},
    {"amqp unknown key", "bus:\n  amqp: {url: \"amqp://h\", queue: q, prefech: 5}\n" CONSUMERS,
     "bus.amqp.prefech: unknown option; bus.amqp takes url, vhost, user, "
     "password_file, password_env, password, tls, exchange, envelope, declare, queue, "
     "shards, bindings, hash_exchange, hash_header, queue_type, dead_letter_exchange, "
     "prefetch, heartbeat, reconnect_max, prefer, standby_delay and loop_guard "
     "(t.yaml:2:46)"},
    {"amqp user without password",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, user: u}\n" CONSUMERS,
     "bus.amqp.password_file: required for user 'u' (or password_env); the password "
     "is never read from this file (t.yaml:2:9)"},
    {"amqp password file missing",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, password_file: /nonexistent/pw}\n" CONSUMERS,
     "bus.amqp.password_file: /nonexistent/pw: No such file or directory (t.yaml:2:52)"},
    {"amqp password env unset",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, password_env: FANHUB_TEST_UNSET_PW}\n" CONSUMERS,
     "bus.amqp.password_env: the environment variable FANHUB_TEST_UNSET_PW is not "
     "set, or empty (t.yaml:2:51)"},
    {"amqp queue_type", "bus:\n  amqp: {url: \"amqp://h\", queue: q, queue_type: lazy}\n" CONSUMERS,
     "bus.amqp.queue_type: expected classic or quorum, got \"lazy\" (t.yaml:2:49)"},
    {"amqp tls without amqps",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, tls: {ca_file: c}}\n" CONSUMERS,
     "bus.amqp.tls: needs an amqps:// url (t.yaml:2:42)"},
    {"amqps without ca_file", "bus:\n  amqp: {url: \"amqps://h\", queue: q}\n" CONSUMERS,
     "bus.amqp.tls.ca_file: required to verify the broker (or tls.verify_peer: false) "
     "(t.yaml:2:9)"},
    {"amqp hash_header without shards",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, hash_header: k}\n" CONSUMERS,
     "bus.amqp.hash_exchange, hash_header: only with shards: N (t.yaml:2:50)"},
    {"amqp shards too many",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, shards: 5000}\n" CONSUMERS,
     "bus.amqp.shards: expected an integer from 0 to 1024, got \"5000\" (t.yaml:2:45)"},
    {"amqp password in the YAML",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, password: x}\n" CONSUMERS,
     "bus.amqp.password: a password is never taken from the YAML; set password_file (a file of "
     "mode 0600) or password_env (t.yaml:2:47)"},
    {"amqp prefer index past count",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, shards: 4, prefer: {index: 2, count: "
     "2}}\n" CONSUMERS,
     "bus.amqp.prefer: expected {index: I, count: N}, I < N (t.yaml:2:56)"},
    {"amqp prefer without count",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, shards: 4, prefer: {index: 0}}\n" CONSUMERS,
     "bus.amqp.prefer.count: missing: N of {index: I, count: N}, 1 to 1024 (t.yaml:2:56)"},
    {"amqp tls unknown key",
     "bus:\n  amqp: {url: \"amqps://h\", queue: q, tls: {ca: c}}\n" CONSUMERS,
     "bus.amqp.tls.ca: unknown key; tls takes ca_file, cert_file, key_file, verify_peer and "
     "verify_hostname (t.yaml:2:48)"},
    {"amqp declare not a bool",
     "bus:\n  amqp: {url: \"amqp://h\", queue: q, declare: yes}\n" CONSUMERS,
     "bus.amqp.declare: expected true or false, got \"yes\" (t.yaml:2:46)"},
};

static void
test_errors (void **state)
{
    (void) state;
    s_unset_runtime_dirs ();
    size_t failed = 0;
    for (size_t i = 0; i < sizeof s_error_cases / sizeof s_error_cases[0]; i++) {
        const s_error_case_t *c = &s_error_cases[i];
        char err[512] = "";
        fh_config_t *cfg = s_load (c->text, err, sizeof err);
        if (cfg) {
            print_error ("%s: loaded, expected \"%s\"\n", c->name, c->error);
            fh_config_destroy (&cfg);
            failed++;
        }
        else if (strncmp (err, c->error, strlen (c->error)) != 0) {
            print_error ("%s:\n  got      \"%s\"\n  expected \"%s\"\n", c->name, err, c->error);
            failed++;
        }
        else if (strchr (err, '\n'))
            fail_msg ("%s: error is more than one line", c->name);
    }
    if (failed)
        fail_msg ("%zu of %zu error cases failed", failed,
                  sizeof s_error_cases / sizeof s_error_cases[0]);
}

/* Values that are nothing (`key:`) for keys that need one: the exact
   messages, whatever position libyaml gives an empty value. */
static void
test_null_values (void **state)
{
    (void) state;
    static const struct {
        const char *text;
        const char *message; /* after "t.yaml:L:C: " */
    } cases[] = {
        {"name:\n" BUS CONSUMERS, "name: " NAME_RULE ", got nothing"},
        {"bus:\n" CONSUMERS, "bus: expected a map " BUS_KNOWN ", got nothing"},
        {"bus:\n  connect:\n" CONSUMERS,
         "bus.connect: expected an endpoint or a list of endpoints, got "
         "nothing"},
        {"control:\n" BUS CONSUMERS, "control: expected an endpoint (ipc://PATH or "
                                     "tcp://127.0.0.1:PORT), got nothing"},
        {"shutdown_timeout:\n" BUS CONSUMERS, "shutdown_timeout: " SECONDS "nothing"},
        {BUS "consumers:\n", "consumers: expected a list of at least one consumer, got "
                             "nothing"},
        {BUS "consumers:\n  -\n", "consumers[0]: expected a map " CONSUMER_KNOWN ", got nothing"},
        {BUS "consumers:\n  - name:\n    plugin: p\n",
         "consumers[0].name: " NAME_RULE ", got nothing"},
        {BUS "consumers:\n  - name: c\n    plugin:\n",
         "consumers[0].plugin: expected a plugin name or path, got nothing"},
        {BUS "consumers:\n  - name: c\n    plugin: p\n    topics:\n",
         "consumers[0].topics: expected a list of topic patterns, got "
         "nothing (omit topics: to receive every message)"},
        {BUS "consumers:\n  - name: c\n    plugin: p\n    queue:\n",
         "consumers[0].queue: expected a map (known: capacity, warn_at, overflow, spool_max_bytes, "
         "write_ahead, max_bytes), got "
         "nothing"},
        {BUS "consumers:\n  - name: c\n    plugin: p\n    queue:\n"
             "      capacity:\n",
         "consumers[0].queue.capacity: " INT_CAPACITY "nothing"},
        {BUS "consumers:\n  - name: c\n    plugin: p\n    topics: [~]\n",
         "consumers[0].topics[0]: expected a topic pattern, got nothing"},
        {BUS "consumers:\n  - name: c\n    plugin: p\n    topics: [NULL]\n",
         "consumers[0].topics[0]: expected a topic pattern, got null (YAML "
         "null; write \"NULL\" for the word)"},
        {"---\n", "empty configuration"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512] = "";
        fh_config_t *cfg = s_load (cases[i].text, err, sizeof err);
        assert_null (cfg);
        /* Skip "t.yaml:L:C: ". */
        const char *message = err;
        for (int colons = 0; colons < 3 && message; colons++) {
            message = strchr (message, ':');
            if (message)
                message++;
        }
        if (!message || *message != ' '
            || strncmp (message + 1, cases[i].message, strlen (cases[i].message)) != 0)
            fail_msg ("case %zu:\n  got      \"%s\"\n  expected "
                      "\"t.yaml:L:C: %s\"",
                      i, err, cases[i].message);
    }
}

/* The example in the header: an error in the second consumer's queue. */
static void
test_error_example (void **state)
{
    (void) state;
    static const char text[] = "bus:\n"
                               "  connect: tcp://127.0.0.1:9940\n"
                               "consumers:\n"
                               "  - name: first\n"
                               "    plugin: log\n"
                               "  - name: second\n"
                               "    plugin: log\n"
                               "    queue:\n"
                               "      capacity: lots\n";
    char err[512];
    assert_null (fh_config_load_string (text, strlen (text), "hub.yaml", err, sizeof err));
    assert_string_equal (err, "hub.yaml:9:17: consumers[1].queue.capacity: "
                              "expected an integer from 1 to 1073741824, got "
                              "'lots'");
    static const char typo[] = "bus:\n"
                               "  connect: tcp://127.0.0.1:9940\n"
                               "  rcvhm: 5\n";
    assert_null (fh_config_load_string (typo, strlen (typo), "f.yaml", err, sizeof err));
    assert_string_equal (err, "f.yaml:3:3: bus.rcvhm: unknown key (known: "
                              "connect, bind, rcvhwm, max_frames, "
                              "max_message_bytes, publish, gap_detection, curve, allow_ip, "
                              "max_peers, amqp, connect_warning, validate_signatures)");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_null_values),
        cmocka_unit_test (test_error_example),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
