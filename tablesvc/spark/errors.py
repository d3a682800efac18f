"""Errors raised inside Spark tasks come back as Py4J/PySpark exceptions whose text holds
the Python traceback.  ``translate_task_error`` recovers tablesvc's own error (type and
message) from that text, so the CLI can still print one line with the right exit code."""

from __future__ import annotations

import re

from tablesvc import errors as tablesvc_errors

_ERROR = re.compile(r"(?:tablesvc|timeline)\.errors\.(\w+): (.+)")


def translate_task_error(exc: BaseException) -> BaseException:
    if isinstance(exc, tablesvc_errors.TablesvcError) or not type(exc).__module__.startswith(("pyspark", "py4j")):
        return exc
    matches = _ERROR.findall(str(exc))
    if not matches:
        return exc
    name, message = matches[-1]
    cls = getattr(tablesvc_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, tablesvc_errors.TablesvcError):
        return cls(message.strip())
    return exc
