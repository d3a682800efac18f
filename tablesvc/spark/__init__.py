"""Spark jobs: Spark schedules tasks over file slices or file groups (packed by bytes,
``task_packing``); pyarrow and fastavro do the work inside each task.  Table data never passes through the driver."""
