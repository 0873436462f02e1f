/*  test_worker_wire - the frames of docs/worker-protocol.md as the worker
    plugin encodes and decodes them (consumers/worker/wire.c): the offsets
    the document gives, partial and broken frames, answers, a body's
    msg_id, and how an exit status reads. */
#include "../../../consumers/worker/wire.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static uint64_t
s_be (const uint8_t *at, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++)
        value = (value << 8) | at[i];
    return value;
}

static void
test_a_message_frame_has_the_documented_layout (void **state)
{
    (void) state;
    fanhub_bytes_t frames[3] = {{"org.a", 5}, {"{}", 2}, {"x", 1}};
    wire_msg_t msg = {.ticket = 0x0102030405060708ull,
                      .seq = 42,
                      .attempt = 3,
                      .received_ns = -5,
                      .id = "id-1",
                      .id_size = 4,
                      .frames = frames,
                      .count = 3};
    wbuf_t out = {0};
    assert_int_equal (wire_message (&out, &msg), 0);
    const uint8_t *p = out.data + 5; /* after length and type */
    assert_int_equal (s_be (out.data, 4), out.size - 4);
    assert_int_equal (out.data[4], 'M');
    assert_int_equal (s_be (out.data + WIRE_TICKET_OFFSET, 8), msg.ticket);
    assert_int_equal (s_be (p + 8, 8), 42);
    assert_int_equal (s_be (p + 16, 4), 3);
    assert_int_equal ((int64_t) s_be (p + 20, 8), -5);
    assert_int_equal (s_be (p + 28, 2), 4);
    assert_memory_equal (p + 30, "id-1", 4);
    assert_int_equal (s_be (p + 34, 4), 3);
    assert_int_equal (s_be (p + 38, 4), 5);
    assert_memory_equal (p + 42, "org.a", 5);
    assert_int_equal (s_be (p + 47, 4), 2);
    assert_int_equal (s_be (p + 53, 4), 1);
    assert_int_equal (out.size, 5 + 58);
    wbuf_free (&out);
}

static void
test_frames_are_read_whole_or_not_at_all (void **state)
{
    (void) state;
    wbuf_t out = {0};
    assert_int_equal (wire_frame (&out, 'L', "\x04hi", 3), 0);
    assert_int_equal (wire_frame (&out, 'Q', NULL, 0), 0);
    uint8_t type;
    const uint8_t *payload;
    size_t size = 0, used = 0; /* set by wire_next; gcc -O3 cannot tell */
    char err[128];
    for (size_t cut = 0; cut < 8; cut++)
        assert_int_equal (
            wire_next (out.data, cut, 100, &type, &payload, &size, &used, err, sizeof err), 0);
    assert_int_equal (
        wire_next (out.data, out.size, 100, &type, &payload, &size, &used, err, sizeof err), 1);
    assert_int_equal (type, 'L');
    assert_int_equal (size, 3);
    assert_int_equal (used, 8);
    assert_int_equal (wire_next (out.data + used, out.size - used, 100, &type, &payload, &size,
                                 &used, err, sizeof err),
                      1);
    assert_int_equal (type, 'Q');
    assert_int_equal (size, 0);
    wbuf_free (&out);
}

static void
test_broken_lengths_are_refused (void **state)
{
    (void) state;
    uint8_t zero[4] = {0, 0, 0, 0}, big[4] = {0, 0x10, 0, 1};
    uint8_t type;
    const uint8_t *payload;
    size_t size, used;
    char err[128];
    assert_int_equal (wire_next (zero, 4, 100, &type, &payload, &size, &used, err, sizeof err), -1);
    assert_string_equal (err, "a frame of length 0 (every frame has a type byte)");
    assert_int_equal (
        wire_next (big, 4, WORKER_FRAME_MAX_IN, &type, &payload, &size, &used, err, sizeof err),
        -1);
    assert_string_equal (err, "a frame of 1048577 bytes (the limit is 1048576)");
}

static void
test_answers (void **state)
{
    (void) state;
    uint8_t good[] = {0, 0, 0, 0, 0, 0, 0, 9, 2, 0, 3, 'b', 'a', 'd'};
    uint64_t ticket;
    uint8_t verdict;
    const char *reason;
    size_t reason_size;
    assert_int_equal (wire_answer (good, sizeof good, &ticket, &verdict, &reason, &reason_size), 0);
    assert_int_equal (ticket, 9);
    assert_int_equal (verdict, WORKER_VERDICT_FAIL);
    assert_int_equal (reason_size, 3);
    assert_memory_equal (reason, "bad", 3);
    /* Too short, a reason longer than the frame, an unknown verdict. */
    assert_int_equal (wire_answer (good, 10, &ticket, &verdict, &reason, &reason_size), -1);
    assert_int_equal (wire_answer (good, sizeof good - 1, &ticket, &verdict, &reason, &reason_size),
                      -1);
    good[8] = 4;
    assert_int_equal (wire_answer (good, sizeof good, &ticket, &verdict, &reason, &reason_size),
                      -1);
}

