/*  test_options - the option tree handed to plugins (hub/plugin/options.c). */
#include "options.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* Builds {path: "-", flush_ms: "100", list: [a, {k: v}], empty: {}}. */
static fanhub_option_t *
s_sample (void)
{
    fanhub_option_t *root = fh_option_new (FANHUB_OPTION_MAP, NULL, "t:1:1");
    assert_non_null (root);
    assert_int_equal (
        fh_option_append (root, "path", fh_option_new (FANHUB_OPTION_SCALAR, "-", "t:1:7")), 0);
    assert_int_equal (
        fh_option_append (root, "flush_ms", fh_option_new (FANHUB_OPTION_SCALAR, "100", "t:2:11")),
        0);
    fanhub_option_t *list = fh_option_new (FANHUB_OPTION_LIST, NULL, "t:3:7");
    assert_non_null (list);
    assert_int_equal (
        fh_option_append (list, NULL, fh_option_new (FANHUB_OPTION_SCALAR, "a", "t:3:8")), 0);
    fanhub_option_t *inner = fh_option_new (FANHUB_OPTION_MAP, NULL, "t:3:11");
    assert_int_equal (
        fh_option_append (inner, "k", fh_option_new (FANHUB_OPTION_SCALAR, "v", "t:3:14")), 0);
    assert_int_equal (fh_option_append (list, NULL, inner), 0);
    assert_int_equal (fh_option_append (root, "list", list), 0);
    assert_int_equal (
        fh_option_append (root, "empty", fh_option_new (FANHUB_OPTION_MAP, NULL, "t:4:8")), 0);
    return root;
}

static void
test_build_and_read (void **state)
{
    (void) state;
    fanhub_option_t *root = s_sample ();
    assert_int_equal (fh_option_kind (root), FANHUB_OPTION_MAP);
    assert_int_equal (fh_option_count (root), 4);
    assert_string_equal (fh_option_where (root), "t:1:1");
    assert_null (fh_option_scalar (root));

    const fanhub_option_t *path = fh_option_get (root, "path");
    assert_int_equal (fh_option_kind (path), FANHUB_OPTION_SCALAR);
    assert_string_equal (fh_option_scalar (path), "-");
    assert_string_equal (fh_option_where (path), "t:1:7");
    assert_int_equal (fh_option_count (path), 0);
    assert_string_equal (fh_option_scalar (fh_option_get (root, "flush_ms")), "100");
    assert_null (fh_option_get (root, "missing"));
    assert_null (fh_option_get (root, NULL));

    /* Entries in file order, with their keys. */
    static const char *const keys[] = {"path", "flush_ms", "list", "empty"};
    for (size_t i = 0; i < 4; i++) {
        const char *key = "unset";
        assert_non_null (fh_option_at (root, i, &key));
        assert_string_equal (key, keys[i]);
    }
    assert_ptr_equal (fh_option_at (root, 0, NULL), path);

    const fanhub_option_t *list = fh_option_get (root, "list");
    assert_int_equal (fh_option_kind (list), FANHUB_OPTION_LIST);
    assert_int_equal (fh_option_count (list), 2);
    const char *key = "unset";
    assert_string_equal (fh_option_scalar (fh_option_at (list, 0, &key)), "a");
    assert_null (key); /* list items have no key */
    const fanhub_option_t *inner = fh_option_at (list, 1, NULL);
    assert_int_equal (fh_option_kind (inner), FANHUB_OPTION_MAP);
    assert_string_equal (fh_option_scalar (fh_option_get (inner, "k")), "v");
    assert_string_equal (fh_option_where (inner), "t:3:11");
    assert_null (fh_option_get (list, "k")); /* get only on maps */

    const fanhub_option_t *empty = fh_option_get (root, "empty");
    assert_int_equal (fh_option_kind (empty), FANHUB_OPTION_MAP);
    assert_int_equal (fh_option_count (empty), 0);
    assert_null (fh_option_at (empty, 0, NULL));
    fh_option_destroy (&root);
    assert_null (root);
}

static void
test_accessors_on_null (void **state)
{
    (void) state;
    const char *key = "unset";
    assert_int_equal (fh_option_kind (NULL), 0);
    assert_null (fh_option_get (NULL, "x"));
    assert_null (fh_option_scalar (NULL));
    assert_int_equal (fh_option_count (NULL), 0);
    assert_null (fh_option_at (NULL, 0, &key));
    assert_null (key);
    assert_null (fh_option_where (NULL));
}

