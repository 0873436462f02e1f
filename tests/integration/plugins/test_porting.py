"""Every Python example of docs/porting.md runs as written: each ```python
block that starts with `# PATH.py` is written to PATH under a work
directory (a package's folders get an __init__.py), and a block for
/etc/fedmsg.d/ is read as the fedmsg configuration that becomes the
consumer's options.config, as the page says it moves. Then:

- myconsumer.consumers:MyConsumer takes the rawhide composes of the
  sample of real Fedora messages and prints them;
- saver.consumer:SaveMessage saves messages, with the runner's stand-ins
  and with a fedora_messaging whose LazyConfig would read /etc
  (tests/integration/upstream);
- relay.consumers:Relay publishes what it consumes (PUBLISH frames, read
  by the protocol-2 hub of test_worker_upstream);
- every YAML example that elides nothing (no `...` line) passes `fanhub
  check` as written."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import test_worker_styles as styles
import test_worker_upstream as upstream

PORTING = os.path.join(fh.SOURCE_DIR, "docs", "porting.md")


def examples(wd):
    """Writes the examples under wd; returns (the directory, the fedmsg
    configuration, the names written)."""
    with open(PORTING) as f:
        text = f.read()
    root = wd.file("examples")
    config, written = None, []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first = block.splitlines()[0]
        match = re.fullmatch(r"# (\S+\.py)", first)
        assert match, "a Python example of porting.md names no file: %r" % first
        path = match.group(1)
        if path.startswith("/etc/fedmsg.d/"):
            scope = {}
            exec(compile(block, path, "exec"), scope)
            config = scope["config"]
            continue
        target = os.path.join(root, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        package = os.path.join(os.path.dirname(target), "__init__.py")
        if not os.path.exists(package):
            open(package, "w").close()
        with open(target, "w") as f:
            f.write(block)
        written.append(path)
    return root, config, written


def test_every_example_is_run():
    wd = fh.Workdir()
    root, config, written = examples(wd)
    assert written == ["myconsumer/consumers.py", "saver/consumer.py", "relay/consumers.py"], \
        "an example this test does not run: %s" % written
    assert config == {"myconsumer.enabled": True, "myconsumer.database": "postgresql://..."}
    wd.cleanup()


def test_the_fedmsg_consumer():
    wd = fh.Workdir()
    root, config, _ = examples(wd)
    rawhide = [m for m in styles.sample()
               if m["topic"] == "org.fedoraproject.prod.compose.rawhide.complete"]
    c, log = styles.run_sample(wd, '{callable: "myconsumer.consumers:MyConsumer", path: [%s], '
                               'config: %s}' % (json.dumps(root), json.dumps(config)))
    assert c["failed"] == 0 and c["completed"] - c["skipped"] == len(rawhide), c
    assert log.count("consumer 'c': worker 0: {'body': {") == len(rawhide), log[-3000:]
    wd.cleanup()


def test_the_fedora_messaging_callback():
    wd = fh.Workdir()
    root, _, _ = examples(wd)
    messages = [m for m in styles.sample() if "msg_id" in m["body"]][:20]
    for paths in ([root], [upstream.UPSTREAM_DIR, root]):
        saved = os.path.join(wd.file("saver-%d" % len(paths)), "messages.txt")
        options = ('{callable: "saver.consumer:SaveMessage", path: %s, config: {path: %s}}'
                   % (json.dumps(paths), json.dumps(saved)))
        c, _, log = upstream.run_hub(wd, options, [(m["topic"], m["body"]) for m in messages],
                                     lambda c: c["completed"] + c["failed"] == len(messages),
                                     events_file="events-%d.jsonl" % len(paths))
        assert c["failed"] == 0, log
        with open(saved) as f:
            text = f.read()
        for m in messages:
            assert m["body"]["msg_id"] in text, (m, text[:2000])
    wd.cleanup()


def test_the_relay():
    wd = fh.Workdir()
    root, _, _ = examples(wd)
    hub = upstream.RawHub(wd, {"callable": "relay.consumers:Relay", "path": [root],
                               "config": {"relay.enabled": True}})
    body = {"topic": "org.fedoraproject.prod.buildsys.tag", "msg": {"tag": "f40"}, "msg_id": "x"}
    hub.message(1, "org.fedoraproject.prod.buildsys.tag", body)
    hub.message(2, "org.fedoraproject.prod.bodhi.update", {"msg": {}})
    frames = [f for f in hub.until_answers(2) if f[0] != "L"]
    assert frames == [("P", ("relayed.org.fedoraproject.prod.buildsys.tag",
                             json.dumps(body).encode())),
                      ("A", (1, 0, "")), ("A", (2, 3, "topic not in the class's topic"))], frames
    hub.quit()
    wd.cleanup()


def test_the_configurations_check():
    wd = fh.Workdir()
    with open(PORTING) as f:
        blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    whole = [b for b in blocks if not re.search(r"^\s*\.\.\.", b, re.M)]
    assert len(whole) >= 1, blocks
    for i, block in enumerate(whole):
        status, out, err = fh.run(["check", "-c", wd.write("porting-%d.yaml" % i, block)])
        assert status == 0 and "OK" in out, (block, out, err)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_every_example_is_run, test_the_fedmsg_consumer,
             test_the_fedora_messaging_callback, test_the_relay, test_the_configurations_check])
