"""A fedora-messaging config.toml, read as fedora-messaging reads it, for
the hub (`fedora_messaging: FILE` on a consumer) and for the runner
(consumer_config, log_config).

The hub is C and Debian 12 has no C TOML library; its /usr/bin/python3
(3.11) has tomllib. So the hub runs

    /usr/bin/python3 -m fanhub_worker.fm_config FILE

which prints one JSON object: the file normalised over fedora-messaging's
defaults (fedora_messaging/config.py DEFAULTS at 48c5ccbc), bindings one
per (queue, exchange, routing key), with "warnings" (keys read but not
honoured) and "errors" (keys refused, the file unreadable), each naming
its key. Exit status 0 when errors is empty, else 1.
"""
import importlib
import json
import sys
import uuid
from typing import Any, Dict, List, Tuple

try:  # by name: the runner's checks type it for Python 3.9 too
    tomllib: Any = importlib.import_module("tomllib")
except ImportError:  # Python < 3.11
    tomllib = None

# The keys fedora-messaging reads; how fanhub takes each is in
# docs/porting.md ("Moving a fedora-messaging consumer").
TOP_KEYS = ("amqp_url", "client_properties", "publish_exchange", "topic_prefix",
            "publish_priority", "passive_declares", "exchanges", "queues", "bindings", "qos",
            "callback", "monitoring", "consumer_config", "tls", "log_config")
EXCHANGE_KEYS = ("type", "durable", "auto_delete", "arguments")
QUEUE_KEYS = ("durable", "auto_delete", "exclusive", "arguments")
BINDING_KEYS = ("queue", "exchange", "routing_keys", "arguments")
QOS_KEYS = ("prefetch_size", "prefetch_count")
TLS_KEYS = ("ca_cert", "certfile", "keyfile")

DEFAULT_LOG_CONFIG: Dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"simple": {"format": "[%(name)s %(levelname)s] %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "simple",
                             "stream": "ext://sys.stdout"}},
    "loggers": {"fedora_messaging": {"level": "INFO", "propagate": False,
                                     "handlers": ["console"]}},
    "root": {"level": "WARNING", "handlers": ["console"]},
}


class Verdicts:
    def __init__(self) -> None:
        self.errors: List[str] = []
        self.warnings: List[str] = []

    def unknown(self, where: str, table: Any, known: Tuple[str, ...]) -> None:
        if not isinstance(table, dict):
            self.errors.append("%s: expected a table, got %s" % (where, type(table).__name__))
            return
        for key in table:
            if key not in known:
                self.errors.append("%s%s: unknown key (fedora-messaging has no such key; "
                                   "known: %s)" % (where + "." if where else "", key,
                                                   ", ".join(known)))

    def typed(self, where: str, value: Any, kind: Any, name: str) -> bool:
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return True
        self.errors.append("%s: expected %s, got %r" % (where, name, value))
        return False


def _declared(what: str, raw: Any, v: Verdicts, keys: Any,
              defaults: Dict[str, Any]) -> List[Dict[str, Any]]:
    """[exchanges] or [queues]: a table of names, each with its keys
    (flags read as booleans, as pika does), defaults filled in."""
    out: List[Dict[str, Any]] = []
    if not v.typed(what, raw, dict, "a table of " + what):
        return out
    for name, spec in raw.items():
        v.unknown("%s.%s" % (what, name), spec, keys)
        spec = spec if isinstance(spec, dict) else {}
        entry: Dict[str, Any] = {"name": name}
        for key, default in defaults.items():
            value = spec.get(key, default)
            entry[key] = bool(value) if isinstance(default, bool) else value
        out.append(entry)
    return out


def _exchanges(raw: Any, v: Verdicts) -> List[Dict[str, Any]]:
    return _declared("exchanges", raw, v, EXCHANGE_KEYS,
                     {"type": "direct", "durable": False, "auto_delete": False, "arguments": {}})


def _queues(raw: Any, v: Verdicts) -> List[Dict[str, Any]]:
    return _declared("queues", raw, v, QUEUE_KEYS,
                     {"durable": False, "auto_delete": False, "exclusive": False,
                      "arguments": {}})


def _bindings(raw: Any, queues: List[str], v: Verdicts) -> List[Dict[str, Any]]:
    """One entry per (queue, exchange, routing key): a [[bindings]] may
    name several queues (a list), as fedora-messaging allows."""
    out: List[Dict[str, Any]] = []
    if not v.typed("bindings", raw, list, "an array of tables ([[bindings]])"):
        return out
    for i, spec in enumerate(raw):
        where = "bindings[%d]" % i
        v.unknown(where, spec, BINDING_KEYS)
        if not isinstance(spec, dict):
            continue
        targets = spec.get("queue")
        targets = targets if isinstance(targets, list) else [targets]
        keys = spec.get("routing_keys")
        if not isinstance(spec.get("exchange"), str):
            v.errors.append("%s.exchange: required, a string" % where)
            continue
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            v.errors.append("%s.routing_keys: required, an array of strings" % where)
            continue
        for queue in targets:
            if not isinstance(queue, str):
                v.errors.append("%s.queue: required, a string or an array of strings" % where)
                break
            if queue not in queues:
                v.errors.append("%s.queue: '%s' is not declared in [queues]" % (where, queue))
            for key in keys:
                out.append({"queue": queue, "exchange": spec["exchange"], "routing_key": key,
                            "arguments": spec.get("arguments", {})})
    return out


