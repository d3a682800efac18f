"""Operations on a file slice's log files that need both the log format and the file names
(``tablesvc.logformat`` and ``tablesvc.fsview`` sit on one floor and may not import each other):
the rollback command block that a rollback appends to a version-6 slice, used by the data
table's rollback and by the metadata table's."""

from tablesvc.logfiles.command_block import append_rollback_command_block

__all__ = ["append_rollback_command_block"]
