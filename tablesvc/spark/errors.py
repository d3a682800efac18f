"""Errors raised inside Spark tasks come back as Py4J/PySpark exceptions whose text holds
the Python traceback.  ``translate_task_error`` recovers tablesvc's own error (type and
message) from that text, so the CLI can still print one line with the right exit code."""

from __future__ import annotations

import re

from tablesvc import errors as tablesvc_errors

_ERROR = re.compile(r"(?:tablesvc|timeline)\.errors\.(\w+): (.+)")
# The last line of a Python traceback inside the task, e.g. "FileNotFoundError: [Errno 2] ... 'path'"
_PYTHON_ERROR = re.compile(r"^(\w+(?:Error|Exception)): (.+)$", re.MULTILINE)
# Spark's own Parquet reader (native_scan.py) failing on a base file: the file, then the cause
_JVM_READ = re.compile(r"error while reading file (\S+?)\.?\s+SQLSTATE")
_JVM_CAUSE = re.compile(r"^Caused by: [\w.$]+: (.+)$", re.MULTILINE)
# Spark's raise_error (the write's routing checks) ends the message with the error's SQL state
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\s*$")


def translate_task_error(exc: BaseException) -> BaseException:
    if isinstance(exc, tablesvc_errors.TablesvcError) or not type(exc).__module__.startswith(("pyspark", "py4j")):
        return exc
    matches = _ERROR.findall(str(exc))
    if not matches:
        read = _JVM_READ.search(str(exc))
        if read:
            path = read.group(1).removeprefix("file://").removeprefix("file:")
            causes = _JVM_CAUSE.findall(str(exc))
            return tablesvc_errors.TablesvcError(f"{path}: cannot read the file"
                                                 + (f": {causes[0].strip()}" if causes else ""))
        other = _PYTHON_ERROR.findall(str(exc))
        if other:  # any other Python error of a task: one line naming it (a missing file names the path)
            name, message = other[-1]
            return tablesvc_errors.TablesvcError(f"a Spark task failed: {name}: {message.strip()}")
        return exc
    name, message = matches[-1]
    cls = getattr(tablesvc_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, tablesvc_errors.TablesvcError):
        return cls(_SQLSTATE.sub("", message).strip())
    return exc
