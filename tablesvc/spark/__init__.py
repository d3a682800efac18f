"""Spark jobs: Spark schedules one task per file slice or file group; pyarrow and
fastavro do the work inside each task.  Table data never passes through the driver."""
