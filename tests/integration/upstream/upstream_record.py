"""One JSON line per event to $UPSTREAM_TEST_OUT (O_APPEND, one write a
line), for the stand-ins here and the consumers that use them."""
import json
import os


def record(event, **fields):
    path = os.environ.get("UPSTREAM_TEST_OUT")
    if not path:
        return
    fields["event"] = event
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(fields, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)
