"""The reason an answer gives for an exception: its last line, the
traceback logged first where nothing else logged it."""
import logging
import traceback
from typing import Optional


def last_line(exc: BaseException) -> str:
    if not str(exc):
        return type(exc).__name__
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def failed(exc: BaseException, message_id: Optional[str]) -> str:
    """The reason of an exception that escaped the consumer, its traceback
    logged first."""
    logging.getLogger("fanhub_worker").error(
        "message %s: %s", message_id, "".join(traceback.format_exception(
            type(exc), exc, exc.__traceback__)).rstrip())
    return last_line(exc)
