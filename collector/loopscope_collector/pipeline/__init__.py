"""Pipeline: the one thread that owns the store's read-write connection (``thread.Pipeline``),
fed ``jobs`` by the receivers, undoing a failed batch's memory (``batch_undo``), and running
streaming detection over each batch's rows (``detection``)."""
