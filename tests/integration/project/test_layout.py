"""The layout a newcomer reads (hub/README.md): every file of hub/ has a
line in the map, the top of hub/ stays the data path, each concern has its
folder, and the tests' folders are those rooms; and the threads the map
names are the names `top -H` shows."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

HUB = os.path.join(fh.SOURCE_DIR, "hub")
CONCERNS = ("consumer", "config", "control", "plugin", "security", "amqp", "util", "cmd",
            "metrics", "storage", "publish")


def hub_files():
    """Every file under hub/, as a path relative to hub/."""
    found = []
    for top, dirs, files in os.walk(HUB):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            found.append(os.path.relpath(os.path.join(top, name), HUB))
    return sorted(found)


def test_map_lists_every_file():
    with open(os.path.join(HUB, "README.md")) as f:
        text = f.read()
    # A file is listed when its path (from hub/) stands in backquotes.
    listed = set(re.findall(r"`([A-Za-z0-9_./-]+)`", text))
    missing = [path for path in hub_files() if path not in listed]
    assert not missing, "hub/README.md has no line for: " + ", ".join(missing)
    stale = [path for path in listed
             if re.fullmatch(r"([a-z]+/)?[a-z_0-9]+\.(c|h)", path)
             and not os.path.exists(os.path.join(HUB, path))]
    assert not stale, "hub/README.md names files that do not exist: " + ", ".join(stale)


def test_tests_mirror_hub():
    """tests/unit and tests/integration are in the rooms of hub/ (README
    "Tests"), besides plugins/ and sdk/ (the shipped plugins, the SDK),
    and in integration bench/, project/ and the helpers' folders."""
    others = {"unit": {"plugins", "sdk"},
              "integration": {"plugins", "sdk", "bench", "project", "workers", "upstream"}}
    for kind, extra in others.items():
        top = os.path.join(fh.SOURCE_DIR, "tests", kind)
        rooms = {d for d in os.listdir(top)
                 if os.path.isdir(os.path.join(top, d)) and d != "__pycache__"}
        assert rooms & set(CONCERNS), "no room of hub/ under tests/%s: %s" % (kind, rooms)
        stray = sorted(rooms - set(CONCERNS) - extra)
        assert not stray, "tests/%s/ has folders that are no room of hub/: %s" % (kind, stray)


def mutex_declarations():
    """(file from hub/, field or variable name) of every pthread_mutex_t."""
    found = []
    for path in hub_files():
        if not path.endswith((".c", ".h")):
            continue
        with open(os.path.join(HUB, path)) as f:
            for name in re.findall(r"^\s*(?:static\s+)?pthread_mutex_t\s+(\w+)", f.read(), re.M):
                found.append((path, name))
    return found


def test_lock_list_names_every_mutex():
    with open(os.path.join(HUB, "README.md")) as f:
        text = f.read()
    section = text.split("## Locks and their order", 1)[1].split("\n## ", 1)[0]
    # One item of the list: from its number to the next one.
    items = re.split(r"\n(?=\d+\. )", section)
    declared = mutex_declarations()
    assert len(declared) >= 20, "found only %d mutexes: %s" % (len(declared), declared)
    missing = []
    for path, name in declared:
        # The item that names the lock's field names its file too.
        if not any("`%s`" % name in item and "`%s`" % path in item for item in items):
            missing.append("%s in %s" % (name, path))
    assert not missing, "hub/README.md's lock list leaves out: " + ", ".join(missing)


def test_top_of_hub_stays_small():
    top = [name for name in os.listdir(HUB) if os.path.isfile(os.path.join(HUB, name))]
    assert len(top) <= 40, "hub/ has %d files at its top (at most 40): %s" % (len(top), top)
    for concern in CONCERNS:
        assert os.path.isdir(os.path.join(HUB, concern)), "no hub/%s/" % concern


def thread_names(pid):
    names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return names


def test_threads_are_named():
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\n"
              "consumers:\n"
              "  - name: single\n    plugin: \"null\"\n"
              "  - name: pooled\n    plugin: \"null\"\n    workers: 2\n"
              "    order_by: topic\n" % pub.endpoint)
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        want = {"fh:enq", "fh:control", "fh:c:single", "fh:d:pooled", "fh:w0:pooled",
                "fh:w1:pooled"}
        fh.wait_for(lambda: want <= set(thread_names(hub.proc.pid)), "the named threads",
                    hub=hub)
        # Every thread the hub made itself carries a name of ours; the
        # rest are libzmq's and CZMQ's own (ZMQbg/..., named by libzmq).
        names = thread_names(hub.proc.pid)
        unnamed = [n for n in names if not n.startswith(("fh:", "ZMQbg")) and n != "fanhub"]
        assert not unnamed, "threads without a name of ours: %s (all: %s)" % (unnamed, names)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_map_lists_every_file, test_lock_list_names_every_mutex, test_top_of_hub_stays_small,
             test_tests_mirror_hub, test_threads_are_named])