static void
test_destroy_twice (void **state)
{
    (void) state;
    fanhub_option_t *root = s_sample ();
    fh_option_destroy (&root);
    assert_null (root);
    fh_option_destroy (&root);
    fh_option_destroy (NULL);
}

static void
test_at_out_of_range (void **state)
{
    (void) state;
    fanhub_option_t *root = s_sample ();
    const char *key = "unset";
    assert_null (fh_option_at (root, 4, &key));
    assert_null (key);
    assert_null (fh_option_at (root, SIZE_MAX, &key));
    const fanhub_option_t *path = fh_option_get (root, "path");
    key = "unset";
    assert_null (fh_option_at (path, 0, &key)); /* a scalar has no items */
    assert_null (key);
    assert_null (fh_option_at (fh_option_get (root, "list"), 2, NULL));
    fh_option_destroy (&root);
}

static void
test_new_refuses_misuse (void **state)
{
    (void) state;
    assert_null (fh_option_new ((fanhub_option_kind_t) 0, NULL, "w"));
    assert_null (fh_option_new ((fanhub_option_kind_t) 9, NULL, "w"));
    assert_null (fh_option_new (FANHUB_OPTION_SCALAR, NULL, "w"));
    assert_null (fh_option_new (FANHUB_OPTION_MAP, "text", "w"));
    assert_null (fh_option_new (FANHUB_OPTION_LIST, "text", "w"));

    /* A NULL where reads back as "". */
    fanhub_option_t *node = fh_option_new (FANHUB_OPTION_SCALAR, "", NULL);
    assert_non_null (node);
    assert_string_equal (fh_option_where (node), "");
    assert_string_equal (fh_option_scalar (node), "");
    fh_option_destroy (&node);
}

/* append takes the child in every case; on failure it frees it (the leak
   checker of the sanitized build proves it). */
static void
test_append_refuses_misuse (void **state)
{
    (void) state;
    fanhub_option_t *map = fh_option_new (FANHUB_OPTION_MAP, NULL, "m");
    fanhub_option_t *list = fh_option_new (FANHUB_OPTION_LIST, NULL, "l");
    fanhub_option_t *scalar = fh_option_new (FANHUB_OPTION_SCALAR, "s", "s");

    struct {
        const char *name;
        fanhub_option_t *parent;
        const char *key;
    } cases[] = {
        {"map without a key", map, NULL}, {"list with a key", list, "k"},
        {"scalar parent", scalar, NULL},  {"scalar parent with a key", scalar, "k"},
        {"NULL parent", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fanhub_option_t *child = fh_option_new (FANHUB_OPTION_SCALAR, "x", "x");
        if (fh_option_append (cases[i].parent, cases[i].key, child) != -1)
            fail_msg ("%s: append accepted", cases[i].name);
    }
    assert_int_equal (fh_option_append (map, "k", NULL), -1);
    assert_int_equal (fh_option_count (map), 0);
    assert_int_equal (fh_option_count (list), 0);

    /* Many entries: growth keeps order and keys. */
    for (int i = 0; i < 100; i++) {
        char text[16];
        snprintf (text, sizeof text, "%d", i);
        assert_int_equal (
            fh_option_append (map, text, fh_option_new (FANHUB_OPTION_SCALAR, text, "w")), 0);
    }
    assert_int_equal (fh_option_count (map), 100);
    const char *key;
    assert_string_equal (fh_option_scalar (fh_option_at (map, 57, &key)), "57");
    assert_string_equal (key, "57");
    assert_string_equal (fh_option_scalar (fh_option_get (map, "99")), "99");

    fh_option_destroy (&map);
    fh_option_destroy (&list);
    fh_option_destroy (&scalar);
}

/* Duplicate keys are the caller's to refuse: get answers the first. */
static void
test_get_answers_first_key (void **state)
{
    (void) state;
    fanhub_option_t *map = fh_option_new (FANHUB_OPTION_MAP, NULL, "m");
    fh_option_append (map, "k", fh_option_new (FANHUB_OPTION_SCALAR, "1", "a"));
    fh_option_append (map, "k", fh_option_new (FANHUB_OPTION_SCALAR, "2", "b"));
    assert_string_equal (fh_option_scalar (fh_option_get (map, "k")), "1");
    fh_option_destroy (&map);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_build_and_read),
        cmocka_unit_test (test_accessors_on_null),
        cmocka_unit_test (test_destroy_twice),
        cmocka_unit_test (test_at_out_of_range),
        cmocka_unit_test (test_new_refuses_misuse),
        cmocka_unit_test (test_append_refuses_misuse),
        cmocka_unit_test (test_get_answers_first_key),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
