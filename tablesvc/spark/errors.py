"""Errors raised inside Spark tasks come back as Py4J/PySpark exceptions whose text holds
the Python traceback.  ``translate_task_error`` recovers tablesvc's own error (type and
message) from that text, so the CLI can still print one line with the right exit code."""

from __future__ import annotations

import re

from tablesvc import errors as tablesvc_errors

_ERROR = re.compile(r"(?:tablesvc|timeline)\.errors\.(\w+): (.+)")
# The last line of a Python traceback inside the task, e.g. "FileNotFoundError: [Errno 2] ... 'path'"
_PYTHON_ERROR = re.compile(r"^(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)


def translate_task_error(exc: BaseException) -> BaseException:
    if isinstance(exc, tablesvc_errors.TablesvcError) or not type(exc).__module__.startswith(("pyspark", "py4j")):
        return exc
    matches = _ERROR.findall(str(exc))
    if not matches:
        other = _PYTHON_ERROR.findall(str(exc))
        if other:  # any other Python error of a task: one line naming it (a missing file names the path)
            name, message = other[-1]
            return tablesvc_errors.TablesvcError(f"a Spark task failed: {name}: {message.strip()}")
        return exc
    name, message = matches[-1]
    cls = getattr(tablesvc_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, tablesvc_errors.TablesvcError):
        return cls(message.strip())
    return exc