/* PUBLISH (protocol 2): u16 topic length, topic, the rest the body. */
static void
test_publish_frames (void **state)
{
    (void) state;
    const char *topic, *bad = "";
    const uint8_t *body;
    size_t topic_size, body_size;
    char err[128];
    const uint8_t good[] = {0, 3, 'a', '.', 'b', '{', '}'};
    assert_int_equal (
        wire_publish (good, sizeof good, &topic, &topic_size, &body, &body_size, err, sizeof err),
        0);
    assert_int_equal (topic_size, 3);
    assert_memory_equal (topic, "a.b", 3);
    assert_int_equal (body_size, 2);
    assert_memory_equal (body, "{}", 2);
    /* An empty body is a body. */
    assert_int_equal (
        wire_publish (good, 5, &topic, &topic_size, &body, &body_size, err, sizeof err), 0);
    assert_int_equal (body_size, 0);
    const struct {
        const uint8_t *data;
        size_t size;
        const char *why;
    } cases[] = {
        {good, 1, "no topic length"},
        {(const uint8_t *) "\0\0x", 3, "is zero"},
        {(const uint8_t *) "\0\x09"
                           "a.b",
         5, "past its end"},
        {(const uint8_t *) "\0\x02\xff\xfe", 4, "not UTF-8"},
        {(const uint8_t *) "\0\x02"
                           "a\0",
         4, "holds a NUL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal (wire_publish (cases[i].data, cases[i].size, &bad, &topic_size, &body,
                                        &body_size, err, sizeof err),
                          -1);
        assert_non_null (strstr (err, cases[i].why));
    }
}

static void
test_msg_id_is_the_top_level_string (void **state)
{
    (void) state;
    const struct {
        const char *body, *id;
    } cases[] = {
        {"{\"msg_id\": \"2021-abc\", \"msg\": {}}", "2021-abc"},
        {"  \n{\"i\": 1, \"msg_id\": \"x\"}", "x"},
        {"{\"msg\": {\"msg_id\": \"nested\"}}", ""},
        {"{\"msg_id\": 5}", ""},
        {"[\"msg_id\"]", ""},
        {"not json \"msg_id\"", ""},
        {"{\"msg_id\": \"broken", ""},
        {"", ""},
        {"{\"msg\": \"a\\u0000b\", \"msg_id\": \"nul\"}", "nul"}, /* JSON all the same */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char id[16];
        size_t n = wire_msg_id (cases[i].body, strlen (cases[i].body), id, sizeof id);
        assert_string_equal (id, cases[i].id);
        assert_int_equal (n, strlen (cases[i].id));
    }
    /* A msg_id with a NUL in it goes whole: the wire carries its length. */
    char id[16];
    const char nul[] = "{\"msg_id\": \"a\\u0000b\"}";
    assert_int_equal (wire_msg_id (nul, sizeof nul - 1, id, sizeof id), 3);
    assert_memory_equal (id, "a\0b", 4);
    char small[4];
    assert_int_equal (wire_msg_id ("{\"msg_id\":\"longer\"}", 19, small, sizeof small), 0);
    assert_string_equal (small, "");
}

static void
test_exit_statuses_read_as_the_log_says (void **state)
{
    (void) state;
    char text[64];
    wire_status_text (3 << 8, text, sizeof text);
    assert_string_equal (text, "exited with status 3");
    wire_status_text (11, text, sizeof text);
    assert_string_equal (text, "killed by signal 11 (SIGSEGV)");
    wire_status_text (9 | 0x80, text, sizeof text); /* with a core dump */
    assert_string_equal (text, "killed by signal 9 (SIGKILL)");
    wire_status_text (-1, text, sizeof text);
    assert_string_equal (text, "vanished (no exit status)");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_a_message_frame_has_the_documented_layout),
        cmocka_unit_test (test_frames_are_read_whole_or_not_at_all),
        cmocka_unit_test (test_broken_lengths_are_refused),
        cmocka_unit_test (test_answers),
        cmocka_unit_test (test_publish_frames),
        cmocka_unit_test (test_msg_id_is_the_top_level_string),
        cmocka_unit_test (test_exit_statuses_read_as_the_log_says),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
