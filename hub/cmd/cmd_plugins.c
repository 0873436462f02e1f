/*  cmd_plugins - `fanhub plugins`: list the plugins a hub would find.

    Every NAME.so in the plugin directory is what `plugin: NAME` can name.
    Each is loaded the way the hub loads a consumer's plugin (fh_plugin_load:
    dlopen, entry symbol, ABI and descriptor checks), its descriptor shown,
    and unloaded; init is not called, so no plugin needs options here. A
    shared object that does not load is listed with the reason instead:
    this is the command to run when `fanhub check` says a plugin is
    missing or built for another ABI.
*/
#include "cli.h"
#include "commands.h"
#include "host.h"
#include "option_table.h"
#include "plugin.h"

#include <dirent.h>
#include <errno.h>
#include <fanhub/sdk.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char *name; /* the file name less ".so": what `plugin:` names */
    char *path;
    fh_plugin_t *plugin; /* NULL when it did not load */
    char error[1024];
} s_entry_t;

enum { S_OPT_PLUGIN_DIR = FH_CLI_LONG_ONLY, S_OPT_OPTIONS };

static const fh_cli_option_t s_options[] = {
    {S_OPT_PLUGIN_DIR, "plugin-dir", "DIR",
     "the directory to list (default: $FANHUB_PLUGIN_DIR,\n"
     "else ../lib/fanhub/plugins beside this program,\n"
     "else the installed plugin directory)"},
    {'j', "json", NULL, "one JSON object instead of a table"},
    {S_OPT_OPTIONS, "options", "NAME",
     "print the option table of plugin NAME (a name\n"
     "in the plugin directory, or a path): each\n"
     "option's name, type, default, range and\n"
     "description"},
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_command = {
    "plugins",
    "[--plugin-dir DIR] [--json | --options NAME]",
    "Lists the plugins in the plugin directory, the ones a consumer names\n"
    "with 'plugin: NAME': each NAME.so is loaded as the hub loads it (its\n"
    "entry symbol, ABI version and descriptor are checked; init is not\n"
    "called) and shown with its version, the plugin ABI it was built for\n"
    "and whether it may run with 'workers: N' (thread-safe). A shared\n"
    "object that does not load is listed with the reason. With --options\n"
    "NAME, prints the options plugin NAME declares (plugin ABI 1.2), as\n"
    "the hub checks a consumer's options: against this table.",
    s_options,
    "Exit status: 0 every plugin loaded, 1 one did not or the directory\n"
    "cannot be read, 2 bad usage.",
};

static int
s_entry_cmp (const void *a, const void *b)
{
    return strcmp (((const s_entry_t *) a)->name, ((const s_entry_t *) b)->name);
}

static void
s_entries_free (s_entry_t *entries, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        fh_plugin_destroy (&entries[i].plugin);
        free (entries[i].name);
        free (entries[i].path);
    }
    free (entries);
}

/* The NAME.so files of dir (regular files, symbolic links followed),
   sorted by name. Hidden files are left out, as a shell's glob would. */
static int
s_scan (const char *dir, s_entry_t **entries_p, size_t *count_p, char *err, size_t errlen)
{
    DIR *d = opendir (dir);
    if (!d) {
        snprintf (err, errlen, "%s: %s", dir, strerror (errno));
        return -1;
    }
    s_entry_t *entries = NULL;
    size_t count = 0, room = 0;
    struct dirent *de;
    int rc = 0;
    errno = 0;
    while ((de = readdir (d))) {
        size_t len = strlen (de->d_name);
        if (de->d_name[0] == '.' || len <= 3 || strcmp (de->d_name + len - 3, ".so") != 0)
            continue;
        size_t path_size = strlen (dir) + len + 2;
        char *path = malloc (path_size);
        char *name = strndup (de->d_name, len - 3);
        struct stat st;
        if (path)
            snprintf (path, path_size, "%s/%s", dir, de->d_name);
        if (path && name && (stat (path, &st) != 0 || !S_ISREG (st.st_mode))) {
            free (path);
            free (name);
            continue;
        }
        if (path && name && count == room) {
            size_t room_new = room ? room * 2 : 16;
            s_entry_t *grown = realloc (entries, room_new * sizeof *grown);
            if (grown) {
                entries = grown;
                room = room_new;
            }
        }
        if (!path || !name || count == room) {
            free (path);
            free (name);
            snprintf (err, errlen, "%s: out of memory", dir);
            rc = -1;
            break;
        }
        entries[count++] = (s_entry_t){.name = name, .path = path};
        errno = 0;
    }
    if (rc == 0 && errno) {
        snprintf (err, errlen, "%s: %s", dir, strerror (errno));
        rc = -1;
    }
    closedir (d);
    if (rc) {
        s_entries_free (entries, count);
        return -1;
    }
    if (count)
        qsort (entries, count, sizeof *entries, s_entry_cmp);
    *entries_p = entries;
    *count_p = count;
    return 0;
}

