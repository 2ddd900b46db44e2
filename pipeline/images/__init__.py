"""What each container image holds (its Python, packages and modules), from checked-in records, and the check of a job's imports against it."""