def normalise(raw: Dict[str, Any], path: str) -> Dict[str, Any]:
    v = Verdicts()
    v.unknown("", raw, TOP_KEYS)
    callback = raw.get("callback")
    if callback is None:
        v.errors.append("callback: required (\"package.module:callable\"); fanhub runs the "
                        "consumer the file names")
    elif not isinstance(callback, str) or ":" not in callback:
        v.errors.append("callback: expected \"package.module:callable\", got %r" % (callback,))
    url = raw.get("amqp_url", "amqp://")
    v.typed("amqp_url", url, str, "a string")
    tls = raw.get("tls", {})
    v.unknown("tls", tls, TLS_KEYS)
    tls = tls if isinstance(tls, dict) else {}
    qos = raw.get("qos", {})
    v.unknown("qos", qos, QOS_KEYS)
    qos = qos if isinstance(qos, dict) else {}
    prefetch = qos.get("prefetch_count", 10)
    if v.typed("qos.prefetch_count", prefetch, int, "an integer") and not 1 <= prefetch <= 65535:
        v.errors.append("qos.prefetch_count: expected 1 to 65535, got %d" % prefetch)
    if qos.get("prefetch_size", 0) != 0:
        v.warnings.append("qos.prefetch_size: not honoured (RabbitMQ does not implement it); "
                          "prefetch_count bounds what is in flight")
    if "queues" in raw:
        queues = _queues(raw["queues"], v)
    else:  # fedora-messaging's default: a private queue of a random name
        queues = [{"name": str(uuid.uuid4()), "durable": False, "auto_delete": True,
                   "exclusive": True, "arguments": {}}]
    names = [q["name"] for q in queues]
    exchanges = _exchanges(raw.get("exchanges", {"amq.topic": {
        "type": "topic", "durable": True, "auto_delete": False, "arguments": {}}}), v)
    bindings = _bindings(raw.get("bindings", [{"queue": names, "exchange": "amq.topic",
                                               "routing_keys": ["#"]}]), names, v)
    if not queues:
        v.errors.append("queues: no queue to consume")
    for key in ("publish_exchange", "topic_prefix", "publish_priority"):
        if key in raw:
            v.warnings.append("%s: not honoured: a consumer moved to fanhub publishes through "
                              "the hub's publish: endpoints, not to an AMQP exchange" % key)
    if raw.get("monitoring"):
        v.warnings.append("monitoring: not honoured: fanhub's status page, /metrics and "
                          "`fanhub stats` serve instead")
    passive = raw.get("passive_declares", False)
    v.typed("passive_declares", passive, bool, "true or false")
    client_properties = raw.get("client_properties", {})
    if v.typed("client_properties", client_properties, dict, "a table"):
        for key, value in client_properties.items():
            if not isinstance(value, str):
                v.errors.append("client_properties.%s: expected a string" % key)
    consumer_config = raw.get("consumer_config", {})
    v.typed("consumer_config", consumer_config, dict, "a table")
    log_config = raw.get("log_config", DEFAULT_LOG_CONFIG)
    v.typed("log_config", log_config, dict, "a table (logging.config.dictConfig's)")
    return {
        "file": path,
        "amqp_url": url,
        "callback": callback,
        "tls": {key: tls.get(key) for key in TLS_KEYS},
        "client_properties": client_properties,
        "exchanges": exchanges,
        "queues": queues,
        "bindings": bindings,
        "prefetch_count": prefetch,
        "passive_declares": bool(passive),
        "consumer_config": consumer_config,
        "log_config": log_config,
        "warnings": v.warnings,
        "errors": v.errors,
    }


def load(path: str) -> Dict[str, Any]:
    """The normalised file; errors name what is wrong (never raises for
    the file's content or absence)."""
    if tomllib is None:
        return {"file": path, "errors": ["reading TOML needs Python 3.11 or later (tomllib); "
                                         "this is %s" % sys.version.split()[0]], "warnings": []}
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except OSError as e:
        return {"file": path, "errors": ["cannot read it: %s" % (e.strerror or e)],
                "warnings": []}
    except tomllib.TOMLDecodeError as e:
        return {"file": path, "errors": ["not TOML: %s" % e], "warnings": []}
    return normalise(raw, path)


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python3 -m fanhub_worker.fm_config CONFIG.TOML\n")
        return 2
    result = load(argv[1])
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
