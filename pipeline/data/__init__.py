"""The pipeline's view of the user's data before any job: what ``InputDataUri`` holds, and the embedded digits."""