/* A plugin's own strings may hold anything: show printable ASCII and
   valid UTF-8 as they are, anything else as '?'. */
static void
s_printable (const char *text, char *out, size_t room)
{
    size_t n = 0;
    if (!text)
        text = "-";
    bool utf8 = fanhub_utf8_valid (text, strlen (text));
    for (const unsigned char *c = (const unsigned char *) text; *c && n + 1 < room; c++)
        out[n++] = (*c < 0x20 || *c == 0x7f || (*c >= 0x80 && !utf8)) ? '?' : (char) *c;
    out[n] = '\0';
}

static json_t *
s_json_text (const char *text)
{
    char shown[1024];
    s_printable (text, shown, sizeof shown);
    return json_string (shown);
}

static void
s_print_table (const char *dir, s_entry_t *entries, size_t count)
{
    printf ("plugin directory: %s (this hub speaks plugin ABI %d.%d)\n", dir, FANHUB_ABI_MAJOR,
            FANHUB_ABI_MINOR);
    if (count == 0) {
        printf ("no plugins (no NAME.so files)\n");
        return;
    }
    int name_w = 4, version_w = 7;
    char shown[256];
    for (size_t i = 0; i < count; i++) {
        s_printable (entries[i].name, shown, sizeof shown);
        if ((int) strlen (shown) > name_w)
            name_w = (int) strlen (shown);
        if (entries[i].plugin) {
            s_printable (fh_plugin_desc (entries[i].plugin)->version, shown, sizeof shown);
            if ((int) strlen (shown) > version_w)
                version_w = (int) strlen (shown);
        }
    }
    printf ("%-*s  %-*s  %-5s  %-11s  %s\n", name_w, "NAME", version_w, "VERSION", "ABI",
            "THREAD-SAFE", "PATH");
    for (size_t i = 0; i < count; i++) {
        s_entry_t *entry = &entries[i];
        char name[256], version[256];
        s_printable (entry->name, name, sizeof name);
        if (!entry->plugin) {
            printf ("%-*s  does not load: %s\n", name_w, name, entry->error);
            continue;
        }
        const fanhub_consumer_desc_t *desc = fh_plugin_desc (entry->plugin);
        char abi[32];
        snprintf (abi, sizeof abi, "%u.%u", desc->abi_major, desc->abi_minor);
        s_printable (desc->version, version, sizeof version);
        printf ("%-*s  %-*s  %-5s  %-11s  %s", name_w, name, version_w, version, abi,
                desc->flags & FANHUB_CONSUMER_THREAD_SAFE ? "yes" : "no",
                fh_plugin_path (entry->plugin));
        /* The name in the descriptor is the one its log lines use. */
        if (strcmp (desc->name, entry->name) != 0) {
            s_printable (desc->name, name, sizeof name);
            printf ("  (calls itself '%s')", name);
        }
        printf ("\n");
    }
}

static int
s_print_json (const char *dir, s_entry_t *entries, size_t count)
{
    json_t *list = json_array ();
    for (size_t i = 0; list && i < count; i++) {
        s_entry_t *entry = &entries[i];
        json_t *item = json_object ();
        json_object_set_new (item, "name", s_json_text (entry->name));
        json_object_set_new (item, "path", s_json_text (entry->path));
        json_object_set_new (item, "loaded", json_boolean (entry->plugin != NULL));
        if (entry->plugin) {
            const fanhub_consumer_desc_t *desc = fh_plugin_desc (entry->plugin);
            char abi[32];
            snprintf (abi, sizeof abi, "%u.%u", desc->abi_major, desc->abi_minor);
            json_object_set_new (item, "descriptor_name", s_json_text (desc->name));
            json_object_set_new (item, "version",
                                 desc->version ? s_json_text (desc->version) : json_null ());
            json_object_set_new (item, "abi", json_string (abi));
            json_object_set_new (item, "abi_major", json_integer (desc->abi_major));
            json_object_set_new (item, "abi_minor", json_integer (desc->abi_minor));
            json_object_set_new (item, "thread_safe",
                                 json_boolean (desc->flags & FANHUB_CONSUMER_THREAD_SAFE));
            json_object_set_new (item, "flags", json_integer (desc->flags));
            json_object_set_new (item, "has_init", json_boolean (desc->init != NULL));
            json_object_set_new (item, "has_idle", json_boolean (desc->idle != NULL));
            json_object_set_new (item, "has_fini", json_boolean (desc->fini != NULL));
        }
        else
            json_object_set_new (item, "error", s_json_text (entry->error));
        json_array_append_new (list, item);
    }
    char abi[32];
    snprintf (abi, sizeof abi, "%d.%d", FANHUB_ABI_MAJOR, FANHUB_ABI_MINOR);
    json_t *root = json_pack ("{s:o, s:s, s:o*}", "plugin_dir", s_json_text (dir), "hub_abi", abi,
                              "plugins", list);
    char *text = root ? json_dumps (root, JSON_INDENT (2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref (root);
    if (!text) {
        fprintf (stderr, "fanhub plugins: out of memory\n");
        return -1;
    }
    printf ("%s\n", text);
    free (text);
    return 0;
}

/* --options NAME: the plugin's option table. */
static int
s_print_options (const char *spec, const char *dir)
{
    char err[1024];
    fh_plugin_t *plugin = fh_plugin_load (spec, dir, err, sizeof err);
    if (!plugin) {
        fprintf (stderr, "fanhub plugins: %s\n", err);
        return FH_EXIT_FAILURE;
    }
    const fanhub_consumer_desc_t *desc = fh_plugin_desc (plugin);
    const fanhub_opt_t *table = fh_option_table_of (desc);
    char name[256];
    s_printable (desc->name, name, sizeof name);
    printf ("plugin %s (%s), ABI %u.%u\n", name, fh_plugin_path (plugin), desc->abi_major,
            desc->abi_minor);
    if (table)
        fh_option_table_print (stdout, table);
    else
        printf ("(no option table: the plugin reads its options itself)\n");
    fh_plugin_destroy (&plugin);
    return FH_EXIT_OK;
}

int
fh_cmd_plugins (int argc, char **argv)
{
    const char *plugin_dir = NULL, *options_of = NULL;
    bool json = false;
    fh_cli_t cli;
    fh_cli_begin (&cli, &s_command, argc, argv);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case S_OPT_PLUGIN_DIR: plugin_dir = arg; break;
        case 'j': json = true; break;
        case S_OPT_OPTIONS: options_of = arg; break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc) {
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    }
    if (json && options_of)
        return fh_cli_usage_error (&s_command, "give --json or --options, not both");
    const char *dir = fh_plugin_dir (plugin_dir);
    if (options_of) {
        int rc = s_print_options (options_of, dir);
        if (fflush (stdout) != 0 || ferror (stdout)) {
            fprintf (stderr, "fanhub plugins: cannot write: %s\n", strerror (errno));
            return FH_EXIT_FAILURE;
        }
        return rc;
    }
    s_entry_t *entries = NULL;
    size_t count = 0;
    char err[1024];
    if (s_scan (dir, &entries, &count, err, sizeof err)) {
        fprintf (stderr, "fanhub plugins: cannot list the plugin directory: %s\n", err);
        return FH_EXIT_FAILURE;
    }
    size_t failed = 0;
    for (size_t i = 0; i < count; i++) {
        s_entry_t *entry = &entries[i];
        entry->plugin = fh_plugin_load (entry->path, dir, entry->error, sizeof entry->error);
        if (entry->plugin)
            continue;
        failed++;
        /* The loader names the spec first; here the spec is the path, which
           its reason repeats: keep the reason. */
        char prefix[1100];
        snprintf (prefix, sizeof prefix, "plugin '%s': ", entry->path);
        size_t len = strlen (prefix);
        if (strncmp (entry->error, prefix, len) == 0)
            memmove (entry->error, entry->error + len, strlen (entry->error + len) + 1);
    }
    int rc = json ? s_print_json (dir, entries, count) : 0;
    if (!json)
        s_print_table (dir, entries, count);
    s_entries_free (entries, count);
    if (fflush (stdout) != 0 || ferror (stdout)) {
        fprintf (stderr, "fanhub plugins: cannot write: %s\n", strerror (errno));
        return FH_EXIT_FAILURE;
    }
    if (rc)
        return FH_EXIT_FAILURE;
    if (failed) {
        fprintf (stderr, "fanhub plugins: %zu of %zu plugin%s did not load\n", failed, count,
                 count == 1 ? "" : "s");
        return FH_EXIT_FAILURE;
    }
    return FH_EXIT_OK;
}
